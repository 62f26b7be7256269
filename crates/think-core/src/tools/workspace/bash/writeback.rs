//! Write-back phase: compare the engine's final filesystem with the baseline and apply the
//! difference to the workspace, refusing anything that would touch a protected file.
//!
//! Which paths count is Think's `shouldSyncBashPath`, with one fix: paths that existed in
//! the workspace are always compared, directories included. (Think compares only initial
//! *files*, so a workspace directory `/tmp` vanished from the final set and was deleted with
//! everything in it.) New paths under `/tmp` and the system roots are never persisted.
//!
//! Operations run deletes first (files, then directories, deepest first), then directory
//! creation (parents first), then file writes, so a path that changed between file and
//! directory is replaced cleanly. Think runs creates first, where such a change fails.

use super::engine::{FinalEntry, FinalKind};
use super::paths::{is_under, js_order, js_sort, normalize_workspace_path};
use super::snapshot::{Baseline, ContentDigest};
use super::BashFs;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Roots whose new paths are never written back: scratch space and just-bash's own layout.
pub const EXCLUDED_ROOTS: [&str; 6] = ["/tmp", "/bin", "/usr", "/dev", "/proc", "/sys"];

/// The tool output's `changedFiles`; every list sorted in JavaScript order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangedFiles {
    /// Files the script created.
    pub created: Vec<String>,
    /// Files the script changed.
    pub updated: Vec<String>,
    /// Files the script deleted.
    pub deleted: Vec<String>,
    /// Directories the script created.
    pub directories_created: Vec<String>,
    /// Directories the script deleted.
    pub directories_deleted: Vec<String>,
}

/// One file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileWrite {
    pub path: String,
    pub bytes: Vec<u8>,
    /// The file is new (reported in `created`), otherwise it is reported in `updated`.
    pub created: bool,
}

/// The operations write-back will perform, in order, plus what it refused to do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WritePlan {
    /// Deepest first.
    pub delete_files: Vec<String>,
    /// Deepest first.
    pub delete_dirs: Vec<String>,
    /// Parents first.
    pub create_dirs: Vec<String>,
    /// Sorted by path.
    pub writes: Vec<FileWrite>,
    /// Think's error strings for refused operations.
    pub refusals: Vec<String>,
}

/// Whether a final path takes part in write-back.
fn should_sync(path: &str, baseline: &Baseline) -> bool {
    if path == "/" {
        return false;
    }
    if baseline.files.contains_key(path)
        || baseline.dirs.contains(path)
        || baseline.protected.contains(path)
    {
        return true;
    }
    !EXCLUDED_ROOTS.iter().any(|root| is_under(path, root))
}

/// Computes the write-back for the engine's final `entries`.
pub fn plan_write_back(baseline: &Baseline, entries: Vec<FinalEntry>) -> WritePlan {
    let mut plan = WritePlan::default();
    let mut final_dirs: BTreeSet<String> = BTreeSet::new();
    // path → new bytes, or None when unchanged.
    let mut final_files: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
    for entry in entries {
        let path = normalize_workspace_path(&entry.path);
        if !should_sync(&path, baseline) {
            continue;
        }
        match entry.kind {
            FinalKind::Dir => {
                final_dirs.insert(path);
            }
            FinalKind::File => {
                let unchanged = match (&entry.content, baseline.files.get(&path)) {
                    (Some(bytes), Some(digest)) => ContentDigest::of(bytes) == *digest,
                    (Some(_), None) => false,
                    (None, Some(_)) => true,
                    // Refused below like any write to a protected path.
                    (None, None) if baseline.protected.contains(&path) => true,
                    // "Unchanged" for a path that was never mounted is an engine bug; the
                    // file cannot be written without its bytes.
                    (None, None) => {
                        plan.refusals.push(format!(
                            "Failed to write {path}: the bash engine returned no content."
                        ));
                        continue;
                    }
                };
                final_files.insert(path, if unchanged { None } else { entry.content });
            }
        }
    }

    for path in baseline.files.keys() {
        if !final_files.contains_key(path) {
            plan.delete_files.push(path.clone());
        }
    }
    crate::platform::sort::sort_by(&mut plan.delete_files, |a, b| js_order(b, a));

    for path in &baseline.dirs {
        if path == "/" || final_dirs.contains(path) {
            continue;
        }
        if baseline.has_protected_descendant(path) {
            plan.refusals.push(format!("Skipped deleting protected workspace directory: {path}"));
        } else {
            plan.delete_dirs.push(path.clone());
        }
    }
    crate::platform::sort::sort_by(&mut plan.delete_dirs, |a, b| js_order(b, a));

    for path in &final_dirs {
        if baseline.dirs.contains(path) {
            continue;
        }
        if baseline.protected.contains(path) || baseline.has_protected_descendant(path) {
            plan.refusals
                .push(format!("Skipped creating directory {path}: contains protected paths."));
        } else {
            plan.create_dirs.push(path.clone());
        }
    }
    js_sort(&mut plan.create_dirs);

    for (path, content) in final_files {
        if baseline.protected.contains(&path) {
            plan.refusals.push(format!("Skipped writing protected workspace file: {path}"));
            continue;
        }
        if let Some(bytes) = content {
            let created = !baseline.files.contains_key(&path);
            plan.writes.push(FileWrite { path, bytes, created });
        }
    }
    crate::platform::sort::sort_by(&mut plan.writes, |a, b| js_order(&a.path, &b.path));
    plan
}

/// Applies `plan` to the workspace. Returns what changed and every error (refusals and
/// failed operations), sorted; a failed operation is left out of `ChangedFiles`.
pub async fn apply_write_back(fs: &dyn BashFs, plan: WritePlan) -> (ChangedFiles, Vec<String>) {
    let mut changed = ChangedFiles::default();
    let mut errors = plan.refusals;
    for path in plan.delete_files {
        match fs.remove(&path, false).await {
            Ok(()) => changed.deleted.push(path),
            Err(e) => errors.push(format!("Failed to delete {path}: {e}")),
        }
    }
    for path in plan.delete_dirs {
        match fs.remove(&path, true).await {
            Ok(()) => changed.directories_deleted.push(path),
            Err(e) => errors.push(format!("Failed to delete directory {path}: {e}")),
        }
    }
    for path in plan.create_dirs {
        match fs.mkdir(&path).await {
            Ok(()) => changed.directories_created.push(path),
            Err(e) => errors.push(format!("Failed to create directory {path}: {e}")),
        }
    }
    for write in plan.writes {
        match fs.write_file_bytes(&write.path, &write.bytes).await {
            Ok(()) if write.created => changed.created.push(write.path),
            Ok(()) => changed.updated.push(write.path),
            Err(e) => errors.push(format!("Failed to write {}: {e}", write.path)),
        }
    }
    for list in [
        &mut changed.created,
        &mut changed.updated,
        &mut changed.deleted,
        &mut changed.directories_created,
        &mut changed.directories_deleted,
        &mut errors,
    ] {
        js_sort(list);
    }
    (changed, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn baseline(files: &[(&str, &[u8])], dirs: &[&str], protected: &[&str]) -> Baseline {
        let mut b = Baseline::default();
        b.dirs.insert("/".into());
        for (p, bytes) in files {
            b.files.insert((*p).into(), ContentDigest::of(bytes));
        }
        b.dirs.extend(dirs.iter().map(|d| (*d).to_owned()));
        b.protected.extend(protected.iter().map(|p| (*p).to_owned()));
        b
    }

    fn file(path: &str, content: Option<&[u8]>) -> FinalEntry {
        FinalEntry {
            path: path.into(),
            kind: FinalKind::File,
            content: content.map(<[u8]>::to_vec),
        }
    }

    fn dir(path: &str) -> FinalEntry {
        FinalEntry { path: path.into(), kind: FinalKind::Dir, content: None }
    }

    fn write(path: &str, bytes: &[u8], created: bool) -> FileWrite {
        FileWrite { path: path.into(), bytes: bytes.to_vec(), created }
    }

    #[test]
    fn unchanged_state_plans_nothing() {
        let b = baseline(&[("/a.txt", b"a"), ("/d/b.txt", b"b")], &["/d"], &[]);
        let plan = plan_write_back(
            &b,
            vec![file("/a.txt", None), dir("/d"), file("/d/b.txt", Some(b"b"))],
        );
        assert_eq!(plan, WritePlan::default());
    }

    #[test]
    fn creates_updates_and_deletes() {
        let b = baseline(
            &[("/keep", b"k"), ("/edit", b"old"), ("/gone", b"g"), ("/old/x", b"x")],
            &["/old"],
            &[],
        );
        let plan = plan_write_back(
            &b,
            vec![
                file("/keep", None),
                file("/edit", Some(b"new")),
                dir("/new"),
                dir("/new/deeper"),
                file("/new/deeper/f", Some(b"f")),
                file("/top", Some(b"")),
            ],
        );
        assert_eq!(plan.delete_files, ["/old/x", "/gone"]);
        assert_eq!(plan.delete_dirs, ["/old"]);
        assert_eq!(plan.create_dirs, ["/new", "/new/deeper"]);
        assert_eq!(
            plan.writes,
            [
                write("/edit", b"new", false),
                write("/new/deeper/f", b"f", true),
                write("/top", b"", true)
            ]
        );
        assert!(plan.refusals.is_empty());
    }

    #[test]
    fn deletes_run_deepest_first() {
        let b = baseline(
            &[("/a/1", b"1"), ("/a/b/2", b"2"), ("/a/b/c/3", b"3")],
            &["/a", "/a/b", "/a/b/c"],
            &[],
        );
        let plan = plan_write_back(&b, vec![]);
        assert_eq!(plan.delete_files, ["/a/b/c/3", "/a/b/2", "/a/1"]);
        assert_eq!(plan.delete_dirs, ["/a/b/c", "/a/b", "/a"]);
    }

    #[test]
    fn excluded_roots_drop_new_paths_only() {
        let b = baseline(&[("/tmp/kept.txt", b"k")], &["/tmp"], &[]);
        let plan = plan_write_back(
            &b,
            vec![
                dir("/tmp"),
                file("/tmp/kept.txt", Some(b"changed")),
                file("/tmp/scratch", Some(b"s")),
                dir("/tmp/sub"),
                dir("/bin"),
                file("/bin/ls", Some(b"stub")),
                dir("/usr"),
                dir("/usr/bin"),
                dir("/dev"),
                file("/dev/null", Some(b"")),
                dir("/proc"),
                dir("/sys"),
                file("/tmpfile", Some(b"t")),
            ],
        );
        // The workspace's own /tmp is neither deleted nor ignored (Think would delete it).
        assert!(plan.delete_dirs.is_empty());
        assert!(plan.create_dirs.is_empty());
        assert_eq!(
            plan.writes,
            [write("/tmp/kept.txt", b"changed", false), write("/tmpfile", b"t", true)]
        );
    }

    #[test]
    fn protected_files_are_never_written() {
        let b = baseline(&[], &["/d"], &["/d/big.bin"]);
        let plan = plan_write_back(&b, vec![dir("/d"), file("/d/big.bin", Some(b"overwrite"))]);
        assert!(plan.writes.is_empty());
        assert_eq!(plan.refusals, ["Skipped writing protected workspace file: /d/big.bin"]);
    }

    #[test]
    fn protected_files_keep_their_directories() {
        let b = baseline(&[("/d/small", b"s")], &["/d", "/d/e"], &["/d/e/big.bin"]);
        // The script ran `rm -rf /d`.
        let plan = plan_write_back(&b, vec![]);
        assert_eq!(plan.delete_files, ["/d/small"]);
        assert!(plan.delete_dirs.is_empty());
        assert_eq!(
            plan.refusals,
            [
                "Skipped deleting protected workspace directory: /d",
                "Skipped deleting protected workspace directory: /d/e"
            ]
        );
    }

    #[test]
    fn directory_over_a_protected_file_is_refused() {
        let b = baseline(&[], &[], &["/big.bin"]);
        let plan = plan_write_back(&b, vec![dir("/big.bin"), file("/big.bin/x", Some(b"x"))]);
        assert!(plan.create_dirs.is_empty());
        assert_eq!(
            plan.refusals[0],
            "Skipped creating directory /big.bin: contains protected paths."
        );
        // The file inside is planned (the workspace write fails on its own if it must).
        assert_eq!(plan.writes, [write("/big.bin/x", b"x", true)]);
    }

    #[test]
    fn file_and_directory_swaps() {
        let b = baseline(&[("/was-file", b"f"), ("/was-dir/x", b"x")], &["/was-dir"], &[]);
        let plan = plan_write_back(
            &b,
            vec![
                dir("/was-file"),
                file("/was-file/inner", Some(b"i")),
                file("/was-dir", Some(b"now a file")),
            ],
        );
        assert_eq!(plan.delete_files, ["/was-file", "/was-dir/x"]);
        assert_eq!(plan.delete_dirs, ["/was-dir"]);
        assert_eq!(plan.create_dirs, ["/was-file"]);
        assert_eq!(
            plan.writes,
            [write("/was-dir", b"now a file", true), write("/was-file/inner", b"i", true)]
        );
    }

    #[test]
    fn full_content_equal_to_the_mount_is_not_an_update() {
        let b = baseline(&[("/bin.dat", &[0, 255, 128])], &[], &[]);
        let plan = plan_write_back(&b, vec![file("/bin.dat", Some(&[0, 255, 128]))]);
        assert!(plan.writes.is_empty());
        let plan = plan_write_back(&b, vec![file("/bin.dat", Some(&[0, 255, 129]))]);
        assert_eq!(plan.writes, [write("/bin.dat", &[0, 255, 129], false)]);
    }

    #[test]
    fn unchanged_marker_for_an_unknown_file_is_reported() {
        let b = baseline(&[], &[], &[]);
        let plan = plan_write_back(&b, vec![file("/ghost", None)]);
        assert!(plan.writes.is_empty());
        assert_eq!(plan.refusals, ["Failed to write /ghost: the bash engine returned no content."]);
    }

    #[test]
    fn engine_paths_are_normalized_and_root_ignored() {
        let b = baseline(&[("/a", b"a")], &[], &[]);
        let plan =
            plan_write_back(&b, vec![dir("/"), file("//a", None), file("/x/../b", Some(b"b"))]);
        assert!(plan.delete_files.is_empty());
        assert_eq!(plan.writes, [write("/b", b"b", true)]);
    }
}
