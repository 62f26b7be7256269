//! The workspace: a virtual filesystem in the Durable Object's SQLite, with large files in R2.
