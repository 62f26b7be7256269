//! URL routing the `agents` clients rely on: `/agents/<kebab-class>/<name>[/rest]?_pk=<id>`.

/// The URL slug of an agent class or binding name, exactly as the clients derive it:
/// an all-uppercase name is lowercased with `_`→`-`; otherwise every ASCII capital becomes
/// `-` + lowercase, one leading `-` is dropped, `_`→`-`, and one trailing `-` is dropped.
pub fn camel_case_to_kebab_case(s: &str) -> String {
    if crate::platform::case::to_uppercase(s) == s {
        let lower = crate::platform::case::to_lowercase(s);
        if lower != s {
            return lower.replace('_', "-");
        }
    }
    let mut out = String::with_capacity(s.len() + 8);
    for ch in s.chars() {
        if ch.is_ascii_uppercase() {
            out.push('-');
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    let mut out = match out.strip_prefix('-') {
        Some(rest) => rest.to_owned(),
        None => out,
    }
    .replace('_', "-");
    if out.ends_with('-') {
        out.pop();
    }
    out
}

/// A request path addressed to an agent instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentPath {
    /// The kebab-case namespace (class or binding slug).
    pub namespace: String,
    /// The instance name, percent-decoded.
    pub name: String,
    /// What follows the name, without a leading `/` (e.g. `get-messages`), still encoded.
    pub rest: String,
}

/// Why a path did not resolve to an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RouteError {
    /// Not under the prefix, or too short: not an agent request; fall through.
    NotAgentPath,
    /// Under the prefix but the name is not valid percent-encoded UTF-8: answer 400.
    InvalidName(String),
}

impl std::fmt::Display for RouteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RouteError::NotAgentPath => f.write_str("not an agent path"),
            RouteError::InvalidName(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for RouteError {}

/// Splits `/<prefix>/<ns>/<name>[/rest]` the way `routeAgentRequest` does: empty segments are
/// ignored and the prefix may itself contain `/`. Give the path without the query string.
pub fn parse_agent_path(path: &str, prefix: &str) -> Result<AgentPath, RouteError> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let prefix_parts: Vec<&str> = prefix.split('/').filter(|s| !s.is_empty()).collect();
    if segments.len() < prefix_parts.len() + 2 || segments[..prefix_parts.len()] != prefix_parts[..]
    {
        return Err(RouteError::NotAgentPath);
    }
    let namespace = segments[prefix_parts.len()].to_owned();
    let raw_name = segments[prefix_parts.len() + 1];
    let name = percent_decode(raw_name, false).ok_or_else(|| {
        RouteError::InvalidName(format!(
            "instance name {raw_name:?} is not valid percent-encoded UTF-8"
        ))
    })?;
    let rest = segments[prefix_parts.len() + 2..].join("/");
    Ok(AgentPath { namespace, name, rest })
}

/// The first value of `key` in a query string (with or without the leading `?`, or a whole
/// URL), decoded like `URLSearchParams` (`+` is a space). Undecodable values are skipped.
pub fn query_param(query_or_url: &str, key: &str) -> Option<String> {
    let query = match query_or_url.split_once('?') {
        Some((_, q)) => q,
        None => query_or_url,
    };
    let query = query.split('#').next().unwrap_or("");
    for pair in query.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if percent_decode(k, true).as_deref() == Some(key) {
            if let Some(v) = percent_decode(v, true) {
                return Some(v);
            }
        }
    }
    None
}

/// The connection id the client chose (`_pk`), if it sent one.
pub fn connection_id_from_url(url: &str) -> Option<String> {
    query_param(url, "_pk").filter(|s| !s.is_empty())
}

/// Decodes `%XX` escapes (and `+` as space in query strings). `None` for a malformed escape
/// or a result that is not UTF-8.
pub fn percent_decode(s: &str, plus_as_space: bool) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hi = bytes.get(i + 1).and_then(|b| (*b as char).to_digit(16))?;
                let lo = bytes.get(i + 2).and_then(|b| (*b as char).to_digit(16))?;
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            b'+' if plus_as_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kebab_case_reference_examples() {
        for (input, want) in [
            ("MyAgent", "my-agent"),
            ("ThinkClientToolsAgent", "think-client-tools-agent"),
            ("ThinkRecoveryE2EAgent", "think-recovery-e2-e-agent"),
            ("MY_AGENT", "my-agent"),
            ("ThinkAgent", "think-agent"),
            ("ChatAgent", "chat-agent"),
            ("AIChatAgent", "a-i-chat-agent"),
            ("MCPServer", "m-c-p-server"),
            ("HTTPClient", "h-t-t-p-client"),
            ("A", "a"),
            ("AB", "ab"),
            ("TestAssistantAgentAgent", "test-assistant-agent-agent"),
            ("SCREAMING_CASE", "screaming-case"),
            ("already-kebab", "already-kebab"),
            ("my_agent", "my-agent"),
            ("MyAgent_", "my-agent"),
            ("", ""),
            ("123", "123"),
        ] {
            assert_eq!(camel_case_to_kebab_case(input), want, "{input}");
        }
    }

    #[test]
    fn parses_agent_paths() {
        assert_eq!(
            parse_agent_path("/agents/my-agent/default", "agents"),
            Ok(AgentPath {
                namespace: "my-agent".into(),
                name: "default".into(),
                rest: String::new()
            })
        );
        assert_eq!(
            parse_agent_path("/agents/think-agent/room%201/get-messages", "agents"),
            Ok(AgentPath {
                namespace: "think-agent".into(),
                name: "room 1".into(),
                rest: "get-messages".into()
            })
        );
        assert_eq!(
            parse_agent_path("//agents//p/n/sub/child-agent/c%2Fd/", "agents").unwrap().rest,
            "sub/child-agent/c%2Fd"
        );
        assert_eq!(parse_agent_path("/agents/a/%C3%A9t%C3%A9", "agents").unwrap().name, "été");
        assert_eq!(parse_agent_path("/api/v1/a/b", "api/v1").unwrap().name, "b");
        assert_eq!(parse_agent_path("/agents/only-ns", "agents"), Err(RouteError::NotAgentPath));
        assert_eq!(parse_agent_path("/other/a/b", "agents"), Err(RouteError::NotAgentPath));
        assert_eq!(parse_agent_path("/", "agents"), Err(RouteError::NotAgentPath));
        assert!(matches!(
            parse_agent_path("/agents/a/%zz", "agents"),
            Err(RouteError::InvalidName(_))
        ));
        assert!(matches!(
            parse_agent_path("/agents/a/%ff", "agents"),
            Err(RouteError::InvalidName(_))
        ));
        assert!(matches!(
            parse_agent_path("/agents/a/%4", "agents"),
            Err(RouteError::InvalidName(_))
        ));
    }

    #[test]
    fn extracts_query_params() {
        let url = "wss://h/agents/my-agent/default?_pk=abc-123&x=1";
        assert_eq!(connection_id_from_url(url).as_deref(), Some("abc-123"));
        assert_eq!(query_param(url, "x").as_deref(), Some("1"));
        assert_eq!(query_param("?a=b%20c+d", "a").as_deref(), Some("b c d"));
        assert_eq!(query_param("_pk=&_pk=z", "_pk").as_deref(), Some(""));
        assert_eq!(connection_id_from_url("/p?_pk="), None);
        assert_eq!(connection_id_from_url("/p?x=1#_pk=2"), None);
        assert_eq!(connection_id_from_url("/p"), None);
        assert_eq!(query_param("a=%zz&a=ok", "a").as_deref(), Some("ok"));
        assert_eq!(query_param("flag", "flag").as_deref(), Some(""));
    }
}
