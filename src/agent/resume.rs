//! The resume handshake (`cf_agent_stream_resume_request` / `_ack`): a tab that reconnects or
//! waits for a continuation is told whether a stream is live, pending or absent, and after
//! its ACK is replayed the buffered chunks before live chunks resume.

use super::streams::{StreamBuffer, StreamStatus};
use super::Agent;
use crate::protocol::frames::{
    Replay, ResumeNoneReason, StreamPending, StreamResumeNone, StreamResuming, TerminalError,
};

impl Agent {
    pub(super) fn on_resume_request(&self, conn: &str, probe_id: Option<String>) {
        let probe = probe_id.as_deref();
        let mut rt = self.rt.borrow_mut();
        if let Some(active) = rt.active.as_mut() {
            let owned_elsewhere = active.continuation
                && active
                    .owner
                    .as_deref()
                    .is_some_and(|o| o != conn && self.deps.sockets.ids().iter().any(|id| id == o));
            if owned_elsewhere {
                drop(rt);
                self.send(conn, &StreamResumeNone::new(ResumeNoneReason::ContinuationOwned, probe));
            } else {
                let id = active.offer_resume(conn);
                drop(rt);
                self.send(conn, &StreamResuming::new(&id, probe));
            }
            return;
        }
        if rt.continuation.pending || rt.queued > 0 {
            rt.parked.retain(|(c, _)| c != conn);
            rt.parked.push((conn.to_owned(), probe_id.clone()));
            drop(rt);
            self.send(conn, &StreamPending::new(None, probe));
            return;
        }
        drop(rt);
        self.send(conn, &StreamResumeNone::new(ResumeNoneReason::Idle, probe));
    }

    pub(super) fn on_resume_ack(&self, conn: &str, id: &str) {
        let live = {
            let mut rt = self.rt.borrow_mut();
            match rt.active.as_mut() {
                Some(active) if active.request_id == id => {
                    active.awaiting_ack.remove(conn);
                    // The chunks so far are replayed from the buffer: write the pending ones.
                    let buffer = StreamBuffer::new(self.deps.sql.as_ref());
                    Some(
                        buffer
                            .flush(id, &mut active.chunks, &mut active.cursor)
                            .and_then(|_| buffer.chunks(id)),
                    )
                }
                // An ACK for a stream other than the live one is stale: ignore it.
                Some(_) => return,
                None => None,
            }
        };
        if let Some(chunks) = live {
            let chunks = chunks.unwrap_or_else(|e| {
                self.warn("reading the stream buffer for a replay failed", e);
                Vec::new()
            });
            for body in &chunks {
                self.send(conn, &Replay::chunk(id, body));
            }
            self.send(conn, &Replay::complete(id));
            return;
        }
        let stored = self.streams().ok().and_then(|b| Some((b.get(id).ok()??, b.chunks(id).ok()?)));
        match stored {
            Some((record, chunks)) => {
                for body in &chunks {
                    self.send(conn, &Replay::chunk(id, body));
                }
                match record.status {
                    StreamStatus::Error => {
                        self.send(conn, &TerminalError::new(id, "The turn failed."))
                    }
                    _ => self.send(conn, &Replay::done(id)),
                }
                self.send_transcript(conn);
            }
            None => self.send(conn, &Replay::done(id)),
        }
    }
}
