//! One turn of the agent: converting the transcript for the model, the multi-step model and
//! tool loop, and cancellation.

pub mod abort;
pub mod convert;
pub mod engine;
pub mod images;
