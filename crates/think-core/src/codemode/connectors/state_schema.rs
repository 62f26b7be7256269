//! What the model is told about each `state.*` method: its description and the JSON Schemas
//! of its argument and result.

use serde_json::{json, Value};

use super::state::StateMethod;
use super::{spec, MethodSpec};

/// What the model is told about `m`: its description and the schemas of its argument and
/// result.
pub(super) fn method_spec(m: StateMethod) -> MethodSpec {
    use StateMethod as M;
    let p = path_prop;
    let s = |d: &str| json!({"type": "string", "description": d});
    let b = |d: &str| json!({"type": "boolean", "description": d});
    let (description, props, required): (&str, Value, &[&str]) = match m {
        M::GetCapabilities => (
            "What this workspace supports.",
            json!({}),
            &[],
        ),
        M::ReadFile => (
            "Read a text file; with withVersion, {content, version} (the version writeFile's expectedVersion takes).",
            json!({"path": p(), "withVersion": b("Return {content, version} instead of the text")}),
            &["path"],
        ),
        M::WriteFile => (
            "Create or overwrite a text file (parents are created); with expectedVersion, refused if the file changed since that version.",
            json!({"path": p(), "content": s("The new text"), "expectedVersion": s("The version readFile reported")}),
            &["path", "content"],
        ),
        M::AppendFile => (
            "Append text to a file (created if missing).",
            json!({"path": p(), "content": s("Text to append")}),
            &["path", "content"],
        ),
        M::ReadJson => (
            "Read and parse a JSON file.",
            json!({"path": p()}),
            &["path"],
        ),
        M::WriteJson => (
            "Write a value as JSON.",
            json!({"path": p(), "value": {"description": "Any JSON value"}, "options": {"type": "object",
                "properties": {"spaces": {"type": "integer", "minimum": 0, "description": "Indentation (default 2)"}},
                "additionalProperties": false}}),
            &["path", "value"],
        ),
        M::QueryJson => (
            "Read one value from a JSON file by a dotted path such as `a.b[0].c`.",
            json!({"path": p(), "query": s("Dotted path")}),
            &["path", "query"],
        ),
        M::Exists => (
            "Whether anything is at a path.",
            json!({"path": p()}),
            &["path"],
        ),
        M::Stat => (
            "Metadata of a path (following symlinks), or null.",
            json!({"path": p()}),
            &["path"],
        ),
        M::Lstat => (
            "Metadata of a path itself (not following symlinks), or null.",
            json!({"path": p()}),
            &["path"],
        ),
        M::Mkdir => (
            "Create a directory.",
            json!({"path": p(), "recursive": b("Create missing parents")}),
            &["path"],
        ),
        M::Readdir => (
            "Names in a directory.",
            json!({"path": p()}),
            &["path"],
        ),
        M::ReaddirWithFileTypes => (
            "Entries of a directory with their types.",
            json!({"path": p()}),
            &["path"],
        ),
        M::Glob => (
            "Paths matching a glob pattern such as `/src/**/*.ts`.",
            json!({"pattern": s("Glob pattern")}),
            &["pattern"],
        ),
        M::Find => (
            "Files and directories under a path, filtered by a glob on their path and by \
             Think's find options (name, type, depth, emptiness, size, modification time).",
            json!({"path": p(), "pattern": s("Glob pattern"), "options": find_options()}),
            &["path"],
        ),
        M::SummarizeTree => (
            "Counts of the files, directories (the root included) and symlinks under a path, \
             their total bytes and the deepest level, down to `options.maxDepth`.",
            json!({"path": p(), "options": tree_options()}),
            &["path"],
        ),
        M::SearchText => (
            "Matches of a string (or, with `options.regex`, a regular expression) in one file.",
            json!({"path": p(), "query": s("Text to find"), "options": search_options()}),
            &["path", "query"],
        ),
        M::SearchFiles => (
            "Matches of a string (or regular expression) in every file matching a glob.",
            json!({"pattern": s("Glob pattern"), "query": s("Text to find"), "options": search_options()}),
            &["pattern", "query"],
        ),
        M::ReplaceInFile => (
            "Replace every occurrence of a string in a file.",
            json!({"path": p(), "search": s("Text to find"), "replacement": s("Replacement")}),
            &["path", "search", "replacement"],
        ),
        M::Rm => (
            "Remove a file or directory.",
            json!({"path": p(), "recursive": b("Remove directories and their contents"), "force": b("Ignore a missing path")}),
            &["path"],
        ),
        M::Cp => (
            "Copy a file or (recursive) a directory.",
            json!({"src": p(), "dest": p(), "recursive": b("Copy directories")}),
            &["src", "dest"],
        ),
        M::Mv => (
            "Move or rename.",
            json!({"src": p(), "dest": p()}),
            &["src", "dest"],
        ),
        M::Symlink => (
            "Create a symbolic link.",
            json!({"target": s("What the link points to"), "linkPath": p()}),
            &["target", "linkPath"],
        ),
        M::Readlink => (
            "The target of a symbolic link.",
            json!({"path": p()}),
            &["path"],
        ),
        M::Diff => (
            "Unified diff between two files.",
            json!({"pathA": p(), "pathB": p()}),
            &["pathA", "pathB"],
        ),
        M::DiffContent => (
            "Unified diff between a file and new content.",
            json!({"path": p(), "newContent": s("Proposed content")}),
            &["path", "newContent"],
        ),
        M::RemoveTree => (
            "Remove a directory and everything under it.",
            json!({"path": p()}),
            &["path"],
        ),
        M::CopyTree => (
            "Copy a directory tree.",
            json!({"src": p(), "dest": p()}),
            &["src", "dest"],
        ),
        M::MoveTree => (
            "Move a directory tree.",
            json!({"src": p(), "dest": p()}),
            &["src", "dest"],
        ),
        M::ReadFileBytes => (
            "Read a file's bytes, as base64.",
            json!({"path": p()}),
            &["path"],
        ),
        M::WriteFileBytes => (
            "Create or overwrite a file with bytes given as base64.",
            json!({"path": p(), "base64": s("The bytes, base64-encoded")}),
            &["path", "base64"],
        ),
        M::Realpath => (
            "The path with every symlink resolved.",
            json!({"path": p()}),
            &["path"],
        ),
        M::ResolvePath => (
            "Resolve a path against a base directory (`..` and `.` removed).",
            json!({"base": p(), "path": s("Relative or absolute path")}),
            &["base", "path"],
        ),
        M::ReplaceInFiles => (
            "Replace every occurrence of a string in every file matching a glob.",
            json!({"pattern": s("Glob pattern"), "search": s("Text to find"), "replacement": s("Replacement")}),
            &["pattern", "search", "replacement"],
        ),
        M::WalkTree => (
            "The tree of entries under a path, nested ({path, name, type, size, children}), \
             children sorted by name, down to `options.maxDepth` levels.",
            json!({"path": p(), "options": tree_options()}),
            &["path"],
        ),
        M::HashFile => (
            "The digest of a file as lowercase hex: SHA-256 unless `algorithm` says md5 or sha1.",
            json!({"path": p(), "algorithm": {"enum": ["md5", "sha1", "sha256"]}}),
            &["path"],
        ),
        M::UpdateJson => (
            "Apply set/delete operations (dotted paths such as `a.b[0]`) to a JSON file.",
            json!({"path": p(), "operations": {"type": "array", "items": {"type": "object", "properties": {"op": {"enum": ["set", "delete"]}, "path": s("Dotted path"), "value": {}}, "required": ["op", "path"]}}}),
            &["path", "operations"],
        ),
        M::PlanEdits => (
            "Plan edits without writing: each instruction (`write`, `replace` with search \
             options, `writeJson`) against the file as it is now, with the new content and a diff.",
            json!({"instructions": {"type": "array", "items": edit_instruction()}}),
            &["instructions"],
        ),
        M::ApplyEditPlan => (
            "Write a plan from planEdits; on a failure the files already written are restored \
             unless `options.rollbackOnError` is false.",
            json!({"plan": {"type": "object", "properties": {"edits": {"type": "array", "items": {
                "type": "object", "properties": {"path": p(), "content": s("New content")},
                "required": ["path", "content"]}}}, "required": ["edits"]},
                "options": apply_options()}),
            &["plan"],
        ),
        M::ApplyEdits => (
            "Write several files at once ({path, content} each), with diffs; all or nothing \
             unless `options.rollbackOnError` is false.",
            json!({"edits": {"type": "array", "items": {"type": "object", "properties": {
                "path": p(), "content": s("New content")}, "required": ["path", "content"],
                "additionalProperties": false}}, "options": apply_options()}),
            &["edits"],
        ),
        M::CreateArchive => (
            "Write a tar archive of files and directories (each with everything under it).",
            json!({"path": s("The archive to write"), "sources": {"type": "array", "items": p()}}),
            &["path", "sources"],
        ),
        M::ListArchive => (
            "The entries of a tar archive, sorted by path.",
            json!({"path": p()}),
            &["path"],
        ),
        M::ExtractArchive => (
            "Extract a tar archive under a directory.",
            json!({"path": p(), "destination": s("Directory to extract into")}),
            &["path", "destination"],
        ),
        M::CompressFile => (
            "Gzip a file to `destination` (default: the path plus `.gz`).",
            json!({"path": p(), "destination": s("Where to write")}),
            &["path"],
        ),
        M::DecompressFile => (
            "Gunzip a file to `destination` (default: the path without `.gz`).",
            json!({"path": p(), "destination": s("Where to write")}),
            &["path"],
        ),
        M::DetectFile => (
            "The media type of a file and whether it is text.",
            json!({"path": p()}),
            &["path"],
        ),
    };
    MethodSpec {
        output_schema: state_output(m),
        ..spec(m.name(), description, props, required, m.kind())
    }
}

fn path_prop() -> Value {
    json!({"type": "string", "description": "Absolute workspace path"})
}

/// The result type of a `state.*` method, for `codemode.describe`.
fn state_output(m: StateMethod) -> Option<Value> {
    use StateMethod as M;
    let string = json!({"type": "string"});
    let info = json!({"anyOf": [{"type": "object", "properties": {
        "path": {"type": "string"}, "name": {"type": "string"},
        "type": {"enum": ["file", "directory", "symlink"]}, "mimeType": {"type": "string"},
        "size": {"type": "number"}, "createdAt": {"type": "number"}, "updatedAt": {"type": "number"},
        "target": {"type": "string"}}, "required": ["path", "name", "type", "size"]}, {"type": "null"}]});
    Some(match m {
        M::ReadFile => json!({"anyOf": [string, {"type": "object", "properties": {
            "content": {"type": "string"}, "version": {"type": ["string", "null"]}},
            "required": ["content", "version"]}]}),
        M::ReadFileBytes
        | M::Readlink
        | M::Realpath
        | M::ResolvePath
        | M::Diff
        | M::DiffContent
        | M::HashFile => string,
        M::Exists => json!({"type": "boolean"}),
        M::Stat | M::Lstat => info,
        M::Readdir | M::Glob => json!({"type": "array", "items": {"type": "string"}}),
        M::ReaddirWithFileTypes => {
            json!({"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "type": {"enum": ["file", "directory", "symlink"]},
            "size": {"type": "number"}}, "required": ["name", "type", "size"]}})
        }
        M::Find => json!({"type": "array", "items": {"type": "object", "properties": {
            "path": {"type": "string"}, "name": {"type": "string"},
            "type": {"enum": ["file", "directory", "symlink"]}, "depth": {"type": "number"},
            "size": {"type": "number"}, "mtime": {"type": "number"}},
            "required": ["path", "name", "type", "depth", "size", "mtime"]}}),
        M::SearchText => json!({"type": "array", "items": text_match()}),
        M::SearchFiles => json!({"type": "array", "items": {"type": "object", "properties": {
            "path": {"type": "string"}, "matches": {"type": "array", "items": text_match()}},
            "required": ["path", "matches"]}}),
        M::ReplaceInFile => json!({"type": "object", "properties": {"path": {"type": "string"},
            "replacements": {"type": "number"}}, "required": ["path", "replacements"]}),
        M::SummarizeTree => {
            let n = json!({"type": "number"});
            json!({"type": "object", "properties": {"files": n, "directories": n, "symlinks": n,
                "totalBytes": n, "maxDepth": n},
                "required": ["files", "directories", "symlinks", "totalBytes", "maxDepth"]})
        }
        M::WalkTree => {
            let node = |children: Value| {
                json!({"type": "object", "properties": {"path": {"type": "string"},
                    "name": {"type": "string"}, "type": {"enum": ["file", "directory", "symlink"]},
                    "size": {"type": "number"}, "children": children},
                    "required": ["path", "name", "type", "size"]})
            };
            // One level spelled out; deeper ones are the same shape.
            node(json!({"type": "array", "items": node(json!({"type": "array"}))}))
        }
        M::DetectFile => json!({"type": "object", "properties": {"path": {"type": "string"},
            "mimeType": {"type": "string"}, "text": {"type": "boolean"}, "size": {"type": "number"}},
            "required": ["path", "mimeType", "text", "size"]}),
        M::WriteFile
        | M::AppendFile
        | M::WriteFileBytes
        | M::WriteJson
        | M::Mkdir
        | M::Rm
        | M::Cp
        | M::Mv
        | M::Symlink
        | M::RemoveTree
        | M::CopyTree
        | M::MoveTree => json!({"type": "null"}),
        M::GetCapabilities
        | M::ReadJson
        | M::QueryJson
        | M::ReplaceInFiles
        | M::UpdateJson
        | M::PlanEdits
        | M::ApplyEditPlan
        | M::ApplyEdits
        | M::CreateArchive
        | M::ListArchive
        | M::ExtractArchive
        | M::CompressFile
        | M::DecompressFile => return None,
    })
}

fn text_match() -> Value {
    let lines = json!({"type": "array", "items": {"type": "string"}});
    json!({"type": "object", "properties": {"line": {"type": "number"},
        "column": {"type": "number"}, "match": {"type": "string"}, "lineText": {"type": "string"},
        "beforeLines": lines, "afterLines": lines}, "required": ["line", "column", "match", "lineText"]})
}

/// Think's `StateTreeOptions`.
fn tree_options() -> Value {
    json!({"type": "object", "properties": {
        "maxDepth": {"type": "integer", "minimum": 0, "description": "Levels of children to list (default: all)"},
    }, "additionalProperties": false})
}

/// The `options` of `find`, as in Think's shell (`mtime*` take epoch milliseconds or an ISO
/// date).
fn find_options() -> Value {
    let kind = json!({"enum": ["file", "directory", "symlink"]});
    let time = json!({"type": ["number", "string"], "description": "Epoch ms or ISO date"});
    let count = json!({"type": "integer", "minimum": 0});
    json!({"type": "object", "additionalProperties": false, "properties": {
        "name": {"type": "string", "description": "Glob on the entry's name, e.g. `*.md`"},
        "pathPattern": {"type": "string", "description": "Glob on the path (relative to `path` unless absolute)"},
        "type": {"anyOf": [kind, {"type": "array", "items": kind}]},
        "minDepth": count, "maxDepth": count,
        "empty": {"type": "boolean", "description": "Only empty files and directories"},
        "sizeMin": count, "sizeMax": count,
        "mtimeAfter": time, "mtimeBefore": time}})
}

/// One `planEdits` instruction, as in Think's shell.
fn edit_instruction() -> Value {
    let p = path_prop();
    json!({"anyOf": [
        {"type": "object", "properties": {"kind": {"const": "write"}, "path": p,
            "content": {"type": "string"}}, "required": ["kind", "path", "content"],
            "additionalProperties": false},
        {"type": "object", "properties": {"kind": {"const": "replace"}, "path": p,
            "search": {"type": "string"}, "replacement": {"type": "string"},
            "options": search_options()}, "required": ["kind", "path", "search", "replacement"],
            "additionalProperties": false},
        {"type": "object", "properties": {"kind": {"const": "writeJson"}, "path": p, "value": {},
            "options": {"type": "object", "properties": {"spaces": {"type": "integer", "minimum": 0}},
                "additionalProperties": false}}, "required": ["kind", "path", "value"],
            "additionalProperties": false}]})
}

fn apply_options() -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": {
        "dryRun": {"type": "boolean", "description": "Report without writing"},
        "rollbackOnError": {"type": "boolean", "description": "Restore written files on a failure (default true)"}}})
}

/// The `options` of `searchText` / `searchFiles` / `replaceInFile(s)`, as in Think's shell.
fn search_options() -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": {
        "caseSensitive": {"type": "boolean", "description": "false: ignore case (default true)"},
        "regex": {"type": "boolean", "description": "The query is a regular expression"},
        "wholeWord": {"type": "boolean", "description": "Match whole words only"},
        "contextBefore": {"type": "integer", "minimum": 0, "description": "Lines of context before"},
        "contextAfter": {"type": "integer", "minimum": 0, "description": "Lines of context after"},
        "maxMatches": {"type": "integer", "minimum": 1, "description": "Stop after this many (per file)"}}})
}
