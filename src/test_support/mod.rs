//! Test doubles shared by the whole crate's host tests.

pub mod mcp;
