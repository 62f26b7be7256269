//! The network gateway's decision: every outbound request of a sandbox granted network
//! hosts (an extension's isolate) goes through the host (Worker Loader's `globalOutbound`,
//! `js/extensions/gateway.mjs`), which
//! lets it pass only to a host the manifest lists (exact names, `*.example.com` wildcards,
//! optionally with a port) and, whatever the list says, refuses private and loopback
//! addresses unless the app opted in ([`super::check_url`] decides those).

use serde::{Deserialize, Serialize};

use super::{check_url, NetError, NetPolicy, Url};

/// One entry of `permissions.network`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// `*.example.com`: any subdomain of `host`, not `host` itself.
    wildcard: bool,
    /// The canonical host (lowercase, punycode, IP addresses in their one spelling).
    host: String,
    /// Only this port, when given.
    port: Option<u16>,
}

/// Why a network entry or a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GatewayError {
    /// A `permissions.network` entry is not a host pattern.
    BadPattern {
        /// The entry as given.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The request's host is not one the manifest lists.
    NotListed {
        /// The host asked for.
        host: String,
        /// The manifest's list.
        allowed: Vec<String>,
    },
    /// The URL is malformed, not http(s), or names a private or loopback address.
    Address(NetError),
}

impl std::fmt::Display for GatewayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GatewayError::BadPattern { pattern, reason } => {
                write!(f, "network host {pattern:?} is not a host pattern: {reason}")
            }
            GatewayError::NotListed { host, allowed } if allowed.is_empty() => write!(
                f,
                "network access to {host} is refused: this extension has no network permission"
            ),
            GatewayError::NotListed { host, allowed } => write!(
                f,
                "network access to {host} is refused: this extension may reach only {}",
                allowed.join(", ")
            ),
            GatewayError::Address(e @ NetError::Blocked { .. }) => write!(
                f,
                "network access refused: {e} (the app allows private and loopback addresses \
                 with THINK_ALLOW_PRIVATE_NETWORK=true)"
            ),
            GatewayError::Address(e) => write!(f, "network access refused: {e}"),
        }
    }
}

impl std::error::Error for GatewayError {}

impl From<NetError> for GatewayError {
    fn from(e: NetError) -> Self {
        GatewayError::Address(e)
    }
}

impl HostPattern {
    /// Parses `api.example.com`, `*.example.com`, `127.0.0.1:8080` or `[::1]`.
    pub fn parse(pattern: &str) -> Result<Self, GatewayError> {
        let bad = |reason: &str| GatewayError::BadPattern {
            pattern: pattern.to_owned(),
            reason: reason.to_owned(),
        };
        let text = pattern.trim();
        if text.is_empty() {
            return Err(bad("it is empty"));
        }
        if text.contains("://") || text.contains(['/', '@', '?', '#']) {
            return Err(bad("list a host name (and port), not a URL"));
        }
        let (wildcard, rest) = match text.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        if rest.contains('*') {
            return Err(bad("only a leading \"*.\" wildcard is supported"));
        }
        let url = Url::parse(&format!("http://{rest}/")).map_err(|e| bad(&e.to_string()))?;
        let host = url.host_str().ok_or_else(|| bad("it has no host"))?.to_owned();
        if wildcard && url.domain().is_none() {
            return Err(bad("a wildcard needs a domain name, not an address"));
        }
        // `Url` drops a scheme's default port; an explicit `:80` still means port 80.
        let port = url.port().or_else(|| rest.ends_with(":80").then_some(80));
        let host = host.strip_suffix('.').unwrap_or(&host).to_owned();
        Ok(Self { wildcard, host, port })
    }

    /// Whether a request to `url` is covered by this pattern.
    pub fn matches(&self, url: &Url) -> bool {
        let Some(host) = url.host_str() else { return false };
        let host = host.strip_suffix('.').unwrap_or(host);
        let host_ok = if self.wildcard {
            host.strip_suffix(self.host.as_str()).is_some_and(|head| head.ends_with('.'))
        } else {
            host == self.host
        };
        host_ok && self.port.is_none_or(|p| url.port_or_known_default() == Some(p))
    }
}

/// What one extension's isolate may reach: the gateway's props.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkGrant {
    /// The manifest's `permissions.network`.
    pub hosts: Vec<String>,
    /// The app's opt-in to private and loopback addresses.
    pub allow_private: bool,
}

/// Decides one outbound request: the URL to fetch (normalized, what was checked) or why not.
pub fn check_request(url: &str, grant: &NetworkGrant) -> Result<Url, GatewayError> {
    let policy =
        NetPolicy { allow_loopback: grant.allow_private, allow_private: grant.allow_private };
    let parsed = check_url(url, &NetPolicy { allow_loopback: true, allow_private: true })?;
    let patterns =
        grant.hosts.iter().map(|h| HostPattern::parse(h)).collect::<Result<Vec<_>, _>>()?;
    if !patterns.iter().any(|p| p.matches(&parsed)) {
        return Err(GatewayError::NotListed {
            host: parsed.host_str().unwrap_or_default().to_owned(),
            allowed: grant.hosts.clone(),
        });
    }
    Ok(check_url(parsed.as_str(), &policy)?)
}
