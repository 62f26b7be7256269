//! `codemode.search(query)`: ranks every connector method against the query's words, with
//! Think's field weights (path 12, method 10, connector 8, description 5), at most 50 results.

use serde::Serialize;

use super::connectors::{CallKind, Connector};
use crate::platform::case::to_lowercase;

/// At most this many results are returned.
pub const MAX_RESULTS: usize = 50;

/// One match.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    /// `state.readFile`.
    pub path: String,
    /// `state`.
    pub connector: String,
    /// `readFile`.
    pub method: String,
    /// The method's description.
    pub description: String,
    /// Whether a call may pause for approval.
    pub requires_approval: bool,
    /// `read` or `write`.
    pub kind: &'static str,
    /// The weighted score.
    pub score: u32,
}

/// What `search` returns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchResult {
    /// The best matches, best first.
    pub results: Vec<SearchHit>,
    /// How many methods matched.
    pub total: usize,
    /// Whether `results` was cut to [`MAX_RESULTS`].
    pub truncated: bool,
}

/// Searches the methods of `connectors`. An empty query lists every method.
pub fn search(connectors: &[&dyn Connector], query: &str) -> SearchResult {
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .map(to_lowercase)
        .collect();
    let mut hits = Vec::new();
    for c in connectors {
        for m in c.methods() {
            let path = format!("{}.{}", c.name(), m.name);
            let (lp, lm, lc, ld) = (
                to_lowercase(&path),
                to_lowercase(&m.name),
                to_lowercase(c.name()),
                to_lowercase(&m.description),
            );
            let score: u32 = words
                .iter()
                .map(|w| {
                    let mut s = 0;
                    if lp.contains(w.as_str()) {
                        s += 12;
                    }
                    if lm.contains(w.as_str()) {
                        s += 10;
                    }
                    if lc.contains(w.as_str()) {
                        s += 8;
                    }
                    if ld.contains(w.as_str()) {
                        s += 5;
                    }
                    s
                })
                .sum();
            if score == 0 && !words.is_empty() {
                continue;
            }
            hits.push(SearchHit {
                path,
                connector: c.name().to_owned(),
                method: m.name.clone(),
                description: m.description.clone(),
                requires_approval: c.may_need_approval(&m.name),
                kind: match m.kind {
                    CallKind::Read => "read",
                    CallKind::Write => "write",
                },
                score,
            });
        }
    }
    crate::platform::sort::sort_by(&mut hits, |a, b| {
        b.score.cmp(&a.score).then_with(|| a.path.cmp(&b.path))
    });
    let total = hits.len();
    hits.truncate(MAX_RESULTS);
    SearchResult { truncated: total > hits.len(), total, results: hits }
}
