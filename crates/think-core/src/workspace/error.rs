//! POSIX-style filesystem errors, so callers (tools, bash, Code Mode) can branch on the code
//! and the model reads the familiar `ENOENT: no such file or directory, open '/x'` text.

use crate::store::StoreError;

/// The POSIX error codes the workspace reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Errno {
    /// No such file or directory.
    NoEnt,
    /// The path already exists.
    Exist,
    /// A path component is not a directory.
    NotDir,
    /// The path is a directory.
    IsDir,
    /// The directory is not empty.
    NotEmpty,
    /// Not permitted (e.g. removing the root).
    Perm,
    /// Too many symbolic links.
    Loop,
    /// The path is longer than the limit.
    NameTooLong,
    /// The file is larger than the limit.
    FBig,
    /// An invalid argument (a NUL in a path, a bad glob).
    Inval,
}

impl Errno {
    /// The symbolic code, e.g. `ENOENT`.
    pub fn code(self) -> &'static str {
        match self {
            Errno::NoEnt => "ENOENT",
            Errno::Exist => "EEXIST",
            Errno::NotDir => "ENOTDIR",
            Errno::IsDir => "EISDIR",
            Errno::NotEmpty => "ENOTEMPTY",
            Errno::Perm => "EPERM",
            Errno::Loop => "ELOOP",
            Errno::NameTooLong => "ENAMETOOLONG",
            Errno::FBig => "EFBIG",
            Errno::Inval => "EINVAL",
        }
    }

    /// The libuv description Node prints after the code.
    pub fn description(self) -> &'static str {
        match self {
            Errno::NoEnt => "no such file or directory",
            Errno::Exist => "file already exists",
            Errno::NotDir => "not a directory",
            Errno::IsDir => "illegal operation on a directory",
            Errno::NotEmpty => "directory not empty",
            Errno::Perm => "operation not permitted",
            Errno::Loop => "too many symbolic links encountered",
            Errno::NameTooLong => "name too long",
            Errno::FBig => "file too large",
            Errno::Inval => "invalid argument",
        }
    }
}

/// A failed workspace operation; match on it (or on [`FsError::errno`]) to tell why.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FsError {
    /// A POSIX error on `path` (as the caller wrote it) during `syscall` (`open`, `rm`, …).
    Posix {
        /// Why.
        errno: Errno,
        /// The operation, in Node's words (`open`, `rm`, `mkdir`, `scandir`, `glob`…).
        syscall: &'static str,
        /// The path as the caller wrote it.
        path: String,
    },
    /// The backing SQL database or blob store failed (or is missing).
    Store(StoreError),
}

impl FsError {
    /// A POSIX error; `path` is shown as the caller wrote it.
    pub fn new(errno: Errno, syscall: &'static str, path: impl Into<String>) -> Self {
        FsError::Posix { errno, syscall, path: path.into() }
    }

    /// The POSIX code, or `None` for a storage failure.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            FsError::Posix { errno, .. } => Some(*errno),
            FsError::Store(_) => None,
        }
    }

    /// True when this is `ENOENT`, the error callers most often treat as "absent".
    pub fn is_not_found(&self) -> bool {
        self.errno() == Some(Errno::NoEnt)
    }
}

impl std::fmt::Display for FsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FsError::Posix { errno, syscall, path } => {
                write!(f, "{}: {}, {} '{}'", errno.code(), errno.description(), syscall, path)
            }
            FsError::Store(e) => write!(f, "EIO: storage error, {e}"),
        }
    }
}

impl std::error::Error for FsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FsError::Store(e) => Some(e),
            FsError::Posix { .. } => None,
        }
    }
}

impl From<StoreError> for FsError {
    fn from(e: StoreError) -> Self {
        FsError::Store(e)
    }
}
