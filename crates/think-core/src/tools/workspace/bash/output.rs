//! The tool's JSON output, with Think's output truncation.

use super::engine::EngineResponse;
use super::paths::js_sort;
use super::writeback::ChangedFiles;
use crate::tools::workspace::media::push_size;
use serde::Serialize;

/// Exit code of a script stopped by the timeout (as GNU `timeout` reports it).
pub const TIMEOUT_EXIT_CODE: i32 = 124;

/// What the `bash` tool returns. `skippedFiles` and `errors` appear only when non-empty.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BashOutput {
    /// The script's stdout, cut at `maxOutputBytes`.
    pub stdout: String,
    /// The script's stderr, cut at `maxOutputBytes`.
    pub stderr: String,
    /// The script's exit code.
    pub exit_code: i32,
    /// What was written back to the workspace.
    pub changed_files: ChangedFiles,
    /// Files that were not mounted (too many or too large), which the script could not see.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped_files: Vec<String>,
    /// Write-backs that failed or were refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// Think's `truncateToolOutput`: keep the first `max_bytes` UTF-8 bytes (a character cut in
/// half becomes U+FFFD, as `TextDecoder` does) and append `\n... (<size> truncated)`.
pub fn truncate_output(text: &str, max_bytes: usize) -> String {
    let bytes = text.as_bytes();
    if bytes.len() <= max_bytes {
        return text.to_owned();
    }
    let mut out = String::from_utf8_lossy(&bytes[..max_bytes]).into_owned();
    out.push_str("\n... (");
    push_size(&mut out, (bytes.len() - max_bytes) as u64);
    out.push_str(" truncated)");
    out
}

/// Builds the output from the engine's result and the write-back's outcome. An engine whose
/// `exec` threw reports the message as stderr with exit code 124 after a timeout, else 1.
pub fn assemble_output(
    response: &EngineResponse,
    changed_files: ChangedFiles,
    mut skipped_files: Vec<String>,
    errors: Vec<String>,
    max_output_bytes: usize,
) -> BashOutput {
    let (stdout, stderr, exit_code) = match &response.error {
        Some(message) => {
            let code = if response.aborted { TIMEOUT_EXIT_CODE } else { 1 };
            ("", message.as_str(), code)
        }
        None => (response.stdout.as_str(), response.stderr.as_str(), response.exit_code),
    };
    js_sort(&mut skipped_files);
    BashOutput {
        stdout: truncate_output(stdout, max_output_bytes),
        stderr: truncate_output(stderr, max_output_bytes),
        exit_code,
        changed_files,
        skipped_files,
        errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn truncation_keeps_short_text() {
        assert_eq!(truncate_output("hello", 5), "hello");
        assert_eq!(truncate_output("", 0), "");
    }

    #[test]
    fn truncation_appends_marker_with_size() {
        assert_eq!(truncate_output("hello world", 5), "hello\n... (6 B truncated)");
        let long = "x".repeat(64_000 + 2048);
        let out = truncate_output(&long, 64_000);
        assert_eq!(out, format!("{}\n... (2.0 KB truncated)", "x".repeat(64_000)));
    }

    #[test]
    fn truncation_inside_a_character_yields_replacement() {
        // "é" is C3 A9: cutting after C3 leaves one U+FFFD, as TextDecoder would.
        assert_eq!(truncate_output("aé", 2), "a\u{FFFD}\n... (1 B truncated)");
        // A 4-byte emoji cut after 3 bytes: still one replacement character.
        assert_eq!(truncate_output("😀!", 3), "\u{FFFD}\n... (2 B truncated)");
    }

    fn response(stdout: &str, exit_code: i32) -> EngineResponse {
        EngineResponse {
            stdout: stdout.into(),
            stderr: "warn\n".into(),
            exit_code,
            ..Default::default()
        }
    }

    #[test]
    fn output_json_shape_omits_empty_optional_lists() {
        let out =
            assemble_output(&response("hi\n", 0), ChangedFiles::default(), vec![], vec![], 64_000);
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            json!({
                "stdout": "hi\n", "stderr": "warn\n", "exitCode": 0,
                "changedFiles": {"created": [], "updated": [], "deleted": [],
                                 "directoriesCreated": [], "directoriesDeleted": []}
            })
        );
        let keys: Vec<String> =
            serde_json::to_value(&out).unwrap().as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["stdout", "stderr", "exitCode", "changedFiles"]);
    }

    #[test]
    fn output_lists_skipped_sorted_and_errors() {
        let out = assemble_output(
            &response("", 3),
            ChangedFiles::default(),
            vec!["/z.bin".into(), "/a.bin".into()],
            vec!["Skipped writing protected workspace file: /a.bin".into()],
            64_000,
        );
        let v = serde_json::to_value(&out).unwrap();
        assert_eq!(v["exitCode"], 3);
        assert_eq!(v["skippedFiles"], json!(["/a.bin", "/z.bin"]));
        assert_eq!(v["errors"], json!(["Skipped writing protected workspace file: /a.bin"]));
    }

    #[test]
    fn engine_exception_becomes_stderr_with_exit_1_or_124() {
        let mut r = response("lost", 0);
        r.error = Some("boom".into());
        let out = assemble_output(&r, ChangedFiles::default(), vec![], vec![], 64_000);
        assert_eq!((out.stdout.as_str(), out.stderr.as_str(), out.exit_code), ("", "boom", 1));
        r.aborted = true;
        let out = assemble_output(&r, ChangedFiles::default(), vec![], vec![], 64_000);
        assert_eq!(out.exit_code, TIMEOUT_EXIT_CODE);
    }

    #[test]
    fn timed_out_run_keeps_the_engine_exit_code() {
        // just-bash itself reports 124 and "bash: execution aborted" when the signal fires.
        let mut r = response("", 124);
        r.stderr = "bash: execution aborted\n".into();
        r.aborted = true;
        let out = assemble_output(&r, ChangedFiles::default(), vec![], vec![], 64_000);
        assert_eq!((out.exit_code, out.stderr.as_str()), (124, "bash: execution aborted\n"));
    }

    #[test]
    fn both_streams_are_truncated() {
        let mut r = response(&"o".repeat(10), 0);
        r.stderr = "e".repeat(12);
        let out = assemble_output(&r, ChangedFiles::default(), vec![], vec![], 8);
        assert_eq!(out.stdout, "oooooooo\n... (2 B truncated)");
        assert_eq!(out.stderr, "eeeeeeee\n... (4 B truncated)");
    }
}
