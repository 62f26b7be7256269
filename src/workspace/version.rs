//! File versions: a counter and a content hash per file, who changed it and when, and the
//! bounded history of content the model has seen, so a stale write can be refused with a diff.

use super::*;
use sha2::{Digest, Sha256};

/// Text kept per seen version for the refusal diff; larger content is not kept.
pub const MAX_HISTORY_BYTES: usize = 64 * 1024;
/// Seen versions kept per file.
pub const MAX_HISTORY_VERSIONS: i64 = 4;

/// Who made a change, recorded with every version so a refusal can say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// The model's own file tools.
    Tool,
    /// A bash script's write-back.
    Bash,
    /// Code Mode's `state.*`.
    Code,
    /// The application (callables, RPC, extensions).
    App,
}

impl Writer {
    /// The name stored in SQL and shown in refusals.
    pub fn as_str(self) -> &'static str {
        match self {
            Writer::Tool => "tool",
            Writer::Bash => "bash",
            Writer::Code => "code",
            Writer::App => "app",
        }
    }

    fn parse(s: &str) -> Option<Writer> {
        Some(match s {
            "tool" => Writer::Tool,
            "bash" => Writer::Bash,
            "code" => Writer::Code,
            "app" => Writer::App,
            _ => return None,
        })
    }
}

/// A file's version as the model sees it: `"<counter>:<hash>"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileVersion {
    /// Bumped by every change of the file's content.
    pub counter: i64,
    /// First 16 hex digits of the content's SHA-256; `None` after an append or a tree copy.
    pub hash: Option<String>,
    /// Who made the last change (`None` for rows older than versioning).
    pub changed_by: Option<Writer>,
    /// When, in milliseconds since the epoch.
    pub changed_at: i64,
}

impl FileVersion {
    /// The token handed to the model and accepted back as `expectedVersion`.
    pub fn token(&self) -> String {
        format!("{}:{}", self.counter, self.hash.as_deref().unwrap_or("-"))
    }

    /// Splits a token into its counter and hash; `None` when it is not one.
    pub fn parse_token(token: &str) -> Option<(i64, Option<String>)> {
        let (c, h) = token.split_once(':').unwrap_or((token, "-"));
        let counter = c.trim().parse().ok()?;
        Some((counter, Some(h.trim().to_owned()).filter(|h| h != "-" && !h.is_empty())))
    }

    /// Whether this (current) version is still the one `token` names: the same content
    /// hash when both are known (so a file deleted and recreated is caught), else the same
    /// counter.
    pub fn matches(&self, token: &str) -> bool {
        match Self::parse_token(token) {
            Some((c, h)) => match (h, &self.hash) {
                (Some(h), Some(now)) => h == *now,
                _ => c == self.counter,
            },
            None => false,
        }
    }
}

/// The short content hash stored with each version.
pub(crate) fn content_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Restores the previous writer when dropped.
pub struct WriterScope<'a> {
    ws: &'a Workspace,
    previous: Writer,
}

impl Drop for WriterScope<'_> {
    fn drop(&mut self) {
        self.ws.writer.set(self.previous);
    }
}

impl Workspace {
    /// Attributes the mutations made while the returned scope lives to `writer`.
    pub fn writing_as(&self, writer: Writer) -> WriterScope<'_> {
        let previous = self.writer.replace(writer);
        WriterScope { ws: self, previous }
    }

    /// Who the current mutations are attributed to.
    pub fn writer(&self) -> Writer {
        self.writer.get()
    }

    /// Adds the version columns to a table created before versioning.
    pub(super) fn migrate_versions(&self) -> Result<(), FsError> {
        let t = &self.t;
        if self.sql.exec(&format!("SELECT version FROM {t} LIMIT 0"), &[]).is_ok() {
            return Ok(());
        }
        for col in ["version INTEGER NOT NULL DEFAULT 1", "hash TEXT", "changed_by TEXT"] {
            self.sql.exec(&format!("ALTER TABLE {t} ADD COLUMN {col}"), &[])?;
        }
        Ok(())
    }

    /// The history table of content the model has seen: one slot per version modulo
    /// [`MAX_HISTORY_VERSIONS`], so it stays bounded without a pruning statement.
    pub(super) fn init_history(&self) -> Result<(), FsError> {
        self.sql.exec(
            &format!(
                "CREATE TABLE IF NOT EXISTS {} (
                  path TEXT NOT NULL,
                  slot INTEGER NOT NULL,
                  version INTEGER NOT NULL,
                  hash TEXT,
                  content TEXT,
                  PRIMARY KEY (path, slot)
                ) WITHOUT ROWID",
                self.h
            ),
            &[],
        )?;
        Ok(())
    }

    /// The version of the file at `path` (symlinks not followed); `None` when no file is there.
    pub fn version(&self, path: &str) -> Result<Option<FileVersion>, FsError> {
        Ok(self.version_and_seen(path)?.map(|(v, _)| v))
    }

    /// The file's version and the token of the newest version the model has seen, in one
    /// statement (the guard runs before every model write).
    fn version_and_seen(
        &self,
        path: &str,
    ) -> Result<Option<(FileVersion, Option<String>)>, FsError> {
        let norm = path::normalize(path, "stat")?;
        let rows = self.exec(
            &format!(
                "SELECT version, hash, changed_by, modified_at,
                   (SELECT s.version || ':' || COALESCE(s.hash, '-') FROM {h} s
                    WHERE s.path = f.path ORDER BY s.version DESC LIMIT 1)
                 FROM {t} f WHERE path = ? AND type = 'file'",
                t = self.t,
                h = self.h
            ),
            &[text(&norm)],
        )?;
        Ok(rows.first().map(|r| {
            let version = FileVersion {
                counter: col_i64(r, 0),
                hash: col_opt_str(r, 1),
                changed_by: col_opt_str(r, 2).as_deref().and_then(Writer::parse),
                changed_at: col_i64(r, 3),
            };
            (version, col_opt_str(r, 4))
        }))
    }

    /// Records that the model has seen `content` as the current version of `path` and
    /// returns that version's token (`None` when no file is there), in one statement.
    /// Content over [`MAX_HISTORY_BYTES`] is noted without its text.
    pub fn remember_seen(
        &self,
        path: &str,
        content: Option<&str>,
    ) -> Result<Option<String>, FsError> {
        let norm = path::normalize(path, "open")?;
        let kept = content.filter(|c| c.len() <= MAX_HISTORY_BYTES);
        let rows = self.exec(
            &format!(
                "INSERT OR REPLACE INTO {h} (path, slot, version, hash, content)
                 SELECT path, version % {MAX_HISTORY_VERSIONS}, version, hash, ? FROM {t}
                 WHERE path = ? AND type = 'file'
                 RETURNING version, hash",
                t = self.t,
                h = self.h
            ),
            &[kept.map_or(SqlValue::Null, text), text(&norm)],
        )?;
        Ok(rows.first().map(|r| {
            FileVersion {
                counter: col_i64(r, 0),
                hash: col_opt_str(r, 1),
                changed_by: None,
                changed_at: 0,
            }
            .token()
        }))
    }

    /// The text the model saw as version `counter` of `path`, when it was kept.
    fn seen_content(&self, norm: &str, counter: i64) -> Result<Option<String>, FsError> {
        let rows = self.exec(
            &format!("SELECT content FROM {} WHERE path = ? AND version = ?", self.h),
            &[text(norm), SqlValue::Integer(counter)],
        )?;
        Ok(rows.first().and_then(|r| col_opt_str(r, 0)))
    }

    /// Checks that `path` is still at the version `expected` names; otherwise a
    /// [`StaleWrite`] saying who changed it, when, and the diff since (when that is kept).
    pub async fn check_version(&self, path: &str, expected: &str) -> Result<(), StaleWrite> {
        let current = self.version(path)?;
        self.compare(path, expected, current).await
    }

    async fn compare(
        &self,
        path: &str,
        expected: &str,
        current: Option<FileVersion>,
    ) -> Result<(), StaleWrite> {
        let Some(current) = current else {
            return Err(StaleWrite::Gone { path: path.to_owned(), expected: expected.to_owned() });
        };
        if current.matches(expected) {
            return Ok(());
        }
        let norm = path::normalize(path, "open")?;
        let old = match FileVersion::parse_token(expected) {
            Some((c, _)) => self.seen_content(&norm, c)?,
            None => None,
        };
        let diff = match old {
            Some(old) => Some(self.diff_content_rev(path, &old).await?),
            None => None,
        };
        Err(StaleWrite::Changed {
            path: path.to_owned(),
            expected: expected.to_owned(),
            current,
            diff,
        })
    }

    /// The model's write check, one statement when it passes: `expected` when given;
    /// otherwise, when the guard is on and the model has read the file, that nobody
    /// changed it since.
    pub async fn check_fresh_for_model(
        &self,
        path: &str,
        expected: Option<&str>,
    ) -> Result<(), StaleWrite> {
        let state = self.version_and_seen(path)?;
        match (expected, state) {
            (Some(expected), state) => self.compare(path, expected, state.map(|(v, _)| v)).await,
            (None, Some((current, Some(seen)))) if self.guard_unseen => {
                self.compare(path, &seen, Some(current)).await
            }
            (None, _) => Ok(()),
        }
    }

    /// The unified diff from `old` to the file's current text.
    async fn diff_content_rev(&self, path: &str, old: &str) -> Result<String, FsError> {
        let new = self.read_file(path).await?.unwrap_or_default();
        Ok(unified_diff(old, &new, path, path))
    }
}

/// A write refused because the file is no longer the version the writer saw.
#[derive(Debug)]
#[non_exhaustive]
pub enum StaleWrite {
    /// The file changed since `expected`.
    Changed {
        /// The path as given.
        path: String,
        /// The version the writer named.
        expected: String,
        /// The file's version now.
        current: FileVersion,
        /// The diff from the expected version's content to now, when that content was kept.
        diff: Option<String>,
    },
    /// The file no longer exists.
    Gone {
        /// The path as given.
        path: String,
        /// The version the writer named.
        expected: String,
    },
    /// The check itself failed.
    Fs(FsError),
}

impl std::fmt::Display for StaleWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StaleWrite::Changed { path, expected, current, diff } => {
                let who = current.changed_by.map_or("an unknown writer", Writer::as_str);
                let when = iso8601(current.changed_at);
                write!(
                    f,
                    "{path} changed since version {expected}: it is now version {} (changed by {who} at {when}). Read it again and redo the change on the current content.",
                    current.token()
                )?;
                match diff {
                    Some(d) => write!(f, "\nChanges since version {expected}:\n{d}"),
                    None => write!(f, "\nThe content of version {expected} is no longer kept, so no diff can be shown."),
                }
            }
            StaleWrite::Gone { path, expected } => {
                write!(f, "{path} was deleted since version {expected}.")
            }
            StaleWrite::Fs(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StaleWrite {}

impl From<FsError> for StaleWrite {
    fn from(e: FsError) -> Self {
        StaleWrite::Fs(e)
    }
}

/// `ms` since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (UTC), for refusal messages.
fn iso8601(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}
