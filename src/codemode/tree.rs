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
    Ok(node(info, 0, max_depth, &mut by_parent))
}

fn depth_of(p: &str) -> u64 {
    if p == "/" {
        0
    } else {
        p.matches('/').count() as u64
    }
}

fn node(
    info: FileInfo,
    depth: u64,
    max_depth: Option<u64>,
    by_parent: &mut HashMap<String, Vec<FileInfo>>,
) -> Value {
    let name = if info.path == "/" { "/" } else { path::basename(&info.path) };
    let mut out =
        json!({"path": info.path, "name": name, "type": info.kind.as_str(), "size": info.size});
    if info.kind == EntryType::Directory && max_depth.is_none_or(|m| depth < m) {
        let mut children = by_parent.remove(&info.path).unwrap_or_default();
        crate::platform::sort::sort_by(&mut children, |a, b| {
            path::basename(&a.path).cmp(path::basename(&b.path))
        });
        out["children"] =
            children.into_iter().map(|c| node(c, depth + 1, max_depth, by_parent)).collect();
    }
    out
}

/// Think's summary of [`walk_tree`]'s tree: `{files, directories, symlinks, totalBytes, maxDepth}`.
pub fn summarize_tree(
    ws: &Workspace,
    root: &str,
    max_depth: Option<u64>,
) -> Result<Value, ConnectorError> {
    fn visit(n: &Value, depth: u64, counts: &mut [u64; 5]) {
        counts[4] = counts[4].max(depth);
        match n["type"].as_str() {
            Some("file") => {
                counts[0] += 1;
                counts[3] += n["size"].as_u64().unwrap_or(0);
            }
            Some("directory") => counts[1] += 1,
            _ => counts[2] += 1,
        }
        for c in n["children"].as_array().into_iter().flatten() {
            visit(c, depth + 1, counts);
        }
    }
    let tree = walk_tree(ws, root, max_depth)?;
    let mut c = [0u64; 5];
    visit(&tree, 0, &mut c);
    Ok(
        json!({"files": c[0], "directories": c[1], "symlinks": c[2], "totalBytes": c[3], "maxDepth": c[4]}),
    )
}
