//! The little URL handling the MCP client needs (normalising server URLs, resolving the legacy
//! SSE `endpoint` against the stream URL, comparing origins, refusing private addresses),
//! kept here rather than pulling a full URL crate and its IDNA tables into the wasm binary.

/// An absolute http(s) URL split into the parts the client compares and rebuilds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpUrl {
    /// `http` or `https`, lower case.
    pub scheme: String,
    /// Host as written in the URL, lower case; IPv6 literals keep their brackets.
    pub host: String,
    /// Explicit non-default port.
    pub port: Option<u16>,
    /// Everything between the authority and the query, at least `/`.
    pub path: String,
    /// The query including its leading `?`, or empty.
    pub query: String,
}

impl HttpUrl {
    /// Parses an absolute http or https URL; the fragment is dropped.
    pub fn parse(input: &str) -> Result<HttpUrl, String> {
        let input = input.trim();
        let (scheme, rest) =
            input.split_once("://").ok_or_else(|| format!("\"{input}\" is not an absolute URL"))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(format!("unsupported URL scheme \"{scheme}\" (use http or https)"));
        }
        let rest = rest.split('#').next().unwrap_or("");
        let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let authority = &rest[..auth_end];
        let tail = &rest[auth_end..];
        if authority.contains('@') {
            return Err(
                "URLs with embedded credentials are not supported; pass them as headers".into()
            );
        }
        let (host, port) = split_host_port(authority)?;
        if host.is_empty() {
            return Err(format!("\"{input}\" has no host"));
        }
        let default_port = if scheme == "https" { 443 } else { 80 };
        let (path, query) = match tail.find('?') {
            Some(i) => (&tail[..i], &tail[i..]),
            None => (tail, ""),
        };
        Ok(HttpUrl {
            scheme,
            host: host.to_ascii_lowercase(),
            port: port.filter(|p| *p != default_port),
            path: if path.is_empty() { "/".into() } else { remove_dot_segments(path) },
            query: query.to_owned(),
        })
    }

    /// `scheme://host[:port]`, what same-origin checks compare.
    pub fn origin(&self) -> String {
        match self.port {
            Some(p) => format!("{}://{}:{}", self.scheme, self.host, p),
            None => format!("{}://{}", self.scheme, self.host),
        }
    }

    /// Resolves `reference` (absolute, scheme-relative, absolute-path, query-only or relative)
    /// against this URL, as a browser would.
    pub fn join(&self, reference: &str) -> Result<HttpUrl, String> {
        let r = reference.trim();
        if has_scheme(r) {
            return HttpUrl::parse(r);
        }
        if let Some(rest) = r.strip_prefix("//") {
            return HttpUrl::parse(&format!("{}://{rest}", self.scheme));
        }
        let r = r.split('#').next().unwrap_or("");
        if r.is_empty() {
            return Ok(self.clone());
        }
        if r.starts_with('?') {
            return Ok(HttpUrl { query: r.to_owned(), ..self.clone() });
        }
        let (path, query) = match r.find('?') {
            Some(i) => (&r[..i], &r[i..]),
            None => (r, ""),
        };
        let merged = if path.starts_with('/') {
            path.to_owned()
        } else {
            let dir = match self.path.rfind('/') {
                Some(i) => &self.path[..=i],
                None => "/",
            };
            format!("{dir}{path}")
        };
        Ok(HttpUrl { path: remove_dot_segments(&merged), query: query.to_owned(), ..self.clone() })
    }

    /// Whether the host is a literal private, link-local or metadata address. Loopback stays
    /// allowed for local development, as in the reference client.
    pub fn is_private_address(&self) -> bool {
        let host = self.host.as_str();
        if matches!(host, "0.0.0.0" | "[::]" | "metadata.google.internal") {
            return true;
        }
        if let Some(octets) = parse_ipv4(host) {
            return is_private_ipv4(octets);
        }
        if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            return is_private_ipv6(inner);
        }
        false
    }
}

impl std::fmt::Display for HttpUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}{}", self.origin(), self.path, self.query)
    }
}

fn has_scheme(s: &str) -> bool {
    match s.find(':') {
        Some(i) if i > 0 => {
            let scheme = &s[..i];
            scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        _ => false,
    }
}

fn split_host_port(authority: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if authority.starts_with('[') {
        match authority.find(']') {
            Some(i) => {
                let rest = &authority[i + 1..];
                match rest.strip_prefix(':') {
                    Some(p) => (&authority[..=i], Some(p)),
                    None if rest.is_empty() => (&authority[..=i], None),
                    None => return Err(format!("malformed host \"{authority}\"")),
                }
            }
            None => return Err(format!("malformed host \"{authority}\"")),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None | Some("") => None,
        Some(p) => Some(p.parse::<u16>().map_err(|_| format!("invalid port \"{p}\""))?),
    };
    Ok((host, port))
}

/// RFC 3986 §5.2.4, so `../messages` and `./x` resolve as a browser would.
fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len().saturating_sub(1);
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." => {
                if i == last {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > 1 {
                    out.pop();
                }
                if i == last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    let joined = out.join("/");
    if joined.starts_with('/') {
        joined
    } else {
        format!("/{joined}")
    }
}

fn parse_ipv4(host: &str) -> Option<[u8; 4]> {
    let parts: Vec<&str> = host.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut out = [0u8; 4];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || p.len() > 3 || !p.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        out[i] = p.parse().ok()?;
    }
    Some(out)
}

fn is_private_ipv4([a, b, _, _]: [u8; 4]) -> bool {
    a == 10
        || (a == 172 && (16..=31).contains(&b))
        || (a == 192 && b == 168)
        || (a == 169 && b == 254)
        || a == 0
}

fn is_private_ipv6(addr: &str) -> bool {
    let addr = addr.to_ascii_lowercase();
    if addr.starts_with("fc") || addr.starts_with("fd") {
        return true;
    }
    let b = addr.as_bytes();
    if b.len() >= 4
        && &addr[..2] == "fe"
        && matches!(b[2], b'8' | b'9' | b'a' | b'b')
        && b[3].is_ascii_hexdigit()
    {
        return true;
    }
    if let Some(mapped) = addr.strip_prefix("::ffff:") {
        if let Some(v4) = parse_ipv4(mapped) {
            return is_private_ipv4(v4);
        }
        if let Some((hi, lo)) = mapped.split_once(':') {
            if let (Ok(hi), Ok(lo)) = (u16::from_str_radix(hi, 16), u16::from_str_radix(lo, 16)) {
                let [h1, h2] = hi.to_be_bytes();
                let [l1, l2] = lo.to_be_bytes();
                return is_private_ipv4([h1, h2, l1, l2]);
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_normalises_like_a_browser() {
        let u = HttpUrl::parse("HTTPS://Example.COM:443").unwrap();
        assert_eq!(u.to_string(), "https://example.com/");
        let u = HttpUrl::parse("http://h:8080/a/./b/../mcp?x=1#frag").unwrap();
        assert_eq!(u.to_string(), "http://h:8080/a/mcp?x=1");
        assert!(HttpUrl::parse("ftp://h/").is_err());
        assert!(HttpUrl::parse("/relative").is_err());
        assert!(HttpUrl::parse("https://user:pw@h/").is_err());
        assert!(HttpUrl::parse("https://h:99999/").is_err());
        assert_eq!(HttpUrl::parse("http://[::1]:3000/sse").unwrap().origin(), "http://[::1]:3000");
    }

    #[test]
    fn join_resolves_sse_endpoints() {
        let base = HttpUrl::parse("https://h.example/v1/sse?token=1").unwrap();
        let j = |r: &str| base.join(r).unwrap().to_string();
        assert_eq!(j("/messages?sessionId=abc"), "https://h.example/messages?sessionId=abc");
        assert_eq!(j("messages?sessionId=abc"), "https://h.example/v1/messages?sessionId=abc");
        assert_eq!(j("../messages"), "https://h.example/messages");
        assert_eq!(j("?sessionId=z"), "https://h.example/v1/sse?sessionId=z");
        assert_eq!(j("https://other.example/m"), "https://other.example/m");
        assert_eq!(j("//cdn.example/m"), "https://cdn.example/m");
    }

    #[test]
    fn private_addresses_are_refused_but_loopback_is_not() {
        let private = |u: &str| HttpUrl::parse(u).unwrap().is_private_address();
        assert!(private("http://10.1.2.3/"));
        assert!(private("http://172.20.0.1/"));
        assert!(private("http://192.168.1.1/"));
        assert!(private("http://169.254.169.254/latest"));
        assert!(private("http://0.0.0.0/"));
        assert!(private("http://[fd00::1]/"));
        assert!(private("http://[febf::1]/"));
        assert!(private("http://[::ffff:10.0.0.1]/"));
        assert!(private("http://[::ffff:a00:1]/"));
        assert!(private("http://metadata.google.internal/"));
        assert!(!private("http://127.0.0.1:8787/mcp"));
        assert!(!private("http://localhost/"));
        assert!(!private("http://[::1]/"));
        assert!(!private("http://[fec0::1]/"));
        assert!(!private("https://mcp.example.com/"));
        assert!(!private("http://172.32.0.1/"));
    }
}
