//! Unified diffs in Think's layout: `--- a` / `+++ b` headers, `@@ -s,n +s,n @@` hunks with
//! three lines of context, lines taken from a split on `\n`, joined with `\n`, and an empty
//! string when nothing changed.

use similar::{capture_diff_slices, group_diff_ops, Algorithm, DiffTag};

/// The most lines either side may have before a diff is refused (`EFBIG`).
pub const MAX_DIFF_LINES: usize = 10_000;

/// A unified diff from `old` to `new`, labelled with `label_old` and `label_new`.
pub fn unified_diff(old: &str, new: &str, label_old: &str, label_new: &str) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = old.split('\n').collect();
    let b: Vec<&str> = new.split('\n').collect();
    let ops = capture_diff_slices(Algorithm::Myers, &a, &b);
    let groups = group_diff_ops(ops, 3);
    if groups.is_empty() {
        return String::new();
    }
    let mut out = vec![format!("--- {label_old}"), format!("+++ {label_new}")];
    for group in groups {
        let (Some(first), Some(last)) = (group.first(), group.last()) else { continue };
        let old_start = first.old_range().start;
        let new_start = first.new_range().start;
        let old_len = last.old_range().end - old_start;
        let new_len = last.new_range().end - new_start;
        let start = |s: usize, len: usize| if len == 0 { s } else { s + 1 };
        out.push(format!(
            "@@ -{},{} +{},{} @@",
            start(old_start, old_len),
            old_len,
            start(new_start, new_len),
            new_len
        ));
        for op in group {
            let (tag, old_range, new_range) = op.as_tag_tuple();
            match tag {
                DiffTag::Equal => out.extend(a[old_range].iter().map(|l| format!(" {l}"))),
                DiffTag::Delete => out.extend(a[old_range].iter().map(|l| format!("-{l}"))),
                DiffTag::Insert => out.extend(b[new_range].iter().map(|l| format!("+{l}"))),
                DiffTag::Replace => {
                    out.extend(a[old_range].iter().map(|l| format!("-{l}")));
                    out.extend(b[new_range].iter().map(|l| format!("+{l}")));
                }
            }
        }
    }
    out.join("\n")
}

/// Number of lines as Think counts them (pieces of a split on `\n`).
pub fn line_count(s: &str) -> usize {
    s.split('\n').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_inputs_give_empty_diff() {
        assert_eq!(unified_diff("a\nb", "a\nb", "/x", "/y"), "");
    }

    #[test]
    fn one_changed_line_with_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9";
        let new = "1\n2\n3\n4\nFIVE\n6\n7\n8\n9";
        let d = unified_diff(old, new, "/a", "/b");
        assert_eq!(d, "--- /a\n+++ /b\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+FIVE\n 6\n 7\n 8");
    }

    #[test]
    fn distant_changes_make_two_hunks() {
        let old: Vec<String> = (1..=30).map(|i| i.to_string()).collect();
        let mut new = old.clone();
        new[1] = "two".into();
        new[27] = "twenty-eight".into();
        let d = unified_diff(&old.join("\n"), &new.join("\n"), "/a", "/a");
        assert_eq!(d.matches("\n@@ ").count(), 2, "{d}");
        assert!(d.contains("@@ -1,5 +1,5 @@"), "{d}");
    }

    #[test]
    fn insertion_into_empty() {
        let d = unified_diff("", "x", "/a", "/a");
        assert_eq!(d, "--- /a\n+++ /a\n@@ -1,1 +1,1 @@\n-\n+x");
    }
}
