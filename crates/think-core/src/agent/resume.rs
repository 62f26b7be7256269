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
            // The socket that sent this stream's request reads the stream already: its probe
            // (a resume the tab began before it sent the request, retried on the new socket
            // after a reconnect lost the answer) waits for the stream's end, as a probe
            // before a stream does; offered the stream, it would be replayed what it has.
            if active.requester.as_deref() == Some(conn) {
                drop(rt);
                self.park(conn, probe_id);
                return;
            }
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
        // A turn waiting for its slot, an auto-continuation, or a recovery waiting out its
        // backoff: a stream is coming.
        if rt.continuation.pending || rt.queued > 0 || rt.recovering {
            drop(rt);
            self.park(conn, probe_id);
            return;
        }
        drop(rt);
        self.send(conn, &StreamResumeNone::new(ResumeNoneReason::Idle, probe));
    }

    /// Parks `conn` until a stream starts (it is offered that stream unless it asked for it)
    /// or none is coming (`stream_resume_none`), and tells it to keep waiting.
    fn park(&self, conn: &str, probe_id: Option<String>) {
        self.send(conn, &StreamPending::new(None, probe_id.as_deref()));
        let mut rt = self.rt.borrow_mut();
        rt.parked.retain(|(c, _)| c != conn);
        rt.parked.push((conn.to_owned(), probe_id));
    }

    /// Replays a stream to `conn` after its ACK. Each replayed chunk carries the `seq` its
    /// live frame carried and a continuation's frames say so, as Think 0.23 sends them, so a
    /// client skips the chunks it already applied.
    pub(super) fn on_resume_ack(&self, conn: &str, id: &str) {
        let live = {
            let mut rt = self.rt.borrow_mut();
            match rt.active.as_mut() {
                Some(active) if active.request_id == id => {
                    active.awaiting_ack.remove(conn);
                    // The chunks so far are replayed from the buffer: write the pending ones.
                    let buffer = StreamBuffer::new(self.deps.sql.as_ref());
                    let chunks = buffer
                        .flush(id, &mut active.chunks, &mut active.cursor)
                        .and_then(|_| buffer.chunks(id));
                    Some((chunks, active.continuation))
                }
                // An ACK for a stream other than the live one is stale: ignore it.
                Some(_) => return,
                None => None,
            }
        };
        if let Some((chunks, continuation)) = live {
            let chunks = chunks.unwrap_or_else(|e| {
                self.warn("reading the stream buffer for a replay failed", e);
                Vec::new()
            });
            self.replay_chunks(conn, id, &chunks, continuation);
            self.send(conn, &Replay::complete(id).in_continuation(continuation));
            return;
        }
        let stored = self.streams().ok().and_then(|b| Some((b.get(id).ok()??, b.chunks(id).ok()?)));
        match stored {
            Some((record, chunks)) => {
                self.replay_chunks(conn, id, &chunks, record.continuation);
                let ids = &record.message_ids;
                match record.status {
                    StreamStatus::Error => self
                        .send(conn, &TerminalError::new(id, "The turn failed.").for_messages(ids)),
                    status => self.send(
                        conn,
                        &Replay::done(id)
                            .in_continuation(record.continuation)
                            .ended(status.outcome(), ids),
                    ),
                }
                self.send_transcript(conn);
            }
            None => self.send(conn, &Replay::done(id)),
        }
    }

    fn replay_chunks(&self, conn: &str, id: &str, chunks: &[String], continuation: bool) {
        for (seq, body) in chunks.iter().enumerate() {
            self.send(conn, &Replay::chunk(id, body, seq as u64).in_continuation(continuation));
        }
    }
}
