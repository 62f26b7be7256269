//! think-core: Cloudflare's Think agent harness as plain Rust that builds and tests on the
//! host. The platform reaches it through traits: storage ([`store::Sql`], [`store::BlobStore`]),
//! the model ([`model::Model`]), time and randomness ([`platform::Clock`]), sockets
//! ([`platform::Sockets`]), outbound HTTP ([`platform::HttpClient`]) and sandboxes
//! ([`codemode::sandbox::Sandbox`]). `think-worker` implements them on Cloudflare Workers.
//!
//! The modules are layers, lowest first: `store`, `platform`, `net`, `protocol`, `chat`,
//! `workspace`, `tools`, `model`, `turn`, `session`, then the features (`codemode`,
//! `checkpoint`, `mcp`, `browser`, `extensions`, `skills`, `subagents`, `limits`, `auth`), then
//! `agent`. A module uses only those below it; `npm test` checks that no cycle forms
//! (scripts/check-layers.mjs). ARCHITECTURE.md has the whole map.

#![warn(missing_docs)]

pub mod agent;
pub mod auth;
pub mod browser;
pub mod chat;
pub mod checkpoint;
pub mod codemode;
pub mod extensions;
pub mod limits;
pub mod mcp;
pub mod model;
pub mod net;
pub mod platform;
pub mod protocol;
pub mod session;
pub mod skills;
pub mod store;
pub mod subagents;
pub mod tools;
pub mod turn;
pub mod workspace;

/// ECMAScript regular expressions: the leaf crate `think-regexp`, under the name the core's
/// modules use.
pub use think_regexp as regexp;

#[cfg(test)]
mod test_support;

/// The Rust examples of the documentation, compiled by `cargo test` as doc-tests so that they
/// cannot drift from the API. tests/docs/docs.test.mjs fails when a page with a Rust block is
/// missing here.
#[cfg(doctest)]
pub mod doc_pages {
    #[doc = include_str!("../../../docs/rust-library.md")]
    pub struct RustLibrary;
}
