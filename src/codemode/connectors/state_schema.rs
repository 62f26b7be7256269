//! What the model is told about each `state.*` method: its description and the JSON Schemas
//! of its argument and result.

use serde_json::{json, Value};

pub(super) fn path_prop() -> Value {
    json!({"type": "string", "description": "Absolute workspace path"})
}

/// The result type of a `state.*` method, for `codemode.describe`.
pub(super) fn state_output(method: &str) -> Option<Value> {
    let string = json!({"type": "string"});
    let info = json!({"anyOf": [{"type": "object", "properties": {
        "path": {"type": "string"}, "name": {"type": "string"},
        "type": {"enum": ["file", "directory", "symlink"]}, "mimeType": {"type": "string"},
        "size": {"type": "number"}, "createdAt": {"type": "number"}, "updatedAt": {"type": "number"},
        "target": {"type": "string"}}, "required": ["path", "name", "type", "size"]}, {"type": "null"}]});
    Some(match method {
        "readFile" => json!({"anyOf": [string, {"type": "object", "properties": {
            "content": {"type": "string"}, "version": {"type": ["string", "null"]}},
            "required": ["content", "version"]}]}),
        "readFileBytes" | "readlink" | "realpath" | "resolvePath" | "diff" | "diffContent"
        | "hashFile" => string,
        "exists" => json!({"type": "boolean"}),
        "stat" | "lstat" => info,
        "readdir" | "glob" => json!({"type": "array", "items": {"type": "string"}}),
        "readdirWithFileTypes" => {
            json!({"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "type": {"enum": ["file", "directory", "symlink"]},
            "size": {"type": "number"}}, "required": ["name", "type", "size"]}})
        }
        "find" => json!({"type": "array", "items": {"type": "object", "properties": {
            "path": {"type": "string"}, "name": {"type": "string"},
            "type": {"enum": ["file", "directory", "symlink"]}, "depth": {"type": "number"},
            "size": {"type": "number"}, "mtime": {"type": "number"}},
            "required": ["path", "name", "type", "depth", "size", "mtime"]}}),
        "searchText" => json!({"type": "array", "items": text_match()}),
        "searchFiles" => json!({"type": "array", "items": {"type": "object", "properties": {
            "path": {"type": "string"}, "matches": {"type": "array", "items": text_match()}},
            "required": ["path", "matches"]}}),
        "replaceInFile" => json!({"type": "object", "properties": {"path": {"type": "string"},
            "replacements": {"type": "number"}}, "required": ["path", "replacements"]}),
        "summarizeTree" => {
            let n = json!({"type": "number"});
            json!({"type": "object", "properties": {"files": n, "directories": n, "symlinks": n,
                "totalBytes": n, "maxDepth": n},
                "required": ["files", "directories", "symlinks", "totalBytes", "maxDepth"]})
        }
        "walkTree" => {
            let node = |children: Value| {
                json!({"type": "object", "properties": {"path": {"type": "string"},
                    "name": {"type": "string"}, "type": {"enum": ["file", "directory", "symlink"]},
                    "size": {"type": "number"}, "children": children},
                    "required": ["path", "name", "type", "size"]})
            };
            // One level spelled out; deeper ones are the same shape.
            node(json!({"type": "array", "items": node(json!({"type": "array"}))}))
        }
        "detectFile" => json!({"type": "object", "properties": {"path": {"type": "string"},
            "mimeType": {"type": "string"}, "text": {"type": "boolean"}, "size": {"type": "number"}},
            "required": ["path", "mimeType", "text", "size"]}),
        "writeFile" | "appendFile" | "writeFileBytes" | "writeJson" | "mkdir" | "rm" | "cp"
        | "mv" | "symlink" | "removeTree" | "copyTree" | "moveTree" => json!({"type": "null"}),
        _ => return None,
    })
}

fn text_match() -> Value {
    let lines = json!({"type": "array", "items": {"type": "string"}});
    json!({"type": "object", "properties": {"line": {"type": "number"},
        "column": {"type": "number"}, "match": {"type": "string"}, "lineText": {"type": "string"},
        "beforeLines": lines, "afterLines": lines}, "required": ["line", "column", "match", "lineText"]})
}

/// Think's `StateTreeOptions`.
pub(super) fn tree_options() -> Value {
    json!({"type": "object", "properties": {
        "maxDepth": {"type": "integer", "minimum": 0, "description": "Levels of children to list (default: all)"},
    }, "additionalProperties": false})
}

/// The `options` of `find`, as in Think's shell (`mtime*` take epoch milliseconds or an ISO
/// date).
pub(super) fn find_options() -> Value {
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
pub(super) fn edit_instruction() -> Value {
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

pub(super) fn apply_options() -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": {
        "dryRun": {"type": "boolean", "description": "Report without writing"},
        "rollbackOnError": {"type": "boolean", "description": "Restore written files on a failure (default true)"}}})
}

/// The `options` of `searchText` / `searchFiles` / `replaceInFile(s)`, as in Think's shell.
pub(super) fn search_options() -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": {
        "caseSensitive": {"type": "boolean", "description": "false: ignore case (default true)"},
        "regex": {"type": "boolean", "description": "The query is a regular expression"},
        "wholeWord": {"type": "boolean", "description": "Match whole words only"},
        "contextBefore": {"type": "integer", "minimum": 0, "description": "Lines of context before"},
        "contextAfter": {"type": "integer", "minimum": 0, "description": "Lines of context after"},
        "maxMatches": {"type": "integer", "minimum": 1, "description": "Stop after this many (per file)"}}})
}
