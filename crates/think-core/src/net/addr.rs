//! What kind of address a parsed URL host names, decided on the address itself (after the
//! WHATWG parser has turned `2852039166`, `0xa9.0xfe.0xa9.0xfe` or `[::ffff:a9fe:a9fe]` into
//! the one address `fetch` would connect to), never on its spelling.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::Host;

/// The class of a host, as far as an outbound-request filter cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AddressClass {
    /// A globally routable address, or a DNS name not known to be local.
    Public,
    /// 127.0.0.0/8, `::1`, `localhost` and `*.localhost`: this machine.
    Loopback,
    /// 0.0.0.0 and `::`, which Linux connects to this machine.
    Unspecified,
    /// 0.0.0.0/8 other than 0.0.0.0: "this network".
    ThisNetwork,
    /// RFC 1918: 10/8, 172.16/12, 192.168/16.
    Private,
    /// 100.64.0.0/10, carrier-grade NAT (RFC 6598).
    SharedCgnat,
    /// 169.254.0.0/16 and fe80::/10, where cloud metadata services live.
    LinkLocal,
    /// fc00::/7 (RFC 4193).
    UniqueLocal,
    /// fec0::/10, the deprecated site-local range (RFC 3879).
    SiteLocal,
    /// 198.18.0.0/15, network benchmarking (RFC 2544).
    Benchmark,
    /// 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20.
    Documentation,
    /// 224.0.0.0/4 and ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// 240.0.0.0/4, 192.0.0.0/24, 100::/64, 64:ff9b:1::/48 and other special-purpose ranges.
    Reserved,
    /// A name of a private namespace: `metadata.google.internal`, `*.internal`, `*.local`,
    /// `*.home.arpa`.
    PrivateName,
}

impl AddressClass {
    /// Whether a default policy lets a request go there.
    pub fn is_public(self) -> bool {
        self == AddressClass::Public
    }

    /// A short phrase for error messages ("a link-local address").
    pub fn describe(self) -> &'static str {
        match self {
            AddressClass::Public => "a public address",
            AddressClass::Loopback => "a loopback address",
            AddressClass::Unspecified => "the unspecified address",
            AddressClass::ThisNetwork => "a \"this network\" (0.0.0.0/8) address",
            AddressClass::Private => "a private (RFC 1918) address",
            AddressClass::SharedCgnat => "a carrier-grade NAT (100.64.0.0/10) address",
            AddressClass::LinkLocal => "a link-local address",
            AddressClass::UniqueLocal => "a unique-local (fc00::/7) address",
            AddressClass::SiteLocal => "a site-local (fec0::/10) address",
            AddressClass::Benchmark => "a benchmarking (198.18.0.0/15) address",
            AddressClass::Documentation => "a documentation address",
            AddressClass::Multicast => "a multicast address",
            AddressClass::Broadcast => "the broadcast address",
            AddressClass::Reserved => "a reserved address",
            AddressClass::PrivateName => "a private network name",
        }
    }
}

/// Classifies a host as the WHATWG parser produced it.
pub fn classify_host(host: &Host<&str>) -> AddressClass {
    match host {
        Host::Ipv4(a) => classify_ip(IpAddr::V4(*a)),
        Host::Ipv6(a) => classify_ip(IpAddr::V6(*a)),
        Host::Domain(d) => classify_domain(d),
    }
}

/// Classifies an address; IPv6 forms that carry an IPv4 address (mapped, compatible, 6to4,
/// NAT64, Teredo) take the class of the address they carry.
pub fn classify_ip(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(a) => classify_v4(a),
        IpAddr::V6(a) => classify_v6(a),
    }
}

fn classify_v4(a: Ipv4Addr) -> AddressClass {
    let [o0, o1, o2, _] = a.octets();
    if a.is_unspecified() {
        AddressClass::Unspecified
    } else if a.is_loopback() {
        AddressClass::Loopback
    } else if o0 == 0 {
        AddressClass::ThisNetwork
    } else if a.is_private() {
        AddressClass::Private
    } else if o0 == 100 && (o1 & 0xc0) == 64 {
        AddressClass::SharedCgnat
    } else if a.is_link_local() {
        AddressClass::LinkLocal
    } else if o0 == 198 && (o1 & 0xfe) == 18 {
        AddressClass::Benchmark
    } else if a.is_documentation() {
        AddressClass::Documentation
    } else if a.is_broadcast() {
        AddressClass::Broadcast
    } else if a.is_multicast() {
        AddressClass::Multicast
    } else if o0 >= 240 || (o0 == 192 && o1 == 0 && o2 == 0) {
        AddressClass::Reserved
    } else {
        AddressClass::Public
    }
}

fn classify_v6(a: Ipv6Addr) -> AddressClass {
    let s = a.segments();
    let low32 = Ipv4Addr::from(((s[6] as u32) << 16) | s[7] as u32);
    if a.is_unspecified() {
        AddressClass::Unspecified
    } else if a.is_loopback() {
        AddressClass::Loopback
    } else if let Some(v4) = a.to_ipv4() {
        // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (the deprecated compatible form).
        classify_v4(v4)
    } else if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        // 64:ff9b::/96, NAT64 well-known prefix: the gateway connects to the IPv4 address.
        classify_v4(low32)
    } else if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        // 64:ff9b:1::/48, NAT64 for local use (RFC 8215).
        AddressClass::Reserved
    } else if s[0] == 0x2002 {
        // 6to4: the relay forwards to the IPv4 address in bits 16..48.
        classify_v4(Ipv4Addr::from(((s[1] as u32) << 16) | s[2] as u32))
    } else if s[0] == 0x2001 && s[1] == 0 {
        // Teredo: the client's IPv4 address, inverted, in the last 32 bits.
        classify_v4(Ipv4Addr::from(!u32::from(low32)))
    } else if a.is_multicast() {
        AddressClass::Multicast
    } else if a.is_unique_local() {
        AddressClass::UniqueLocal
    } else if a.is_unicast_link_local() {
        AddressClass::LinkLocal
    } else if (s[0] & 0xffc0) == 0xfec0 {
        AddressClass::SiteLocal
    } else if (s[0] == 0x2001 && s[1] == 0x0db8) || (s[0] & 0xfff0) == 0x3ff0 {
        AddressClass::Documentation
    } else if s[0] == 0x0100 && s[1..4] == [0; 3] {
        // 100::/64, discard-only (RFC 6666).
        AddressClass::Reserved
    } else {
        AddressClass::Public
    }
}

/// Names are not resolved (a Worker cannot ask DNS before it fetches); only names that are
/// local by definition are classified.
fn classify_domain(domain: &str) -> AddressClass {
    let d = domain.strip_suffix('.').unwrap_or(domain).to_ascii_lowercase();
    let under = |suffix: &str| d == suffix || d.ends_with(&format!(".{suffix}"));
    if under("localhost") {
        AddressClass::Loopback
    } else if under("internal") || under("local") || under("home.arpa") {
        AddressClass::PrivateName
    } else {
        AddressClass::Public
    }
}
