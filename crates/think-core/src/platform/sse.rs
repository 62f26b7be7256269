//! A Server-Sent Events parser that takes bytes in whatever chunks the network delivers:
//! lines and UTF-8 sequences may be split across chunks. Used for model streams and MCP.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SseEvent {
    /// The `event:` field; empty means the default "message".
    pub event: String,
    /// The `data:` lines, joined with newlines.
    pub data: String,
    /// The `id:` field, when the event has one.
    pub id: Option<String>,
}

/// Incremental parser state.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    /// How much of `buf` is known to hold no line end, so a long line that arrives in many
    /// chunks is scanned once, not once per chunk.
    scanned: usize,
    /// The head of a line too long to keep growing `buf` for, as the pieces that brought it:
    /// a buffer grown by doubling leaves every smaller size behind it as a hole in wasm
    /// memory (a 10 MB line cost 33 MB of it), so the line is joined once, at its size.
    pieces: Vec<Vec<u8>>,
    /// The last input ended with a CR (a line end): a LF that starts the next is its pair.
    skip_lf: bool,
    event: String,
    data: Vec<String>,
    id: Option<String>,
    retry: Option<u64>,
    saw_field: bool,
}

/// A buffer with more room than this is given back once it holds less, so one large event
/// does not pin its size for the rest of the stream.
const KEEP_BUFFER_BYTES: usize = 64 * 1024;

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds a chunk and returns the events it completed.
    pub fn push(&mut self, mut chunk: &[u8]) -> Vec<SseEvent> {
        if std::mem::take(&mut self.skip_lf) {
            chunk = chunk.strip_prefix(b"\n").unwrap_or(chunk);
        }
        let mut out = Vec::new();
        if !self.pieces.is_empty() {
            let Some(end) = chunk.iter().position(|b| *b == b'\n' || *b == b'\r') else {
                self.pieces.push(chunk.to_vec());
                return out;
            };
            let mut line =
                Vec::with_capacity(self.pieces.iter().map(Vec::len).sum::<usize>() + end);
            for piece in self.pieces.drain(..) {
                line.extend_from_slice(&piece);
            }
            self.pieces = Vec::new();
            line.extend_from_slice(&chunk[..end]);
            out.extend(self.long_line(line));
            chunk = match (chunk[end], chunk.get(end + 1)) {
                (b'\r', Some(b'\n')) => &chunk[end + 2..],
                (b'\r', None) => {
                    self.skip_lf = true;
                    &[]
                }
                _ => &chunk[end + 1..],
            };
        }
        self.buf.extend_from_slice(chunk);
        let mut buf = std::mem::take(&mut self.buf);
        let mut start = 0;
        let mut from = self.scanned;
        loop {
            let Some(rel) = buf[from..].iter().position(|b| *b == b'\n' || *b == b'\r') else {
                from = buf.len();
                break;
            };
            let end = from + rel;
            // A CR at the very end ends the line; a LF that starts the next input is its pair.
            if buf[end] == b'\r' && end + 1 == buf.len() {
                self.skip_lf = true;
            }
            let mut next = end + 1;
            if buf[end] == b'\r' && buf.get(end + 1) == Some(&b'\n') {
                next += 1;
            }
            let event = if start == 0 && end > KEEP_BUFFER_BYTES {
                // A long line at the head of the buffer (a large tool argument): the buffer
                // itself becomes the line, and only what follows it is copied.
                let rest = buf.split_off(next);
                let mut line = std::mem::replace(&mut buf, rest);
                line.truncate(end);
                next = 0;
                self.long_line(line)
            } else {
                self.line(&buf[start..end])
            };
            if let Some(ev) = event {
                out.push(ev);
            }
            start = next;
            from = next;
        }
        self.buf = buf;
        self.buf.drain(..start);
        self.scanned = from - start;
        if self.buf.len() > KEEP_BUFFER_BYTES {
            // A long line without its end yet: its head becomes the first piece.
            self.pieces.push(std::mem::take(&mut self.buf));
            self.scanned = 0;
        }
        if self.buf.capacity() > KEEP_BUFFER_BYTES && self.buf.len() <= KEEP_BUFFER_BYTES {
            self.buf.shrink_to(KEEP_BUFFER_BYTES);
        }
        out
    }

    /// The last `id:` seen, kept across events as SSE's "last event ID" (also for events, like
    /// MCP's priming event, that carry no data and are not dispatched), for `Last-Event-ID`.
    pub fn last_event_id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The server's last `retry:` hint in milliseconds: how long to wait before reconnecting.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry
    }

    /// Flushes an event left open when the stream ended without a blank line.
    pub fn finish(&mut self) -> Option<SseEvent> {
        if !self.pieces.is_empty() {
            let mut line = self.pieces.concat();
            line.append(&mut self.buf);
            self.pieces = Vec::new();
            if let Some(ev) = self.long_line(line) {
                return Some(ev);
            }
        }
        if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            self.scanned = 0;
            if let Some(ev) = self.line(&line) {
                return Some(ev);
            }
        }
        self.dispatch()
    }

    /// Handles one line (without its end). Only a field's value is copied, once; invalid
    /// UTF-8 is replaced.
    fn line(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return None;
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &[][..]),
        };
        let text = |v: &[u8]| match std::str::from_utf8(v) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(v).into_owned(),
        };
        match field {
            b"event" => self.event = text(value),
            b"data" => self.data.push(text(value)),
            b"id" => self.id = Some(text(value)),
            b"retry" => {
                if let Some(ms) = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()) {
                    self.retry = Some(ms);
                }
                return None;
            }
            _ => return None,
        }
        self.saw_field = true;
        None
    }

    /// [`SseParser::line`] for a line it may keep: a `data:` value is cut out of it in place.
    fn long_line(&mut self, mut line: Vec<u8>) -> Option<SseEvent> {
        let Some(value) = line.strip_prefix(b"data:") else { return self.line(&line) };
        let skip = line.len() - value.len() + usize::from(value.first() == Some(&b' '));
        line.drain(..skip);
        self.data.push(match String::from_utf8(line) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        });
        self.saw_field = true;
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        if !self.saw_field {
            return None;
        }
        self.saw_field = false;
        let ev = SseEvent {
            event: std::mem::take(&mut self.event),
            data: match self.data.len() {
                // The usual single `data:` line moves as it is, without a joined copy.
                1 => self.data.pop().unwrap_or_default(),
                _ => std::mem::take(&mut self.data).join("\n"),
            },
            id: self.id.clone(),
        };
        if ev.data.is_empty() && ev.event.is_empty() {
            return None;
        }
        Some(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_and_utf8() {
        let mut p = SseParser::new();
        let text = "data: {\"a\":\"é\"}\n\nevent: endpoint\ndata: /messages?x=1\r\n\r\n";
        let bytes = text.as_bytes();
        let mut events = Vec::new();
        for b in bytes.chunks(3) {
            events.extend(p.push(b));
        }
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].data, "{\"a\":\"é\"}");
        assert_eq!(events[1].event, "endpoint");
        assert_eq!(events[1].data, "/messages?x=1");
    }

    #[test]
    fn multi_line_data_comments_and_unterminated_tail() {
        let mut p = SseParser::new();
        let ev = p.push(b": keepalive\ndata: a\ndata: b\n\ndata: [DONE]");
        assert_eq!(ev, vec![SseEvent { event: String::new(), data: "a\nb".into(), id: None }]);
        assert_eq!(p.finish().unwrap().data, "[DONE]");
        assert_eq!(p.finish(), None);
    }

    #[test]
    fn a_long_line_in_many_chunks_is_one_event_and_its_buffer_is_given_back() {
        let mut p = SseParser::new();
        let value = "é".repeat(500_000);
        let text = format!("data: {value}\r\n\r\ndata: next\n\n");
        let mut events = Vec::new();
        // Chunks that split the CRLFs and the two-byte characters.
        for piece in text.as_bytes().chunks(999) {
            events.extend(p.push(piece));
        }
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].data, value);
        assert_eq!(events[1].data, "next");
        assert!(p.buf.capacity() <= KEEP_BUFFER_BYTES, "{}", p.buf.capacity());
        assert!(p.pieces.is_empty());
    }

    #[test]
    fn a_long_line_is_joined_at_its_size_whatever_ends_it() {
        let value = "x".repeat(3 * KEEP_BUFFER_BYTES);
        for end in ["\n\n", "\r\n\r\n", "\r\r"] {
            for size in [1000, KEEP_BUFFER_BYTES, 3 * KEEP_BUFFER_BYTES + 7] {
                let text = format!("data: {value}{end}data: next{end}");
                let mut p = SseParser::new();
                let mut events = Vec::new();
                for piece in text.as_bytes().chunks(size) {
                    events.extend(p.push(piece));
                }
                assert_eq!(events.len(), 2, "{end:?} {size}");
                assert_eq!(events[0].data, value);
                // Joined at its size, or (arrived whole) in the chunk's own buffer.
                assert!(
                    events[0].data.capacity() <= "data: ".len() + value.len().max(size),
                    "{end:?} {size} {}",
                    events[0].data.capacity()
                );
                assert_eq!(events[1].data, "next");
            }
        }
        // A long last line without its end is flushed by `finish`.
        let mut p = SseParser::new();
        for piece in format!("data: {value}").as_bytes().chunks(1000) {
            assert!(p.push(piece).is_empty());
        }
        assert_eq!(p.finish().map(|e| e.data), Some(value));
    }

    #[test]
    fn priming_event_id_and_retry_are_kept_without_dispatch() {
        let mut p = SseParser::new();
        assert!(p.push(b"id: ev-1\nretry: 2500\ndata: \n\n").is_empty());
        assert_eq!(p.last_event_id(), Some("ev-1"));
        assert_eq!(p.retry_ms(), Some(2500));
        let ev = p.push(b"data: x\n\n");
        assert_eq!(ev[0].id.as_deref(), Some("ev-1"));
    }
}
