//! think-rs: Cloudflare's Think agent harness as a Rust/WASM Durable Object.
//!
//! Everything except `wasm` is plain Rust that builds and tests on the host; `wasm` is the
//! thin Workers glue (Durable Object storage, R2, WebSockets, fetch).

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
pub mod regexp;
pub mod session;
pub mod skills;
pub mod store;
pub mod subagents;
pub mod tools;
pub mod turn;
pub mod workspace;

#[cfg(test)]
mod test_support;

#[cfg(target_arch = "wasm32")]
pub mod wasm;

/// The shipped agent counts its live heap bytes, for the idle reset (`wasm::idle::LiveHeap`).
#[cfg(all(target_arch = "wasm32", feature = "shipped-agent"))]
#[global_allocator]
static ALLOCATOR: wasm::idle::LiveHeap = wasm::idle::LiveHeap;

/// The Rust examples of the documentation, compiled by `cargo test` as doc-tests so that they
/// cannot drift from the API. tests/docs/docs.test.mjs fails when a page with a Rust block is
/// missing here.
#[cfg(doctest)]
pub mod doc_pages {
    #[doc = include_str!("../docs/rust-library.md")]
    pub struct RustLibrary;
}
