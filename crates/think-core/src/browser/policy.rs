//! Where the browser may go: every URL navigation or a quick action names passes
//! [`crate::net::check_url`] first (http(s) only, no credentials), private and loopback hosts
//! are refused unless the allow-list names them, and a non-empty allow-list refuses every
//! host it does not name. CDP otherwise lets a prompt-injected page take the agent anywhere.

use crate::net::{check_url, NetError, NetPolicy, Url};

use super::BrowserError;

/// The allow-list of hosts (`example.com`, `*.example.com`, `127.0.0.1`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPolicy {
    hosts: Vec<String>,
}

impl HostPolicy {
    /// The policy allowing `hosts` (compared case-insensitively; `*.` matches subdomains).
    pub fn new(hosts: &[String]) -> Self {
        let hosts = hosts
            .iter()
            .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect();
        Self { hosts }
    }

    /// Parses `THINK_BROWSER_ALLOW`: hosts separated by commas or spaces.
    pub fn parse_list(list: &str) -> Vec<String> {
        list.split([',', ' ', '\n'])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn listed(&self, host: &str) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        self.hosts.iter().any(|h| match h.strip_prefix("*.") {
            Some(base) => host == base || host.ends_with(&format!(".{base}")),
            None => *h == host,
        })
    }

    /// Checks `input` and returns the URL to open; `about:blank` always passes.
    pub fn check(&self, input: &str) -> Result<Url, BrowserError> {
        if input.trim() == "about:blank" {
            return Url::parse("about:blank")
                .map_err(|e| BrowserError::InvalidInput(e.to_string()));
        }
        let strict = NetPolicy { allow_loopback: false, allow_private: false };
        let url = match check_url(input, &strict) {
            Ok(url) => url,
            Err(NetError::Blocked { url, class }) => {
                let host = url.host_str().unwrap_or_default().to_owned();
                if !self.listed(&host) {
                    return Err(BrowserError::Refused(format!(
                        "The browser may not open {url}: {host} is {}. Add it to the browser allow-list (THINK_BROWSER_ALLOW) to allow it.",
                        class.describe()
                    )));
                }
                url
            }
            Err(e) => {
                return Err(BrowserError::InvalidInput(format!("Invalid URL {input:?}: {e}")))
            }
        };
        let host = url.host_str().unwrap_or_default();
        if !self.hosts.is_empty() && !self.listed(host) {
            return Err(BrowserError::Refused(format!(
                "The browser may not open {url}: {host} is not in the browser allow-list ({}).",
                self.hosts.join(", ")
            )));
        }
        Ok(url)
    }
}
