//! Unified diffs in Think's layout: `--- a` / `+++ b` headers, `@@ -s,n +s,n @@` hunks with
//! three lines of context, lines taken from a split on `\n`, joined with `\n`, and an empty
//! string when nothing changed.

use similar::{capture_diff_slices, group_diff_ops, Algorithm, DiffOp, DiffTag};
use std::collections::HashSet;

/// The most lines either side may have before a diff is refused (`EFBIG`).
pub const MAX_DIFF_LINES: usize = 10_000;

/// Lines (both sides together) above which the bounded diff of [`diff_ops`] is used.
const REDUCE_ABOVE: usize = 2_000;
/// Differing lines up to which a large diff is minimal; past it the lines between the common
/// prefix and suffix are reported as one replaced block.
const MAX_EDIT_DISTANCE: usize = 1_000;

/// The line diff of `a` and `b`. Myers' algorithm costs O((n + m) · d) for d differing
/// lines: seconds for two unrelated files at [`MAX_DIFF_LINES`]. Small inputs are diffed
/// directly. On large ones, lines that occur on one side only (which no common subsequence
/// can hold) are set aside first, as GNU diff does, and the rest is diffed by a greedy
/// Myers search that stops at [`MAX_EDIT_DISTANCE`]: O((n + m) · min(d, 1000)) time and
/// O(min(d, 1000)²) memory. Past that distance the diff is the common prefix and suffix
/// around one replaced block: still a correct diff, not a minimal one.
fn diff_ops(a: &[&str], b: &[&str]) -> Vec<DiffOp> {
    if a.len() + b.len() <= REDUCE_ABOVE {
        return capture_diff_slices(Algorithm::Myers, a, b);
    }
    let in_a: HashSet<&str> = a.iter().copied().collect();
    let in_b: HashSet<&str> = b.iter().copied().collect();
    let keep_a: Vec<usize> = (0..a.len()).filter(|&i| in_b.contains(a[i])).collect();
    let keep_b: Vec<usize> = (0..b.len()).filter(|&j| in_a.contains(b[j])).collect();
    let ra: Vec<&str> = keep_a.iter().map(|&i| a[i]).collect();
    let rb: Vec<&str> = keep_b.iter().map(|&j| b[j]).collect();
    let pairs: Vec<(usize, usize)> = match bounded_lcs(&ra, &rb, MAX_EDIT_DISTANCE) {
        Some(pairs) => pairs.into_iter().map(|(x, y)| (keep_a[x], keep_b[y])).collect(),
        None => {
            let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
            let max_suffix = a.len().min(b.len()) - prefix;
            let suffix = a
                .iter()
                .rev()
                .zip(b.iter().rev())
                .take(max_suffix)
                .take_while(|(x, y)| x == y)
                .count();
            (0..prefix)
                .map(|k| (k, k))
                .chain((0..suffix).rev().map(|k| (a.len() - 1 - k, b.len() - 1 - k)))
                .collect()
        }
    };
    ops_from_pairs(&pairs, a.len(), b.len())
}

/// The matched index pairs of a longest common subsequence of `a` and `b`, found by Myers'
/// greedy forward search, or `None` when more than `max_d` lines differ.
fn bounded_lcs(a: &[&str], b: &[&str], max_d: usize) -> Option<Vec<(usize, usize)>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let off = max_d as isize + 1;
    let mut v = vec![0isize; 2 * max_d + 3];
    // After each round d, the furthest x on diagonals -d..=d.
    let mut trace: Vec<Vec<isize>> = Vec::new();
    for d in 0..=max_d as isize {
        for k in (-d..=d).step_by(2) {
            let mut x =
                if k == -d || (k != d && v[(off + k - 1) as usize] < v[(off + k + 1) as usize]) {
                    v[(off + k + 1) as usize]
                } else {
                    v[(off + k - 1) as usize] + 1
                };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[(off + k) as usize] = x;
            if x >= n && y >= m {
                trace.push(v[(off - d) as usize..=(off + d) as usize].to_vec());
                return Some(backtrack(&trace, a.len(), b.len()));
            }
        }
        trace.push(v[(off - d) as usize..=(off + d) as usize].to_vec());
    }
    None
}

/// Walks the rounds of [`bounded_lcs`] back from the end, collecting the diagonal moves.
fn backtrack(trace: &[Vec<isize>], n: usize, m: usize) -> Vec<(usize, usize)> {
    let at = |d: isize, k: isize| trace[d as usize][(k + d) as usize];
    let (mut x, mut y) = (n as isize, m as isize);
    let mut pairs = Vec::new();
    for d in (1..trace.len() as isize).rev() {
        let k = x - y;
        let prev_k =
            if k == -d || (k != d && at(d - 1, k - 1) < at(d - 1, k + 1)) { k + 1 } else { k - 1 };
        let prev_x = at(d - 1, prev_k);
        let prev_y = prev_x - prev_k;
        let (mid_x, mid_y) =
            if prev_k == k + 1 { (prev_x, prev_y + 1) } else { (prev_x + 1, prev_y) };
        while x > mid_x && y > mid_y {
            x -= 1;
            y -= 1;
            pairs.push((x as usize, y as usize));
        }
        (x, y) = (prev_x, prev_y);
    }
    while x > 0 && y > 0 {
        x -= 1;
        y -= 1;
        pairs.push((x as usize, y as usize));
    }
    pairs.reverse();
    pairs
}

/// The diff operations for matched pairs (increasing on both sides) of sequences of
/// lengths `n` and `m`.
fn ops_from_pairs(pairs: &[(usize, usize)], n: usize, m: usize) -> Vec<DiffOp> {
    let mut ops = Vec::new();
    let (mut i, mut j) = (0, 0);
    for &(pi, pj) in pairs.iter().chain([(n, m)].iter()) {
        let (old_len, new_len) = (pi - i, pj - j);
        match (old_len, new_len) {
            (0, 0) => {}
            (_, 0) => ops.push(DiffOp::Delete { old_index: i, old_len, new_index: j }),
            (0, _) => ops.push(DiffOp::Insert { old_index: i, new_index: j, new_len }),
            _ => ops.push(DiffOp::Replace { old_index: i, old_len, new_index: j, new_len }),
        }
        if pi == n {
            break;
        }
        match ops.last_mut() {
            Some(DiffOp::Equal { old_index, len, .. })
                if old_len == 0 && new_len == 0 && *old_index + *len == pi =>
            {
                *len += 1
            }
            _ => ops.push(DiffOp::Equal { old_index: pi, new_index: pj, len: 1 }),
        }
        (i, j) = (pi + 1, pj + 1);
    }
    ops
}

/// A unified diff from `old` to `new`, labelled with `label_old` and `label_new`.
pub fn unified_diff(old: &str, new: &str, label_old: &str, label_new: &str) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = old.split('\n').collect();
    let b: Vec<&str> = new.split('\n').collect();
    let ops = diff_ops(&a, &b);
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
    fn large_inputs_give_the_same_diff_as_plain_myers() {
        let old: Vec<String> = (0..3_000).map(|i| format!("line {}", i % 700)).collect();
        let mut new = old.clone();
        for k in (0..3_000).step_by(7) {
            new[k] = format!("changed {k}");
        }
        new.insert(100, "inserted".into());
        new.remove(2_000);
        let (a, b): (Vec<&str>, Vec<&str>) =
            (old.iter().map(String::as_str).collect(), new.iter().map(String::as_str).collect());
        let render = |ops: &[DiffOp]| -> Vec<(similar::ChangeTag, usize, usize)> {
            ops.iter()
                .flat_map(|op| op.iter_changes(&a, &b))
                .map(|c| {
                    (
                        c.tag(),
                        c.old_index().unwrap_or(usize::MAX),
                        c.new_index().unwrap_or(usize::MAX),
                    )
                })
                .collect()
        };
        let plain = capture_diff_slices(Algorithm::Myers, &a, &b);
        let reduced = diff_ops(&a, &b);
        let kept = |r: &[(similar::ChangeTag, usize, usize)]| {
            r.iter().filter(|c| c.0 == similar::ChangeTag::Equal).count()
        };
        // Both are longest common subsequences of the same length.
        assert_eq!(kept(&render(&reduced)), kept(&render(&plain)));
        assert_eq!(render(&reduced).len(), render(&plain).len());
        // Past the edit-distance bound: common prefix and suffix around one block.
        let reversed: Vec<&str> = a.iter().rev().copied().collect();
        let mut far = a.clone();
        far[1..2_999].reverse();
        let ops = diff_ops(&a, &far);
        assert!(matches!(ops[0], DiffOp::Equal { old_index: 0, new_index: 0, len: 1 }), "{ops:?}");
        assert!(matches!(ops.last(), Some(DiffOp::Equal { len: 1, .. })), "{ops:?}");
        assert!(!diff_ops(&a, &reversed).is_empty());
    }

    #[test]
    fn bounded_search_finds_a_longest_common_subsequence() {
        let a = ["a", "b", "c", "a", "b", "b", "a"];
        let b = ["c", "b", "a", "b", "a", "c"];
        let pairs = bounded_lcs(&a, &b, 100).unwrap();
        assert_eq!(pairs.len(), 4);
        assert!(pairs.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
        assert!(pairs.iter().all(|&(x, y)| a[x] == b[y]));
        assert_eq!(bounded_lcs(&a, &b, 2), None);
        assert_eq!(bounded_lcs(&[], &[], 0), Some(vec![]));
    }

    #[test]
    fn insertion_into_empty() {
        let d = unified_diff("", "x", "/a", "/a");
        assert_eq!(d, "--- /a\n+++ /a\n@@ -1,1 +1,1 @@\n-\n+x");
    }
}
