use super::*;
use AddressClass::*;

/// Spellings of a URL, the host `fetch` would connect to (as the WHATWG parser serialises it),
/// and its class.
const SPELLINGS: &[(&str, &str, AddressClass)] = &[
    // The metadata address, every way the URL standard accepts it.
    ("http://169.254.169.254/latest", "169.254.169.254", LinkLocal),
    ("http://2852039166/", "169.254.169.254", LinkLocal),
    ("http://0xa9.0xfe.0xa9.0xfe/", "169.254.169.254", LinkLocal),
    ("http://0XA9FEA9FE/", "169.254.169.254", LinkLocal),
    ("http://0251.0376.0251.0376/", "169.254.169.254", LinkLocal),
    ("http://169.16689662/", "169.254.169.254", LinkLocal),
    ("http://169.254.43518/", "169.254.169.254", LinkLocal),
    ("http://169.254.169.254./", "169.254.169.254", LinkLocal),
    ("http://%31%36%39.254.169.254/", "169.254.169.254", LinkLocal),
    ("http://\u{ff11}\u{ff16}\u{ff19}\u{3002}254.169.254/", "169.254.169.254", LinkLocal),
    ("http://[0:0:0:0:0:ffff:a9fe:a9fe]/", "[::ffff:a9fe:a9fe]", LinkLocal),
    ("http://[::ffff:169.254.169.254]/", "[::ffff:a9fe:a9fe]", LinkLocal),
    ("http://[2002:a9fe:a9fe::1]/", "[2002:a9fe:a9fe::1]", LinkLocal),
    ("http://[64:ff9b::a9fe:a9fe]/", "[64:ff9b::a9fe:a9fe]", LinkLocal),
    ("http://[fe80::1]/", "[fe80::1]", LinkLocal),
    ("http://[febf::1]/", "[febf::1]", LinkLocal),
    // RFC 1918.
    ("http://10.1/", "10.0.0.1", Private),
    ("http://10.0.0.1:8080/mcp", "10.0.0.1", Private),
    ("HTTP://012.0.0.1/", "10.0.0.1", Private),
    ("http://192.168.0.1./", "192.168.0.1", Private),
    ("http://3232235521/", "192.168.0.1", Private),
    ("http://172.16.0.1/", "172.16.0.1", Private),
    ("http://172.31.255.255/", "172.31.255.255", Private),
    ("http://[0000::ffff:10.0.0.1]/", "[::ffff:a00:1]", Private),
    ("http://[::10.0.0.1]/", "[::a00:1]", Private),
    (
        "http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/",
        "[2001:0:4136:e378:8000:63bf:f5ff:fffe]",
        Private,
    ),
    // Unspecified and "this network": Linux connects 0.0.0.0 to this machine.
    ("http://0/", "0.0.0.0", Unspecified),
    ("http://0.0.0.0:8080/", "0.0.0.0", Unspecified),
    ("http://0x0/", "0.0.0.0", Unspecified),
    ("http://[::]/", "[::]", Unspecified),
    ("http://0.1.2.3/", "0.1.2.3", ThisNetwork),
    // Other special ranges.
    ("http://100.64.0.1/", "100.64.0.1", SharedCgnat),
    ("http://100.127.255.254/", "100.127.255.254", SharedCgnat),
    ("http://198.18.0.1/", "198.18.0.1", Benchmark),
    ("http://198.19.255.1/", "198.19.255.1", Benchmark),
    ("http://255.255.255.255/", "255.255.255.255", Broadcast),
    ("http://4294967295/", "255.255.255.255", Broadcast),
    ("http://224.0.0.1/", "224.0.0.1", Multicast),
    ("http://[ff02::1]/", "[ff02::1]", Multicast),
    ("http://192.0.2.1/", "192.0.2.1", Documentation),
    ("http://198.51.100.7/", "198.51.100.7", Documentation),
    ("http://203.0.113.9/", "203.0.113.9", Documentation),
    ("http://[2001:db8::1]/", "[2001:db8::1]", Documentation),
    ("http://240.0.0.1/", "240.0.0.1", Reserved),
    ("http://192.0.0.170/", "192.0.0.170", Reserved),
    ("http://[100::1]/", "[100::1]", Reserved),
    ("http://[64:ff9b:1::a00:1]/", "[64:ff9b:1::a00:1]", Reserved),
    ("http://[fd00::1]/", "[fd00::1]", UniqueLocal),
    ("http://[FC00::1]/", "[fc00::1]", UniqueLocal),
    ("http://[fec0::1]/", "[fec0::1]", SiteLocal),
    (
        "http://metadata.google.internal/computeMetadata/v1/",
        "metadata.google.internal",
        PrivateName,
    ),
    ("http://METADATA.google.internal./", "metadata.google.internal.", PrivateName),
    ("http://printer.local/", "printer.local", PrivateName),
    ("http://router.home.arpa/", "router.home.arpa", PrivateName),
    // Loopback: allowed by default, as in Think.
    ("http://127.0.0.1:8787/mcp", "127.0.0.1", Loopback),
    ("http://127.1/", "127.0.0.1", Loopback),
    ("http://0x7f000001/", "127.0.0.1", Loopback),
    ("http://017700000001/", "127.0.0.1", Loopback),
    ("http://127.255.255.254/", "127.255.255.254", Loopback),
    ("http://localhost:3000/", "localhost", Loopback),
    ("http://LocalHost/", "localhost", Loopback),
    ("http://localhost./", "localhost", Loopback),
    ("http://LOCALHOST.:8787/mcp", "localhost", Loopback),
    ("http://mcp.localhost/", "mcp.localhost", Loopback),
    ("http://[::1]:3000/sse", "[::1]", Loopback),
    ("http://[0:0:0:0:0:0:0:1]/", "[::1]", Loopback),
    ("http://[::ffff:127.0.0.1]/", "[::ffff:7f00:1]", Loopback),
    // Public, including look-alikes the old hand-written parser refused.
    ("http://010.0.0.1/", "8.0.0.1", Public),
    ("http://[fc::1]/", "[fc::1]", Public),
    ("http://172.32.0.1/", "172.32.0.1", Public),
    ("http://100.128.0.1/", "100.128.0.1", Public),
    ("http://198.20.0.1/", "198.20.0.1", Public),
    ("http://8.8.8.8/", "8.8.8.8", Public),
    ("http://134744072/", "8.8.8.8", Public),
    ("http://[2002:808:808::1]/", "[2002:808:808::1]", Public),
    ("http://[64:ff9b::808:808]/", "[64:ff9b::808:808]", Public),
    ("http://[2606:4700::1111]/", "[2606:4700::1111]", Public),
    ("https://MCP.Example.com:443/mcp", "mcp.example.com", Public),
    ("https://mcp.example.com./", "mcp.example.com.", Public),
    ("https://localhost.example.com/", "localhost.example.com", Public),
    ("https://internal.example.com/", "internal.example.com", Public),
    ("https://xn--nxasmq6b.example/", "xn--nxasmq6b.example", Public),
];

#[test]
fn every_spelling_is_classified_by_the_address_fetch_reaches() {
    assert!(SPELLINGS.len() >= 40);
    let open = NetPolicy { allow_loopback: true, allow_private: true };
    for &(input, host, class) in SPELLINGS {
        let url = check_url(input, &open).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(url.host_str(), Some(host), "{input}");
        assert_eq!(classify_host(&url.host().unwrap()), class, "{input}");
    }
}

#[test]
fn the_default_policy_refuses_all_but_public_and_loopback() {
    let policy = NetPolicy::default();
    for &(input, host, class) in SPELLINGS {
        match check_url(input, &policy) {
            Ok(url) => {
                assert!(matches!(class, Public | Loopback), "{input} was allowed");
                assert_eq!(url.host_str(), Some(host));
            }
            Err(NetError::Blocked { url, class: got }) => {
                assert!(!matches!(class, Public | Loopback), "{input} was refused");
                assert_eq!((url.host_str(), got), (Some(host), class), "{input}");
            }
            Err(e) => panic!("{input}: {e}"),
        }
    }
}

#[test]
fn loopback_can_be_refused_and_private_allowed() {
    let strict = NetPolicy { allow_loopback: false, allow_private: false };
    assert!(check_url("http://127.1/", &strict).is_err());
    assert!(check_url("http://[::1]/", &strict).is_err());
    assert!(check_url("https://example.com/", &strict).is_ok());
    let open = NetPolicy { allow_loopback: false, allow_private: true };
    assert!(check_url("http://10.0.0.1/", &open).is_ok());
    assert!(check_url("http://localhost/", &open).is_ok());
}

#[test]
fn the_checked_url_is_what_gets_fetched() {
    let p = NetPolicy::default();
    let url = |s: &str| check_url(s, &p).unwrap().to_string();
    assert_eq!(url("HTTPS://Example.COM:443"), "https://example.com/");
    assert_eq!(
        url(" http://h.example:8080/a/./b/../mcp?x=1#frag "),
        "http://h.example:8080/a/mcp?x=1"
    );
    assert_eq!(url("http://[::1]:3000/sse"), "http://[::1]:3000/sse");
    assert_eq!(url("http://127.1:9/x"), "http://127.0.0.1:9/x");
}

#[test]
fn unusable_urls_say_why() {
    let p = NetPolicy::default();
    let err = |s: &str| check_url(s, &p).unwrap_err();
    assert_eq!(err("ftp://example.com/"), NetError::Scheme("ftp".into()));
    assert_eq!(err("file:///etc/passwd"), NetError::Scheme("file".into()));
    assert_eq!(err("https://user:pw@example.com/"), NetError::Credentials);
    assert_eq!(err("http://user@10.0.0.1/"), NetError::Credentials);
    for bad in [
        "/relative",
        "http://",
        "http://1.2.3.4.5/",
        "http://256.0.0.1/",
        "http://[::1/",
        "https://h:99999/",
        "http://0x100000000/",
        "http://[fe80::1%25eth0]/",
        "http://foo.0x10/",
        "http://1.2.3.09/",
    ] {
        assert!(matches!(err(bad), NetError::Malformed { .. }), "{bad}");
    }
    assert_eq!(err("http://2852039166/").to_string(), "169.254.169.254 is a link-local address");
    assert_eq!(
        err("http://1.2.3.4.5/").to_string(),
        "\"http://1.2.3.4.5/\" is not a valid absolute URL (invalid IPv4 address)"
    );
}
