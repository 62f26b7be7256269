//! `state.walkTree` and `state.summarizeTree` with Think's shapes (@cloudflare/shell's
//! `buildTree` / `summarizeTree`): a node is `{path, name, type, size, children?}`, children
//! sorted by name and listed only above `options.maxDepth`; the summary counts the root too.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::connectors::ConnectorError;
use crate::workspace::{path, EntryType, FileInfo, Workspace};

/// The nested tree under `root`, down to `max_depth` levels of children (all when `None`).
pub fn walk_tree(
    ws: &Workspace,
    root: &str,
    max_depth: Option<u64>,
) -> Result<Value, ConnectorError> {
    let root = path::normalize(root, "walkTree")?;
    let Some(info) = ws.lstat(&root)? else {
        return Err(ConnectorError::Failed(format!("ENOENT: no such file or directory: {root}")));
    };
    let mut by_parent: HashMap<String, Vec<FileInfo>> = HashMap::new();
    if info.kind == EntryType::Directory && max_depth != Some(0) {
        let pattern = if root == "/" { "/**".to_owned() } else { format!("{root}/**") };
        let base = depth_of(&root);
        for entry in ws.glob(&pattern)? {
            if max_depth.is_some_and(|m| depth_of(&entry.path) - base > m) {
                continue;
            }
            let parent = path::parent(&entry.path).unwrap_or("/").to_owned();
            by_parent.entry(parent).or_default().push(entry);
        }
    }
    Ok(tree_of(info, max_depth, &mut by_parent))
}

fn depth_of(p: &str) -> u64 {
    if p == "/" {
        0
    } else {
        p.matches('/').count() as u64
    }
}

/// The tree of `root`, built with a stack of open directories instead of recursion: a tree
/// as deep as paths allow (2,048 levels) would take ~1 MB of the wasm instance's 256 KiB stack.
fn tree_of(
    root: FileInfo,
    max_depth: Option<u64>,
    by_parent: &mut HashMap<String, Vec<FileInfo>>,
) -> Value {
    let mut open = vec![Open::new(root, 0, max_depth, by_parent)];
    loop {
        let top = open.last_mut().expect("the root stays open until it is returned");
        if let Some(child) = top.pending.next() {
            let depth = top.depth + 1;
            open.push(Open::new(child, depth, max_depth, by_parent));
            continue;
        }
        let done = open.pop().expect("checked above").close();
        match open.last_mut() {
            Some(parent) => parent.children.push(done),
            None => return done,
        }
    }
}

/// A node of [`tree_of`] whose children are still being built.
struct Open {
    node: Value,
    depth: u64,
    /// Its children in name order, not yet built (none when it lists none).
    pending: std::vec::IntoIter<FileInfo>,
    lists: bool,
    children: Vec<Value>,
}

impl Open {
    fn new(
        info: FileInfo,
        depth: u64,
        max_depth: Option<u64>,
        by_parent: &mut HashMap<String, Vec<FileInfo>>,
    ) -> Open {
        let name = if info.path == "/" { "/" } else { path::basename(&info.path) };
        let node =
            json!({"path": info.path, "name": name, "type": info.kind.as_str(), "size": info.size});
        let lists = info.kind == EntryType::Directory && max_depth.is_none_or(|m| depth < m);
        let mut pending = Vec::new();
        if lists {
            pending = by_parent.remove(&info.path).unwrap_or_default();
            crate::platform::sort::sort_by(&mut pending, |a, b| {
                path::basename(&a.path).cmp(path::basename(&b.path))
            });
        }
        Open { node, depth, pending: pending.into_iter(), lists, children: Vec::new() }
    }

    fn close(mut self) -> Value {
        if self.lists {
            self.node["children"] = Value::Array(self.children);
        }
        self.node
    }
}

/// Think's summary of [`walk_tree`]'s tree: `{files, directories, symlinks, totalBytes, maxDepth}`.
pub fn summarize_tree(
    ws: &Workspace,
    root: &str,
    max_depth: Option<u64>,
) -> Result<Value, ConnectorError> {
    let tree = walk_tree(ws, root, max_depth)?;
    // files, directories, symlinks, bytes, deepest level; a stack, as `tree_of` builds it.
    let mut c = [0u64; 5];
    let mut stack = vec![(&tree, 0u64)];
    while let Some((n, depth)) = stack.pop() {
        c[4] = c[4].max(depth);
        match n["type"].as_str() {
            Some("file") => {
                c[0] += 1;
                c[3] += n["size"].as_u64().unwrap_or(0);
            }
            Some("directory") => c[1] += 1,
            _ => c[2] += 1,
        }
        stack.extend(n["children"].as_array().into_iter().flatten().map(|k| (k, depth + 1)));
    }
    Ok(
        json!({"files": c[0], "directories": c[1], "symlinks": c[2], "totalBytes": c[3], "maxDepth": c[4]}),
    )
}
