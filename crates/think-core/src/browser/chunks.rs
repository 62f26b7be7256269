//! The framing Browser Run's DevTools WebSocket uses (the `BROWSER` binding): a Worker
//! WebSocket message is at most 1 MiB, so each CDP message travels as binary chunks, the first
//! starting with the message's UTF-8 length as a little-endian `u32`.

/// Largest chunk, in bytes.
pub const MAX_CHUNK: usize = 1_048_575;
const HEADER: usize = 4;

/// `text` as the chunks to send.
pub fn encode(text: &str) -> Vec<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut framed = Vec::with_capacity(HEADER + bytes.len());
    framed.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    framed.extend_from_slice(bytes);
    framed.chunks(MAX_CHUNK).map(<[u8]>::to_vec).collect()
}

/// Reassembles messages from the chunks as they arrive.
#[derive(Debug, Default)]
pub struct Dechunker {
    buf: Vec<u8>,
}

impl Dechunker {
    /// Adds one chunk; returns the message it completes, if any (invalid UTF-8 is replaced).
    pub fn push(&mut self, chunk: &[u8]) -> Option<String> {
        self.buf.extend_from_slice(chunk);
        let len = u32::from_le_bytes(self.buf.get(..HEADER)?.try_into().ok()?) as usize;
        if self.buf.len() < HEADER + len {
            return None;
        }
        let rest = self.buf.split_off(HEADER + len);
        let message = String::from_utf8_lossy(&self.buf[HEADER..]).into_owned();
        self.buf = rest;
        Some(message)
    }
}
