//! One sort for the crate. [`sort_by`] orders a slice through a single instantiation of the
//! standard library's stable sort (over `u32` positions, with a `dyn` comparator), then moves
//! the elements into place; the order is the one `slice::sort_by` gives, equal elements
//! included.
//!
//! Measured reason (BENCHMARKS.md, "Sizes"): each `sort_by`/`sort_by_key`/`sort` call with
//! its own closure or element type instantiates the whole driftsort (partition, merge, small
//! sorts: about 3 KB of wasm each); 30 of them were 92 KB of the code section.

use std::cmp::Ordering;

/// Sorts `v` by `cmp`, stably, as `slice::sort_by` does.
pub fn sort_by<T>(v: &mut [T], mut cmp: impl FnMut(&T, &T) -> Ordering) {
    if v.len() < 2 {
        return;
    }
    let mut order: Vec<u32> = (0..v.len() as u32).collect();
    sort_positions(&mut order, &mut |a, b| cmp(&v[a], &v[b]));
    permute(v, &mut order);
}

/// Sorts `v` by the key `key` gives, stably, as `slice::sort_by_key` does.
pub fn sort_by_key<T, K: Ord>(v: &mut [T], mut key: impl FnMut(&T) -> K) {
    sort_by(v, |a, b| key(a).cmp(&key(b)));
}

/// Sorts `v` in its natural order (equal elements are indistinguishable, so this is also what
/// `sort_unstable` gives).
pub fn sort<T: Ord>(v: &mut [T]) {
    sort_by(v, T::cmp);
}

/// The one instantiation of the standard sort.
#[inline(never)]
fn sort_positions(order: &mut [u32], cmp: &mut dyn FnMut(usize, usize) -> Ordering) {
    order.sort_by(|&a, &b| cmp(a as usize, b as usize));
}

/// Puts `v[order[i]]` at `i` for every `i`, following each cycle of the permutation once.
fn permute<T>(v: &mut [T], order: &mut [u32]) {
    const DONE: u32 = u32::MAX;
    for start in 0..v.len() {
        let mut cur = start;
        while order[cur] != DONE {
            let next = order[cur] as usize;
            order[cur] = DONE;
            if next == start {
                break;
            }
            v.swap(cur, next);
            cur = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_as_the_standard_stable_sort() {
        // Pairs compared by their first field only, so stability shows in the second.
        let mut seed = 7u32;
        for len in [0usize, 1, 2, 3, 10, 100, 1000] {
            let v: Vec<(u8, u32)> = (0..len as u32)
                .map(|i| {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    ((seed >> 24) as u8 % 7, i)
                })
                .collect();
            let mut ours = v.clone();
            let mut std = v.clone();
            sort_by(&mut ours, |a, b| (b.0 % 3).cmp(&(a.0 % 3)).then(a.0.cmp(&b.0)));
            std.sort_by(|a, b| (b.0 % 3).cmp(&(a.0 % 3)).then(a.0.cmp(&b.0)));
            assert_eq!(ours, std, "len {len}");
            let mut ours = v.clone();
            let mut std = v;
            sort_by_key(&mut ours, |p| p.0);
            std.sort_by_key(|p| p.0);
            assert_eq!(ours, std, "len {len}");
        }
        let mut words = vec!["b".to_owned(), "a".into(), "c".into(), "a".into()];
        sort(&mut words);
        assert_eq!(words, ["a", "a", "b", "c"]);
    }
}
