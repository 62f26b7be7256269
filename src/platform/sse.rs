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
    event: String,
    data: Vec<String>,
    id: Option<String>,
    retry: Option<u64>,
    saw_field: bool,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds a chunk and returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(rel) = self.buf[start..].iter().position(|b| *b == b'\n' || *b == b'\r') {
            let end = start + rel;
            // A CR at the very end may be the first half of CRLF: wait for more input.
            if self.buf[end] == b'\r' && end + 1 == self.buf.len() {
                break;
            }
            let line = String::from_utf8_lossy(&self.buf[start..end]).into_owned();
            let mut next = end + 1;
            if self.buf[end] == b'\r' && self.buf.get(end + 1) == Some(&b'\n') {
                next += 1;
            }
            start = next;
            if let Some(ev) = self.line(&line) {
                out.push(ev);
            }
        }
        self.buf.drain(..start);
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
        if !self.buf.is_empty() {
            let line = String::from_utf8_lossy(&std::mem::take(&mut self.buf)).into_owned();
            if let Some(ev) = self.line(&line) {
                return Some(ev);
            }
        }
        self.dispatch()
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.find(':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => self.data.push(value.to_owned()),
            "id" => self.id = Some(value.to_owned()),
            "retry" => {
                if let Ok(ms) = value.parse::<u64>() {
                    self.retry = Some(ms);
                }
                return None;
            }
            _ => return None,
        }
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
            data: std::mem::take(&mut self.data).join("\n"),
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
    fn priming_event_id_and_retry_are_kept_without_dispatch() {
        let mut p = SseParser::new();
        assert!(p.push(b"id: ev-1\nretry: 2500\ndata: \n\n").is_empty());
        assert_eq!(p.last_event_id(), Some("ev-1"));
        assert_eq!(p.retry_ms(), Some(2500));
        let ev = p.push(b"data: x\n\n");
        assert_eq!(ev[0].id.as_deref(), Some("ev-1"));
    }
}
