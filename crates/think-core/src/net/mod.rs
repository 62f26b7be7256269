//! The one check every URL the agent fetches on someone else's word goes through (MCP servers
//! today; extensions' network access, browser navigation and skill scripts later), so that a
//! prompt-injected or user-supplied URL cannot reach internal services.
//!
//! The URL is parsed by the `url` crate, which follows the WHATWG URL standard that `fetch`
//! itself uses, and the decision is taken on the parsed host: every spelling of an address
//! (`2852039166`, `0xa9.0xfe.0xa9.0xfe`, `169.254.169.254.`, `[::ffff:a9fe:a9fe]`) is the same
//! [`url::Host`] and gets the same answer. The caller fetches the returned [`url::Url`], never
//! the input string, so what was checked is what is reached. [`GuardedHttp`] applies the same
//! check to every request and every redirect hop.
//!
//! Names are not resolved: a public name whose DNS record points to a private address is not
//! caught here (on Cloudflare, a Worker's `fetch` cannot reach private networks anyway).

mod addr;
pub mod grant;
mod http;

pub use addr::{classify_host, classify_ip, AddressClass};
pub use grant::{check_request, GatewayError, HostPattern, NetworkGrant};
pub use http::{GuardedHttp, MAX_REDIRECTS};
pub use url::Url;

/// Which destinations are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetPolicy {
    /// Loopback (`localhost`, 127.0.0.0/8, `[::1]`), allowed by default for local
    /// development, as in Think.
    pub allow_loopback: bool,
    /// Every other non-public class (private, link-local, unique-local, CGNAT, ...), refused
    /// by default; an app that talks to its own network turns this on on purpose.
    pub allow_private: bool,
}

impl Default for NetPolicy {
    fn default() -> Self {
        NetPolicy { allow_loopback: true, allow_private: false }
    }
}

impl NetPolicy {
    /// Whether a host of `class` may be fetched under this policy.
    pub fn allows(&self, class: AddressClass) -> bool {
        match class {
            AddressClass::Public => true,
            AddressClass::Loopback => self.allow_loopback || self.allow_private,
            _ => self.allow_private,
        }
    }
}

/// Why a URL may not be fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NetError {
    /// Not a URL the WHATWG parser accepts.
    Malformed {
        /// The input as given.
        input: String,
        /// The parser's reason.
        reason: url::ParseError,
    },
    /// A scheme other than http or https.
    Scheme(String),
    /// `user:password@` in the URL, which would be sent to whoever the host is.
    Credentials,
    /// The host is of a class the policy refuses.
    Blocked {
        /// The URL as it would be fetched.
        url: Url,
        /// What its host is.
        class: AddressClass,
    },
}

impl std::fmt::Display for NetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NetError::Malformed { input, reason } => {
                write!(f, "\"{input}\" is not a valid absolute URL ({reason})")
            }
            NetError::Scheme(s) => write!(f, "unsupported URL scheme \"{s}\" (use http or https)"),
            NetError::Credentials => f.write_str(
                "URLs with embedded credentials are not supported; pass them as headers",
            ),
            NetError::Blocked { url, class } => {
                write!(f, "{} is {}", url.host_str().unwrap_or_default(), class.describe())
            }
        }
    }
}

impl std::error::Error for NetError {}

/// Parses `input` as an absolute http(s) URL without credentials or fragment, and checks its
/// host against `policy`. The returned URL is the one to fetch.
pub fn check_url(input: &str, policy: &NetPolicy) -> Result<Url, NetError> {
    let mut url = Url::parse(input.trim())
        .map_err(|reason| NetError::Malformed { input: input.trim().to_owned(), reason })?;
    check_parsed(&mut url, policy)?;
    Ok(url)
}

/// [`check_url`] for a URL already parsed, such as one resolved against a checked base.
pub fn check_parsed(url: &mut Url, policy: &NetPolicy) -> Result<(), NetError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(NetError::Scheme(url.scheme().to_owned()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(NetError::Credentials);
    }
    url.set_fragment(None);
    // `localhost.` is `localhost`, but the runtime's resolver only knows the latter (from
    // /etc/hosts) and would fail with an opaque internal error, or ask DNS.
    if url.domain().is_some_and(|d| d.eq_ignore_ascii_case("localhost.")) {
        url.set_host(Some("localhost")).expect("localhost is a valid host");
    }
    // Special schemes always have a host: the parser refuses `http://` and `http:///x`.
    let class = url.host().map(|h| classify_host(&h)).unwrap_or(AddressClass::Reserved);
    if policy.allows(class) {
        Ok(())
    } else {
        Err(NetError::Blocked { url: url.clone(), class })
    }
}

#[cfg(test)]
mod tests;
