//! Texts the model's file tools recently wrote or edited, kept in memory, so that the next
//! edit of such a file is one guarded `UPDATE` instead of a read and a rewrite (issue 41:
//! the read was half of an edit's SQLite time, and its text crossed into wasm each time).
//! What the model reads is not kept: keeping each read's text cost the read row 4-5 µs a
//! read (`bench/cpu-ab.mjs`, 24.4 → 28.8 ms per 1,000 reads, minima of three runs each; its
//! text could no longer reuse the block the previous read's freed), more than an edit after
//! a read saves unless most reads are followed by an edit.
//!
//! An entry is only a guess. It holds the text of a file as the model's own write or edit
//! left it, with that text's content hash; the edit's statement (`EditSql::recalled`)
//! changes the row only while its hash is still that one (and the stale-write check
//! passes), so the row holds exactly the text the edit was computed from. A file that any
//! other writer changed meanwhile (bash, Code Mode, the app, a rewind, a fork, a move, raw
//! SQL, a rolled-back transaction) has another hash, or none: the statement changes
//! nothing, the entry is dropped, and the edit reads the file as it always did.
//!
//! Entries live per isolate, for every workspace in it (one per agent instance), bounded
//! in bytes with the least recently kept dropped first, and only while work is in flight:
//! the shim drops them all at each idle point ([`drop_kept_texts`]), so an idle isolate
//! holds none, and a workspace's entries go with it when it is dropped. (Left until the next
//! idle reset, they kept the budget's 4.2 MB live, in 8.8 MB of linear memory, after the
//! bench's file rows, against 1.3 MB without them.)

use super::io::{ContentRef, Placement, Stored};
use super::version::reverse_delta_kept;
use super::{content_hash, path, FileVersion, FsError, SqlValue, Workspace, Writer};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// Bytes of text kept for all workspaces of the isolate together: a quarter of the idle
/// reset's default threshold (16 MB), so that kept texts alone never trigger a reset.
pub const RECENT_TEXT_BYTES: usize = 4 << 20;
/// Largest text kept: a larger file's edit reads it as before.
pub const RECENT_TEXT_MAX: usize = 256 << 10;
/// What an entry costs besides its text and path (the map's slot, the order's, two `Rc`s).
const ENTRY_OVERHEAD: usize = 96;

/// A kept text: what `recall` hands out, to be checked by the edit's statement.
#[derive(Clone)]
pub struct RecentText {
    /// The normalized path it was kept under.
    pub path: Rc<str>,
    /// The text as the model's tool left it.
    pub text: Rc<String>,
    /// Its content hash, as the row stored it.
    pub hash: Rc<str>,
}

struct Entry {
    kept: RecentText,
    /// When it was last kept. Its place in `order` names the tick it was queued at: a later
    /// one sends it to the back of the queue instead of out (a second chance).
    tick: u64,
    /// Whether [`Texts::compact`] has given it its place yet.
    placed: bool,
}

/// The entries of one workspace, by normalized path.
type Files = HashMap<Rc<str>, Entry>;

#[derive(Default)]
struct Texts {
    /// Per workspace (an isolate holds a few: one per agent instance).
    by_workspace: Vec<(u64, Files)>,
    /// A place per entry, the least recently queued first, and places of entries since
    /// forgotten or queued again, which eviction skips or sends to the back (and
    /// [`Texts::compact`] drops once they outnumber the entries).
    order: VecDeque<(u64, Rc<str>, u64)>,
    entries: usize,
    bytes: usize,
    tick: u64,
}

thread_local! {
    static TEXTS: RefCell<Texts> = RefCell::default();
    static NEXT_WORKSPACE: Cell<u64> = const { Cell::new(1) };
}

/// A new workspace's key among the kept texts.
pub(super) fn workspace_key() -> u64 {
    NEXT_WORKSPACE.with(|n| {
        let key = n.get();
        n.set(key + 1);
        key
    })
}

fn cost(path: &str, text: &str) -> usize {
    path.len() + text.len() + ENTRY_OVERHEAD
}

impl Texts {
    fn files(&self, ws: u64) -> Option<&Files> {
        self.by_workspace.iter().find(|(k, _)| *k == ws).map(|(_, f)| f)
    }

    fn files_mut(&mut self, ws: u64) -> Option<&mut Files> {
        self.by_workspace.iter_mut().find(|(k, _)| *k == ws).map(|(_, f)| f)
    }

    fn remove(&mut self, ws: u64, path: &str) {
        let Some(files) = self.files_mut(ws) else { return };
        let removed = files.remove_entry(path);
        let empty = files.is_empty();
        if let Some((key, entry)) = removed {
            self.entries -= 1;
            self.bytes -= cost(&key, &entry.kept.text);
        }
        if empty {
            self.by_workspace.retain(|(k, _)| *k != ws);
        }
    }

    /// Keeps `text` hashed `hash` for `path`: in place when the path has an entry (a file
    /// edited again and again is the common case, and costs no new key), else as a new
    /// entry at the back of the queue.
    fn put(&mut self, ws: u64, path: &str, text: String, hash: &str) {
        self.tick += 1;
        let tick = self.tick;
        let (text, hash) = (Rc::new(text), Rc::from(hash));
        if self.files(ws).is_none() {
            self.by_workspace.push((ws, Files::default()));
        }
        let Some(files) = self.files_mut(ws) else { return };
        if let Some(entry) = files.get_mut(path) {
            let (old, new) = (entry.kept.text.len(), text.len());
            let path = entry.kept.path.clone();
            *entry = Entry { kept: RecentText { path, text, hash }, tick, placed: true };
            self.bytes = self.bytes - old + new;
            return;
        }
        let key: Rc<str> = Rc::from(path);
        let added = cost(path, &text);
        files.insert(
            key.clone(),
            Entry { kept: RecentText { path: key.clone(), text, hash }, tick, placed: true },
        );
        self.bytes += added;
        self.entries += 1;
        self.order.push_back((ws, key, tick));
    }

    /// Drops the least recently kept entries until the texts fit the budget.
    fn evict(&mut self) {
        while self.bytes > RECENT_TEXT_BYTES {
            let Some((ws, path, queued)) = self.order.pop_front() else { break };
            let tick = self.files(ws).and_then(|files| files.get(&*path)).map(|e| e.tick);
            match tick {
                Some(t) if t == queued => self.remove(ws, &path),
                Some(t) => self.order.push_back((ws, path, t)),
                None => {}
            }
        }
    }

    /// Rebuilds `order` once places of forgotten entries outnumber the entries: each entry
    /// keeps its latest place, in the same order.
    fn compact(&mut self) {
        if self.order.len() <= 2 * self.entries + 64 {
            return;
        }
        for (_, files) in &mut self.by_workspace {
            files.values_mut().for_each(|e| e.placed = false);
        }
        let old = std::mem::take(&mut self.order);
        let mut kept = Vec::with_capacity(self.entries);
        for (ws, path, _) in old.into_iter().rev() {
            if let Some(e) = self.files_mut(ws).and_then(|files| files.get_mut(&*path)) {
                if !e.placed {
                    e.placed = true;
                    kept.push((ws, path, e.tick));
                }
            }
        }
        self.order = kept.into_iter().rev().collect();
    }
}

/// Keeps `text`, whose content hash is `hash`, as what the model's tool left at `path` (a
/// normalized path) of workspace `ws`; a text over [`RECENT_TEXT_MAX`] drops the entry.
pub(super) fn keep(ws: u64, path: &str, hash: &str, text: String) {
    TEXTS.with(|t| {
        let mut t = t.borrow_mut();
        if text.len() > RECENT_TEXT_MAX {
            t.remove(ws, path);
            return;
        }
        t.put(ws, path, text, hash);
        t.evict();
        t.compact();
    });
}

/// The text kept for `path` of workspace `ws`, if any.
pub(super) fn recall(ws: u64, path: &str) -> Option<RecentText> {
    TEXTS.with(|t| t.borrow().files(ws).and_then(|files| files.get(path)).map(|e| e.kept.clone()))
}

/// Drops the entry of `path` in workspace `ws`.
pub(super) fn forget(ws: u64, path: &str) {
    TEXTS.with(|t| {
        let mut t = t.borrow_mut();
        t.remove(ws, path);
        t.compact();
    });
}

/// Drops every entry of workspace `ws`.
pub(super) fn forget_workspace(ws: u64) {
    TEXTS.with(|t| {
        let mut t = t.borrow_mut();
        if let Some(at) = t.by_workspace.iter().position(|(k, _)| *k == ws) {
            let (_, files) = t.by_workspace.swap_remove(at);
            t.entries -= files.len();
            t.bytes -= files.iter().map(|(p, e)| cost(p, &e.kept.text)).sum::<usize>();
        }
        t.compact();
    });
}

impl Workspace {
    /// Keeps `text`, the content hashed `hash` that the model's tool just left at `norm`
    /// (a normalized path), for its next edit; any other writer's text is not kept.
    pub(super) fn keep_text(&self, norm: &str, hash: &str, text: String) {
        if self.writer() == Writer::Tool {
            keep(self.recent_key, norm, hash, text);
        }
    }

    /// The text the model's own write or edit last left at `path`, when it is still kept:
    /// a guess, which only [`Workspace::rewrite_recalled`] may act on.
    pub fn recall_text(&self, path: &str) -> Option<RecentText> {
        let norm = path::normalize(path, "open").ok()?;
        recall(self.recent_key, &norm)
    }

    /// The model's edit of the kept text `recalled` of `path` ([`Workspace::recall_text`])
    /// into `content`, in one statement: it changes the file only while the file still
    /// holds that text (its hash) and passes the model's write check for `expected`, and then
    /// does what [`Workspace::read_fresh_for_model`] and
    /// [`Workspace::rewrite_kept_for_model`] would have done (`kept` as there), the new
    /// text kept in turn. `false`, with nothing written and the kept text dropped, when it
    /// did not apply: the caller then reads the file and edits that.
    pub fn rewrite_recalled(
        &self,
        path: &str,
        recalled: &RecentText,
        content: String,
        kept: (usize, usize),
        expected: Option<&str>,
    ) -> Result<bool, FsError> {
        let norm = &*recalled.path;
        // With a version, the hash the statement pins must be the one the version names:
        // that is the whole check (a version without a hash is checked by the read).
        let check = match expected.map(FileVersion::parse_token) {
            Some(Some((_, Some(h)))) if *h == *recalled.hash => 1,
            Some(_) => return Ok(false),
            None if self.guard_unseen => 0,
            None => 1,
        };
        let (value, stored) = ContentRef::Text(&content).bound();
        if self.writer() != Writer::Tool
            || stored != Stored::TextAsBytes
            || content.len() > self.max_file_size
            || self.placement(content.len()) != Placement::Inline
        {
            return Ok(false);
        }
        let undo = reverse_delta_kept(&recalled.text, &content, kept);
        let hash = content_hash(content.as_bytes());
        let mut params = self.rewrite_params(&hash, undo, norm);
        params.push(SqlValue::Text(recalled.hash.to_string()));
        let sql = &self.edit_sql().recalled[check];
        if !self.exec_bound(sql, params, 0, value)? {
            forget(self.recent_key, norm);
            return Ok(false);
        }
        keep(self.recent_key, norm, &hash, content);
        self.changed(path, Ok(true))
    }
}

/// Drops every kept text of the isolate and returns the bytes they counted: the shim calls it
/// at each idle point (nothing in flight, no background task), so texts are kept for the
/// edits of one turn, and an idle isolate holds none.
pub fn drop_kept_texts() -> usize {
    TEXTS.with(|t| std::mem::take(&mut *t.borrow_mut()).bytes)
}

/// Bytes and entries kept in this isolate (for the tests).
#[cfg(test)]
pub(super) fn kept_totals() -> (usize, usize) {
    TEXTS.with(|t| {
        let t = t.borrow();
        (t.bytes, t.entries)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_per_workspace_and_replaced() {
        let (a, b) = (workspace_key(), workspace_key());
        keep(a, "/x", "h1", "one".into());
        keep(b, "/x", "h2", "two".into());
        assert_eq!(recall(a, "/x").map(|r| (*r.text).clone()), Some("one".into()));
        assert_eq!(recall(b, "/x").map(|r| r.hash.to_string()), Some("h2".into()));
        keep(a, "/x", "h3", "three".into());
        assert_eq!(recall(a, "/x").map(|r| (*r.text).clone()), Some("three".into()));
        forget(a, "/x");
        assert!(recall(a, "/x").is_none());
        forget_workspace(b);
        assert!(recall(b, "/x").is_none());
        assert_eq!(kept_totals(), (0, 0));
    }

    #[test]
    fn only_the_models_tools_texts_are_kept_and_a_dropped_workspace_takes_its_own() {
        use crate::store::sqlite::SqliteSql;
        use crate::workspace::tests::{block_on, clock};
        let ws = Workspace::new(Rc::new(SqliteSql::new()), clock());
        block_on(ws.write_fresh_for_model("/app.txt", "by the app", "text/plain", None)).unwrap();
        assert!(ws.recall_text("/app.txt").is_none());
        {
            let _tool = ws.writing_as(Writer::Tool);
            block_on(ws.write_fresh_for_model("/a.txt", "by the model", "text/plain", None))
                .unwrap();
        }
        let kept = ws.recall_text("a.txt").expect("kept under its normalized path");
        assert_eq!(kept.text.as_str(), "by the model");
        assert_eq!(*kept.hash, content_hash(b"by the model"));
        assert_eq!(kept_totals().1, 1);
        drop(ws);
        assert_eq!(kept_totals(), (0, 0));
    }

    #[test]
    fn an_idle_point_drops_every_text_and_says_how_many_bytes() {
        let (a, b) = (workspace_key(), workspace_key());
        keep(a, "/x", "h", "one".into());
        keep(b, "/y", "h", "two".into());
        let (bytes, entries) = kept_totals();
        assert_eq!(entries, 2);
        assert_eq!(drop_kept_texts(), bytes);
        assert_eq!(kept_totals(), (0, 0));
        assert!(recall(a, "/x").is_none() && recall(b, "/y").is_none());
        keep(a, "/x", "h", "again".into());
        assert_eq!(recall(a, "/x").map(|r| (*r.text).clone()), Some("again".into()));
        forget_workspace(a);
    }

    #[test]
    fn compaction_leaves_each_entry_its_latest_place_in_order() {
        let ws = workspace_key();
        for p in ["/a", "/b", "/c"] {
            keep(ws, p, "h", p.to_owned());
        }
        // Forgotten and kept again, "/b" leaves a stale place each time.
        for _ in 0..100 {
            forget(ws, "/b");
            keep(ws, "/b", "h", "b".into());
        }
        let order: Vec<String> =
            TEXTS.with(|t| t.borrow().order.iter().map(|(_, p, _)| p.to_string()).collect());
        // 103 places were queued; once they outnumbered the entries they were compacted to
        // the entries' latest ones, "/a" and "/c" first, as they were, then "/b"'s.
        assert!(order.len() < 70, "{}", order.len());
        assert_eq!(order[..3], ["/a", "/c", "/b"]);
        assert!(order[3..].iter().all(|p| p == "/b"));
        forget_workspace(ws);
        assert_eq!(kept_totals(), (0, 0));
    }

    #[test]
    fn the_budget_drops_the_least_recently_kept_first() {
        let ws = workspace_key();
        let text = "x".repeat(RECENT_TEXT_MAX);
        let fit = RECENT_TEXT_BYTES / cost("/f00", &text);
        for i in 0..fit + 2 {
            keep(ws, &format!("/f{i:02}"), "h", text.clone());
            // The first file is kept again each round, so it stays the most recent.
            if i > 0 {
                let first = recall(ws, "/f00").unwrap();
                keep(ws, "/f00", &first.hash, (*first.text).clone());
            }
        }
        let (bytes, entries) = kept_totals();
        assert!(bytes <= RECENT_TEXT_BYTES, "{bytes}");
        assert_eq!(entries, fit);
        assert!(recall(ws, "/f00").is_some(), "the recently kept one stays");
        assert!(recall(ws, "/f01").is_none() && recall(ws, "/f02").is_none());
        assert!(recall(ws, &format!("/f{:02}", fit + 1)).is_some());
        // A text over the limit is not kept, and drops what was kept for its path.
        keep(ws, "/f00", "h", "y".repeat(RECENT_TEXT_MAX + 1));
        assert!(recall(ws, "/f00").is_none());
        forget_workspace(ws);
        assert_eq!(kept_totals(), (0, 0));
        let order = TEXTS.with(|t| t.borrow().order.len());
        assert!(order <= 64, "stale places are compacted away: {order}");
    }
}
