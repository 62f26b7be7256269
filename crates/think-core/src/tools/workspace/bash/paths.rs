//! Path helpers shared by snapshot and write-back, written to agree with Think's JS exactly.

use std::cmp::Ordering;

/// Think's `normalizeWorkspacePath`, which both sides of the bridge speak: the workspace's
/// own lexical normalization, without its length and NUL checks (just-bash paths are
/// already valid).
pub fn normalize_workspace_path(path: &str) -> String {
    crate::workspace::path::lexical(path)
}

/// JavaScript's default string order (UTF-16 code units), so sorted arrays match Think's
/// `Array.prototype.sort()` even for characters outside the Basic Multilingual Plane.
pub fn js_order(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Sorts in JavaScript's default order.
pub fn js_sort(items: &mut [String]) {
    crate::platform::sort::sort_by(items, |a, b| js_order(a, b));
}

/// True when `path` is `root` or lies below it (`/tmpfile` is not under `/tmp`).
pub fn is_under(path: &str, root: &str) -> bool {
    if root == "/" {
        return true;
    }
    path == root || (path.starts_with(root) && path.as_bytes().get(root.len()) == Some(&b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_like_think() {
        assert_eq!(normalize_workspace_path(""), "/");
        assert_eq!(normalize_workspace_path("/"), "/");
        assert_eq!(normalize_workspace_path("notes.txt"), "/notes.txt");
        assert_eq!(normalize_workspace_path("//a/./b//c/"), "/a/b/c");
        assert_eq!(normalize_workspace_path("/a/b/../c"), "/a/c");
        assert_eq!(normalize_workspace_path("../../etc/passwd"), "/etc/passwd");
        assert_eq!(normalize_workspace_path("/a/.."), "/");
    }

    #[test]
    fn js_order_uses_utf16_code_units() {
        // U+1F600 is the surrogate pair D83D DE00 in UTF-16, below U+FF5E; in UTF-8 it is above.
        let emoji = "/\u{1F600}";
        let fullwidth = "/\u{FF5E}";
        assert_eq!(js_order(emoji, fullwidth), Ordering::Less);
        assert_eq!(emoji.cmp(fullwidth), Ordering::Greater);
        let mut v = vec!["/b".to_owned(), "/B".to_owned(), "/a/b".to_owned(), "/a".to_owned()];
        js_sort(&mut v);
        assert_eq!(v, ["/B", "/a", "/a/b", "/b"]);
    }

    #[test]
    fn is_under_respects_segment_boundaries() {
        assert!(is_under("/tmp", "/tmp"));
        assert!(is_under("/tmp/x/y", "/tmp"));
        assert!(!is_under("/tmpfile", "/tmp"));
        assert!(!is_under("/", "/tmp"));
        assert!(is_under("/anything", "/"));
    }
}
