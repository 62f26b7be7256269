//! The WebSocket wire protocol of the `agents` clients: frames, UI messages and the stream-chunk accumulator.
