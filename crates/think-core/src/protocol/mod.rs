//! The WebSocket wire protocol of the `agents` clients: frames, UI messages and the stream-chunk accumulator.
//!
//! Pure functions and types only, testable on the host; the Durable Object's turn loop and
//! storage build on them.

pub mod accumulator;
pub mod arguments;
pub mod chunk;
pub mod frames;
pub mod json;
pub mod message;
pub mod repair;
pub mod routing;
pub mod sanitize;
pub mod tool_state;

pub use accumulator::{ChunkAction, StreamAccumulator};
pub use arguments::ToolArguments;
pub use frames::{parse_client_frame, ClientFrame, FrameError};
pub use message::{Role, UIMessage};
pub use tool_state::{CrossMessageUpdate, ToolPartUpdate, ToolResultOutcome};
