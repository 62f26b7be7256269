//! What the model is told about each `state.*` method: its description and the JSON Schemas
//! of its argument and result.
//!
//! The schemas are JSON text, parsed once per instance: built with `json!` they were 58 KB of
//! code (7 KB of the gzipped wasm), as text they are data that gzip packs into a third of that.
//! A string `"@name"` in them stands for the fragment `name` of [`SHARED`].

use serde_json::{json, Map, Value};

use super::state::StateMethod;
use super::MethodSpec;

/// Every `state.*` method as the model is told about it, in [`StateMethod::ALL`] order.
pub(super) fn method_specs() -> Vec<MethodSpec> {
    let shared: Map<String, Value> = serde_json::from_str(SHARED).expect("SHARED is a JSON object");
    let spec = |m: StateMethod| {
        let (description, text) = method_text(m);
        let doc: Value = serde_json::from_str(text).expect("a state.* schema is JSON");
        let Value::Object(mut doc) = resolve(doc, &shared) else {
            unreachable!("a state.* schema is a JSON object")
        };
        MethodSpec {
            name: m.name().to_owned(),
            description: description.to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": doc.remove("properties"),
                "required": doc.remove("required"),
                "additionalProperties": false,
            }),
            output_schema: doc.remove("output"),
            kind: m.kind(),
        }
    };
    StateMethod::ALL.iter().map(|&m| spec(m)).collect()
}

/// `v` with each `"@name"` replaced by the fragment `name` of `shared` (itself resolved).
fn resolve(v: Value, shared: &Map<String, Value>) -> Value {
    match v {
        Value::String(s) if s.starts_with('@') => match shared.get(&s[1..]) {
            Some(fragment) => resolve(fragment.clone(), shared),
            None => unreachable!("no shared state.* schema fragment {s}"),
        },
        Value::Array(items) => items.into_iter().map(|x| resolve(x, shared)).collect(),
        Value::Object(members) => {
            Value::Object(members.into_iter().map(|(k, x)| (k, resolve(x, shared))).collect())
        }
        v => v,
    }
}

/// The description of `m`, and the JSON text of its argument's `properties` and `required`
/// and, when known, its result's schema (`output`).
fn method_text(m: StateMethod) -> (&'static str, &'static str) {
    use StateMethod as M;
    match m {
        M::GetCapabilities => {
            ("What this workspace supports.", r#"{"properties": {}, "required": []}"#)
        }
        M::ReadFile => (
            "Read a text file; with withVersion, {content, version} (the version writeFile's \
             expectedVersion takes).",
            r#"{
                "properties": {
                    "path": "@path",
                    "withVersion": {
                        "type": "boolean",
                        "description": "Return {content, version} instead of the text"
                    }
                },
                "required": ["path"],
                "output": {
                    "anyOf": [
                        {"type": "string"},
                        {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string"},
                                "version": {"type": ["string", "null"]}
                            },
                            "required": ["content", "version"]
                        }
                    ]
                }
            }"#,
        ),
        M::WriteFile => (
            "Create or overwrite a text file (parents are created); with expectedVersion, refused \
             if the file changed since that version.",
            r#"{
                "properties": {
                    "path": "@path", "content": {"type": "string", "description": "The new text"},
                    "expectedVersion": {
                        "type": "string", "description": "The version readFile reported"
                    }
                },
                "required": ["path", "content"], "output": {"type": "null"}
            }"#,
        ),
        M::AppendFile => (
            "Append text to a file (created if missing).",
            r#"{
                "properties": {
                    "path": "@path", "content": {"type": "string", "description": "Text to append"}
                },
                "required": ["path", "content"], "output": {"type": "null"}
            }"#,
        ),
        M::ReadJson => (
            "Read and parse a JSON file.",
            r#"{"properties": {"path": "@path"}, "required": ["path"]}"#,
        ),
        M::WriteJson => (
            "Write a value as JSON.",
            r#"{
                "properties": {
                    "path": "@path", "value": {"description": "Any JSON value"},
                    "options": {
                        "type": "object",
                        "properties": {
                            "spaces": {
                                "type": "integer", "minimum": 0,
                                "description": "Indentation (default 2)"
                            }
                        },
                        "additionalProperties": false
                    }
                },
                "required": ["path", "value"], "output": {"type": "null"}
            }"#,
        ),
        M::QueryJson => (
            "Read one value from a JSON file by a dotted path such as `a.b[0].c`.",
            r#"{
                "properties": {
                    "path": "@path", "query": {"type": "string", "description": "Dotted path"}
                },
                "required": ["path", "query"]
            }"#,
        ),
        M::Exists => (
            "Whether anything is at a path.",
            r#"{
                "properties": {"path": "@path"}, "required": ["path"], "output": {"type": "boolean"}
            }"#,
        ),
        M::Stat => (
            "Metadata of a path (following symlinks), or null.",
            r#"{"properties": {"path": "@path"}, "required": ["path"], "output": "@info"}"#,
        ),
        M::Lstat => (
            "Metadata of a path itself (not following symlinks), or null.",
            r#"{"properties": {"path": "@path"}, "required": ["path"], "output": "@info"}"#,
        ),
        M::Mkdir => (
            "Create a directory.",
            r#"{
                "properties": {
                    "path": "@path",
                    "recursive": {"type": "boolean", "description": "Create missing parents"}
                },
                "required": ["path"], "output": {"type": "null"}
            }"#,
        ),
        M::Readdir => (
            "Names in a directory.",
            r#"{
                "properties": {"path": "@path"}, "required": ["path"],
                "output": {"type": "array", "items": {"type": "string"}}
            }"#,
        ),
        M::ReaddirWithFileTypes => (
            "Entries of a directory with their types.",
            r#"{
                "properties": {"path": "@path"}, "required": ["path"],
                "output": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "type": {"enum": ["file", "directory", "symlink"]},
                            "size": {"type": "number"}
                        },
                        "required": ["name", "type", "size"]
                    }
                }
            }"#,
        ),
        M::Glob => (
            "Paths matching a glob pattern such as `/src/**/*.ts`.",
            r#"{
                "properties": {"pattern": {"type": "string", "description": "Glob pattern"}},
                "required": ["pattern"], "output": {"type": "array", "items": {"type": "string"}}
            }"#,
        ),
        M::Find => (
            "Files and directories under a path, filtered by a glob on their path and by Think's \
             find options (name, type, depth, emptiness, size, modification time).",
            r#"{
                "properties": {
                    "path": "@path", "pattern": {"type": "string", "description": "Glob pattern"},
                    "options": "@findOptions"
                },
                "required": ["path"],
                "output": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string"}, "name": {"type": "string"},
                            "type": {"enum": ["file", "directory", "symlink"]},
                            "depth": {"type": "number"}, "size": {"type": "number"},
                            "mtime": {"type": "number"}
                        },
                        "required": ["path", "name", "type", "depth", "size", "mtime"]
                    }
                }
            }"#,
        ),
        M::SummarizeTree => (
            "Counts of the files, directories (the root included) and symlinks under a path, \
             their total bytes and the deepest level, down to `options.maxDepth`.",
            r#"{
                "properties": {"path": "@path", "options": "@treeOptions"}, "required": ["path"],
                "output": {
                    "type": "object",
                    "properties": {
                        "files": {"type": "number"}, "directories": {"type": "number"},
                        "symlinks": {"type": "number"}, "totalBytes": {"type": "number"},
                        "maxDepth": {"type": "number"}
                    },
                    "required": ["files", "directories", "symlinks", "totalBytes", "maxDepth"]
                }
            }"#,
        ),
        M::SearchText => (
            "Matches of a string (or, with `options.regex`, a regular expression) in one file.",
            r#"{
                "properties": {
                    "path": "@path", "query": {"type": "string", "description": "Text to find"},
                    "options": "@searchOptions"
                },
                "required": ["path", "query"], "output": {"type": "array", "items": "@textMatch"}
            }"#,
        ),
        M::SearchFiles => (
            "Matches of a string (or regular expression) in every file matching a glob.",
            r#"{
                "properties": {
                    "pattern": {"type": "string", "description": "Glob pattern"},
                    "query": {"type": "string", "description": "Text to find"},
                    "options": "@searchOptions"
                },
                "required": ["pattern", "query"],
                "output": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string"},
                            "matches": {"type": "array", "items": "@textMatch"}
                        },
                        "required": ["path", "matches"]
                    }
                }
            }"#,
        ),
        M::ReplaceInFile => (
            "Replace every occurrence of a string in a file.",
            r#"{
                "properties": {
                    "path": "@path", "search": {"type": "string", "description": "Text to find"},
                    "replacement": {"type": "string", "description": "Replacement"}
                },
                "required": ["path", "search", "replacement"],
                "output": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "replacements": {"type": "number"}},
                    "required": ["path", "replacements"]
                }
            }"#,
        ),
        M::Rm => (
            "Remove a file or directory.",
            r#"{
                "properties": {
                    "path": "@path",
                    "recursive": {
                        "type": "boolean", "description": "Remove directories and their contents"
                    },
                    "force": {"type": "boolean", "description": "Ignore a missing path"}
                },
                "required": ["path"], "output": {"type": "null"}
            }"#,
        ),
        M::Cp => (
            "Copy a file or (recursive) a directory.",
            r#"{
                "properties": {
                    "src": "@path", "dest": "@path",
                    "recursive": {"type": "boolean", "description": "Copy directories"}
                },
                "required": ["src", "dest"], "output": {"type": "null"}
            }"#,
        ),
        M::Mv => (
            "Move or rename.",
            r#"{
                "properties": {"src": "@path", "dest": "@path"}, "required": ["src", "dest"],
                "output": {"type": "null"}
            }"#,
        ),
        M::Symlink => (
            "Create a symbolic link.",
            r#"{
                "properties": {
                    "target": {"type": "string", "description": "What the link points to"},
                    "linkPath": "@path"
                },
                "required": ["target", "linkPath"], "output": {"type": "null"}
            }"#,
        ),
        M::Readlink => (
            "The target of a symbolic link.",
            r#"{
                "properties": {"path": "@path"}, "required": ["path"], "output": {"type": "string"}
            }"#,
        ),
        M::Diff => (
            "Unified diff between two files.",
            r#"{
                "properties": {"pathA": "@path", "pathB": "@path"}, "required": ["pathA", "pathB"],
                "output": {"type": "string"}
            }"#,
        ),
        M::DiffContent => (
            "Unified diff between a file and new content.",
            r#"{
                "properties": {
                    "path": "@path",
                    "newContent": {"type": "string", "description": "Proposed content"}
                },
                "required": ["path", "newContent"], "output": {"type": "string"}
            }"#,
        ),
        M::RemoveTree => (
            "Remove a directory and everything under it.",
            r#"{"properties": {"path": "@path"}, "required": ["path"], "output": {"type": "null"}}"#,
        ),
        M::CopyTree => (
            "Copy a directory tree.",
            r#"{
                "properties": {"src": "@path", "dest": "@path"}, "required": ["src", "dest"],
                "output": {"type": "null"}
            }"#,
        ),
        M::MoveTree => (
            "Move a directory tree.",
            r#"{
                "properties": {"src": "@path", "dest": "@path"}, "required": ["src", "dest"],
                "output": {"type": "null"}
            }"#,
        ),
        M::ReadFileBytes => (
            "Read a file's bytes, as base64.",
            r#"{
                "properties": {"path": "@path"}, "required": ["path"], "output": {"type": "string"}
            }"#,
        ),
        M::WriteFileBytes => (
            "Create or overwrite a file with bytes given as base64.",
            r#"{
                "properties": {
                    "path": "@path",
                    "base64": {"type": "string", "description": "The bytes, base64-encoded"}
                },
                "required": ["path", "base64"], "output": {"type": "null"}
            }"#,
        ),
        M::Realpath => (
            "The path with every symlink resolved.",
            r#"{
                "properties": {"path": "@path"}, "required": ["path"], "output": {"type": "string"}
            }"#,
        ),
        M::ResolvePath => (
            "Resolve a path against a base directory (`..` and `.` removed).",
            r#"{
                "properties": {
                    "base": "@path",
                    "path": {"type": "string", "description": "Relative or absolute path"}
                },
                "required": ["base", "path"], "output": {"type": "string"}
            }"#,
        ),
        M::ReplaceInFiles => (
            "Replace every occurrence of a string in every file matching a glob.",
            r#"{
                "properties": {
                    "pattern": {"type": "string", "description": "Glob pattern"},
                    "search": {"type": "string", "description": "Text to find"},
                    "replacement": {"type": "string", "description": "Replacement"}
                },
                "required": ["pattern", "search", "replacement"]
            }"#,
        ),
        M::WalkTree => (
            "The tree of entries under a path, nested ({path, name, type, size, children}), \
             children sorted by name, down to `options.maxDepth` levels.",
            r#"{
                "properties": {"path": "@path", "options": "@treeOptions"}, "required": ["path"],
                "output": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"}, "name": {"type": "string"},
                        "type": {"enum": ["file", "directory", "symlink"]},
                        "size": {"type": "number"},
                        "children": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "path": {"type": "string"}, "name": {"type": "string"},
                                    "type": {"enum": ["file", "directory", "symlink"]},
                                    "size": {"type": "number"}, "children": {"type": "array"}
                                },
                                "required": ["path", "name", "type", "size"]
                            }
                        }
                    },
                    "required": ["path", "name", "type", "size"]
                }
            }"#,
        ),
        M::HashFile => (
            "The digest of a file as lowercase hex: SHA-256 unless `algorithm` says md5 or sha1.",
            r#"{
                "properties": {"path": "@path", "algorithm": {"enum": ["md5", "sha1", "sha256"]}},
                "required": ["path"], "output": {"type": "string"}
            }"#,
        ),
        M::UpdateJson => (
            "Apply set/delete operations (dotted paths such as `a.b[0]`) to a JSON file.",
            r#"{
                "properties": {
                    "path": "@path",
                    "operations": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "op": {"enum": ["set", "delete"]},
                                "path": {"type": "string", "description": "Dotted path"},
                                "value": {}
                            },
                            "required": ["op", "path"]
                        }
                    }
                },
                "required": ["path", "operations"]
            }"#,
        ),
        M::PlanEdits => (
            "Plan edits without writing: each instruction (`write`, `replace` with search \
             options, `writeJson`) against the file as it is now, with the new content and a \
             diff.",
            r#"{
                "properties": {"instructions": {"type": "array", "items": "@editInstruction"}},
                "required": ["instructions"]
            }"#,
        ),
        M::ApplyEditPlan => (
            "Write a plan from planEdits; on a failure the files already written are restored \
             unless `options.rollbackOnError` is false.",
            r#"{
                "properties": {
                    "plan": {
                        "type": "object",
                        "properties": {
                            "edits": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "path": "@path",
                                        "content": {
                                            "type": "string", "description": "New content"
                                        }
                                    },
                                    "required": ["path", "content"]
                                }
                            }
                        },
                        "required": ["edits"]
                    },
                    "options": "@applyOptions"
                },
                "required": ["plan"]
            }"#,
        ),
        M::ApplyEdits => (
            "Write several files at once ({path, content} each), with diffs; all or nothing \
             unless `options.rollbackOnError` is false.",
            r#"{
                "properties": {
                    "edits": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "path": "@path",
                                "content": {"type": "string", "description": "New content"}
                            },
                            "required": ["path", "content"], "additionalProperties": false
                        }
                    },
                    "options": "@applyOptions"
                },
                "required": ["edits"]
            }"#,
        ),
        M::CreateArchive => (
            "Write a tar archive of files and directories (each with everything under it).",
            r#"{
                "properties": {
                    "path": {"type": "string", "description": "The archive to write"},
                    "sources": {"type": "array", "items": "@path"}
                },
                "required": ["path", "sources"]
            }"#,
        ),
        M::ListArchive => (
            "The entries of a tar archive, sorted by path.",
            r#"{"properties": {"path": "@path"}, "required": ["path"]}"#,
        ),
        M::ExtractArchive => (
            "Extract a tar archive under a directory.",
            r#"{
                "properties": {
                    "path": "@path",
                    "destination": {"type": "string", "description": "Directory to extract into"}
                },
                "required": ["path", "destination"]
            }"#,
        ),
        M::CompressFile => (
            "Gzip a file to `destination` (default: the path plus `.gz`).",
            r#"{
                "properties": {
                    "path": "@path",
                    "destination": {"type": "string", "description": "Where to write"}
                },
                "required": ["path"]
            }"#,
        ),
        M::DecompressFile => (
            "Gunzip a file to `destination` (default: the path without `.gz`).",
            r#"{
                "properties": {
                    "path": "@path",
                    "destination": {"type": "string", "description": "Where to write"}
                },
                "required": ["path"]
            }"#,
        ),
        M::DetectFile => (
            "The media type of a file and whether it is text.",
            r#"{
                "properties": {"path": "@path"}, "required": ["path"],
                "output": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"}, "mimeType": {"type": "string"},
                        "text": {"type": "boolean"}, "size": {"type": "number"}
                    },
                    "required": ["path", "mimeType", "text", "size"]
                }
            }"#,
        ),
    }
}

/// Schema fragments several methods share: Think's option objects, the path argument, the
/// items of some results.
const SHARED: &str = r#"{
    "path": {"type": "string", "description": "Absolute workspace path"},
    "info": {
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    "path": {"type": "string"}, "name": {"type": "string"},
                    "type": {"enum": ["file", "directory", "symlink"]},
                    "mimeType": {"type": "string"}, "size": {"type": "number"},
                    "createdAt": {"type": "number"}, "updatedAt": {"type": "number"},
                    "target": {"type": "string"}
                },
                "required": ["path", "name", "type", "size"]
            },
            {"type": "null"}
        ]
    },
    "textMatch": {
        "type": "object",
        "properties": {
            "line": {"type": "number"}, "column": {"type": "number"}, "match": {"type": "string"},
            "lineText": {"type": "string"},
            "beforeLines": {"type": "array", "items": {"type": "string"}},
            "afterLines": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["line", "column", "match", "lineText"]
    },
    "treeOptions": {
        "type": "object",
        "properties": {
            "maxDepth": {
                "type": "integer", "minimum": 0,
                "description": "Levels of children to list (default: all)"
            }
        },
        "additionalProperties": false
    },
    "findOptions": {
        "type": "object", "additionalProperties": false,
        "properties": {
            "name": {"type": "string", "description": "Glob on the entry's name, e.g. `*.md`"},
            "pathPattern": {
                "type": "string",
                "description": "Glob on the path (relative to `path` unless absolute)"
            },
            "type": {
                "anyOf": [
                    {"enum": ["file", "directory", "symlink"]},
                    {"type": "array", "items": {"enum": ["file", "directory", "symlink"]}}
                ]
            },
            "minDepth": {"type": "integer", "minimum": 0},
            "maxDepth": {"type": "integer", "minimum": 0},
            "empty": {"type": "boolean", "description": "Only empty files and directories"},
            "sizeMin": {"type": "integer", "minimum": 0},
            "sizeMax": {"type": "integer", "minimum": 0},
            "mtimeAfter": {"type": ["number", "string"], "description": "Epoch ms or ISO date"},
            "mtimeBefore": {"type": ["number", "string"], "description": "Epoch ms or ISO date"}
        }
    },
    "searchOptions": {
        "type": "object", "additionalProperties": false,
        "properties": {
            "caseSensitive": {
                "type": "boolean", "description": "false: ignore case (default true)"
            },
            "regex": {"type": "boolean", "description": "The query is a regular expression"},
            "wholeWord": {"type": "boolean", "description": "Match whole words only"},
            "contextBefore": {
                "type": "integer", "minimum": 0, "description": "Lines of context before"
            },
            "contextAfter": {
                "type": "integer", "minimum": 0, "description": "Lines of context after"
            },
            "maxMatches": {
                "type": "integer", "minimum": 1, "description": "Stop after this many (per file)"
            }
        }
    },
    "editInstruction": {
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    "kind": {"const": "write"}, "path": "@path", "content": {"type": "string"}
                },
                "required": ["kind", "path", "content"], "additionalProperties": false
            },
            {
                "type": "object",
                "properties": {
                    "kind": {"const": "replace"}, "path": "@path", "search": {"type": "string"},
                    "replacement": {"type": "string"}, "options": "@searchOptions"
                },
                "required": ["kind", "path", "search", "replacement"], "additionalProperties": false
            },
            {
                "type": "object",
                "properties": {
                    "kind": {"const": "writeJson"}, "path": "@path", "value": {},
                    "options": {
                        "type": "object",
                        "properties": {"spaces": {"type": "integer", "minimum": 0}},
                        "additionalProperties": false
                    }
                },
                "required": ["kind", "path", "value"], "additionalProperties": false
            }
        ]
    },
    "applyOptions": {
        "type": "object", "additionalProperties": false,
        "properties": {
            "dryRun": {"type": "boolean", "description": "Report without writing"},
            "rollbackOnError": {
                "type": "boolean",
                "description": "Restore written files on a failure (default true)"
            }
        }
    }
}"#;

#[cfg(test)]
mod tests {
    /// Every method's text parses, names only shared fragments that exist, and requires only
    /// properties it declares.
    #[test]
    fn every_method_has_its_schemas() {
        let specs = super::method_specs();
        assert_eq!(specs.len(), super::StateMethod::ALL.len());
        for spec in specs {
            let props = spec.input_schema["properties"].as_object().expect("properties");
            for name in spec.input_schema["required"].as_array().expect("required") {
                let name = name.as_str().expect("a required name is a string");
                assert!(
                    props.contains_key(name),
                    "{}: {name} is required but not declared",
                    spec.name
                );
            }
            let text = format!("{} {:?}", spec.input_schema, spec.output_schema);
            assert!(!text.contains("\"@"), "{}: a fragment is left unresolved", spec.name);
        }
    }
}
