//! Path handling: every path is normalized to an absolute form before it touches SQL, so
//! `..` can never climb out of the workspace root and one file has exactly one key.

use super::error::{Errno, FsError};

/// The longest normalized path accepted, as in Think.
pub const MAX_PATH_LENGTH: usize = 4096;

/// The purely lexical part of [`normalize`] (Think's `normalizeWorkspacePath`): a leading
/// `/`, no empty or `.` segments, and `..` popping a segment but never climbing above `/`.
///
/// A path that is already in that form (every tool call's path, mostly) is copied as it is:
/// collecting its segments first cost a vector's growth per call (3 % of an edit's profile).
pub fn lexical(path: &str) -> String {
    let normal = |rest: &str| rest.split('/').all(|p| !matches!(p, "" | "." | ".."));
    if path == "/" || path.strip_prefix('/').is_some_and(normal) {
        return path.to_owned();
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let mut out = String::with_capacity(path.len() + 1);
    for p in &parts {
        out.push('/');
        out.push_str(p);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// Normalizes `path`: adds a leading `/`, drops empty and `.` segments and resolves `..`
/// without ever going above the root (`/../../etc` becomes `/etc`).
///
/// Fails with `ENAMETOOLONG` past [`MAX_PATH_LENGTH`] characters and with `EINVAL` on a NUL
/// byte; `syscall` names the operation in the error.
pub fn normalize(path: &str, syscall: &'static str) -> Result<String, FsError> {
    if path.contains('\0') {
        return Err(FsError::new(Errno::Inval, syscall, path.replace('\0', "\\0")));
    }
    let out = lexical(path);
    // A character is at least a byte, so only a long path needs counting.
    if out.len() > MAX_PATH_LENGTH && out.chars().count() > MAX_PATH_LENGTH {
        return Err(FsError::new(Errno::NameTooLong, syscall, truncate_for_message(path)));
    }
    Ok(out)
}

fn truncate_for_message(path: &str) -> String {
    let mut s: String = path.chars().take(64).collect();
    s.push('…');
    s
}

/// The parent of a normalized path; `None` for the root.
pub fn parent(path: &str) -> Option<&str> {
    if path == "/" {
        return None;
    }
    match path.rfind('/') {
        Some(0) => Some("/"),
        Some(i) => Some(&path[..i]),
        None => None,
    }
}

/// The last segment of a normalized path (`""` for the root).
pub fn basename(path: &str) -> &str {
    match path.rfind('/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// Every proper ancestor of a normalized path except the root, shallowest first:
/// `/a/b/c` gives `["/a", "/a/b"]`.
pub fn ancestors(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (i, ch) in path.char_indices().skip(1) {
        if ch == '/' {
            out.push(&path[..i]);
        }
    }
    out
}

/// Joins a normalized directory and a child name.
pub fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Bounds `(lo, hi)` such that a normalized path `p` lies strictly below `dir` exactly when
/// `lo < p < hi` in byte order, so subtrees are SQL range scans on the primary key rather
/// than pattern matches.
pub fn subtree_bounds(dir: &str) -> (String, String) {
    if dir == "/" {
        ("/".to_owned(), "0".to_owned())
    } else {
        (format!("{dir}/"), format!("{dir}0"))
    }
}

/// True when `path` is `dir` itself or lies below it.
pub fn is_within(path: &str, dir: &str) -> bool {
    dir == "/"
        || path == dir
        || (path.starts_with(dir) && path.as_bytes().get(dir.len()) == Some(&b'/'))
}

/// Rewrites `path` (within `from`) to sit at the same place below `to`.
pub fn rebase(path: &str, from: &str, to: &str) -> String {
    if path == from {
        return to.to_owned();
    }
    let rest = if from == "/" { &path[1..] } else { &path[from.len() + 1..] };
    join(to, rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_like_think() {
        assert_eq!(normalize("a/b", "x").unwrap(), "/a/b");
        assert_eq!(normalize("/a//b/", "x").unwrap(), "/a/b");
        assert_eq!(normalize("/a/./b/../c", "x").unwrap(), "/a/c");
        assert_eq!(normalize("", "x").unwrap(), "/");
        assert_eq!(normalize(".", "x").unwrap(), "/");
        assert_eq!(normalize("/", "x").unwrap(), "/");
        // Paths already normal come back as they are; any other is rebuilt from its segments.
        for (path, want) in [
            ("/a", "/a"),
            ("/a/b.txt", "/a/b.txt"),
            ("/.hidden/..a/a../...", "/.hidden/..a/a../..."),
            ("/a/", "/a"),
            ("//a", "/a"),
            ("/a//b", "/a/b"),
            ("/a/.", "/a"),
            ("/a/..", "/"),
            ("/./a", "/a"),
            ("//", "/"),
            ("a", "/a"),
        ] {
            assert_eq!(lexical(path), want, "{path}");
        }
    }

    #[test]
    fn traversal_stays_in_root() {
        assert_eq!(normalize("/../../etc/passwd", "x").unwrap(), "/etc/passwd");
        assert_eq!(normalize("../../etc", "x").unwrap(), "/etc");
        assert_eq!(normalize("/a/../../..", "x").unwrap(), "/");
        assert_eq!(normalize("a/../../b/../../c", "x").unwrap(), "/c");
    }

    #[test]
    fn rejects_long_paths_and_nul() {
        let long = "/".to_owned() + &"a".repeat(4096);
        let e = normalize(&long, "open").unwrap_err();
        assert_eq!(e.errno(), Some(Errno::NameTooLong));
        assert!(normalize(&("/".to_owned() + &"a".repeat(4095)), "open").is_ok());
        // Redundant segments do not count against the limit.
        assert!(normalize(&("/./".repeat(3000) + "a"), "open").is_ok());
        let e = normalize("/a\0b", "open").unwrap_err();
        assert_eq!(e.errno(), Some(Errno::Inval));
    }

    #[test]
    fn parents_names_and_ancestors() {
        assert_eq!(parent("/"), None);
        assert_eq!(parent("/a"), Some("/"));
        assert_eq!(parent("/a/b"), Some("/a"));
        assert_eq!(basename("/a/b.txt"), "b.txt");
        assert_eq!(basename("/"), "");
        assert_eq!(ancestors("/a/b/c"), vec!["/a", "/a/b"]);
        assert!(ancestors("/a").is_empty());
        assert_eq!(join("/", "x"), "/x");
        assert_eq!(join("/d", "x"), "/d/x");
    }

    #[test]
    fn subtree_bounds_are_tight() {
        let (lo, hi) = subtree_bounds("/a");
        let inside = |p: &str| lo.as_str() < p && p < hi.as_str();
        assert!(inside("/a/b"));
        assert!(inside("/a/b/c"));
        assert!(!inside("/a"));
        assert!(!inside("/ab"));
        assert!(!inside("/a-b"));
        assert!(!inside("/b"));
        let (lo, hi) = subtree_bounds("/");
        assert!(lo.as_str() < "/x" && "/x" < hi.as_str());
        assert!(lo.as_str() >= "/", "the root itself is excluded by the strict bound");
    }

    #[test]
    fn within_and_rebase() {
        assert!(is_within("/a/b", "/a"));
        assert!(is_within("/a", "/a"));
        assert!(!is_within("/ab", "/a"));
        assert!(is_within("/x", "/"));
        assert_eq!(rebase("/a/b/c", "/a", "/z"), "/z/b/c");
        assert_eq!(rebase("/a", "/a", "/z"), "/z");
        assert_eq!(rebase("/b", "/", "/z"), "/z/b");
    }
}
