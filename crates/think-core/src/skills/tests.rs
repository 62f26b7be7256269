use super::frontmatter::{parse_skill_md, valid_name, FrontmatterError};
use super::resources::{check_path, split_qualified, PathError, ResourceKind};
use super::script::{check_script_path, ScriptError};
use super::*;
use crate::store::sqlite::MemoryBlobs;
use crate::tools::workspace::bash::{EngineRequest, EngineResponse, FinalEntry};
use crate::workspace::tests::{block_on, ws};
use serde_json::{json, Value};

fn md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nBody of {name}.\n")
}

#[test]
fn frontmatter_reads_every_field() {
    let raw = "---\nname: pdf\ndescription: >\n  Fill PDF forms\n  and merge files.\nlicense: Apache-2.0\ncompatibility: needs bash\nallowed-tools: Read Bash(git:*), write\nmetadata:\n  version: 1.0\n  author: \"me\"\n---\nUse it.\n";
    let p = parse_skill_md(raw, "pdf").unwrap();
    assert_eq!(p.meta.name, "pdf");
    assert_eq!(p.meta.description, "Fill PDF forms and merge files.");
    assert_eq!(p.meta.license.as_deref(), Some("Apache-2.0"));
    assert_eq!(p.meta.compatibility.as_deref(), Some("needs bash"));
    assert_eq!(p.meta.allowed_tools, Some(vec!["Read".into(), "Bash".into(), "write".into()]));
    assert_eq!(p.meta.metadata.get("version").map(String::as_str), Some("1.0"));
    assert_eq!(p.meta.metadata.get("author").map(String::as_str), Some("me"));
    assert_eq!(p.body, "Use it.\n");
    let list =
        parse_skill_md("---\nname: a\ndescription: d\nallowed-tools: [read, grep]\n---\n", "a");
    assert_eq!(list.unwrap().meta.allowed_tools, Some(vec!["read".into(), "grep".into()]));
    let crlf = parse_skill_md("---\r\nname: a\r\ndescription: d\r\n---\r\nbody", "a").unwrap();
    assert_eq!(crlf.body, "body");
}

#[test]
fn frontmatter_enforces_the_format() {
    let err = |raw: &str, folder: &str| parse_skill_md(raw, folder).unwrap_err();
    assert_eq!(err("# no frontmatter", "a"), FrontmatterError::Missing);
    assert_eq!(err("---\nname: a\n", "a"), FrontmatterError::Missing);
    assert!(matches!(err("---\nname: [a\n---\n", "a"), FrontmatterError::Yaml(_)));
    assert_eq!(err("---\n- a\n---\n", "a"), FrontmatterError::NotAMapping);
    assert_eq!(err("---\ndescription: d\n---\n", "a"), FrontmatterError::Required("name"));
    assert_eq!(err("---\nname: a\n---\n", "a"), FrontmatterError::Required("description"));
    assert_eq!(
        err("---\nname: a\ndescription: \"  \"\n---\n", "a"),
        FrontmatterError::Required("description")
    );
    assert_eq!(
        err("---\nname: a\ndescription: d\n---\n", "b"),
        FrontmatterError::NameMismatch { name: "a".into(), folder: "b".into() }
    );
    for bad in ["PDF", "-pdf", "pdf-", "pd--f", "pdf_x", "pdf.x"] {
        assert!(!valid_name(bad), "{bad}");
        assert_eq!(err(&md(bad, "d"), bad), FrontmatterError::BadName(bad.into()));
    }
    let long = "a".repeat(65);
    assert!(!valid_name(&long) && valid_name(&"a".repeat(64)) && valid_name("pdf-2"));
    let d = "x".repeat(1025);
    assert_eq!(err(&md("a", &d), "a"), FrontmatterError::TooLong("description", 1024));
    assert!(parse_skill_md(&md("a", &"x".repeat(1024)), "a").is_ok());
    let compat = format!("---\nname: a\ndescription: d\ncompatibility: {}\n---\n", "c".repeat(501));
    assert_eq!(err(&compat, "a"), FrontmatterError::TooLong("compatibility", 500));
    assert_eq!(
        err("---\nname: a\ndescription: d\nmetadata: [1]\n---\n", "a"),
        FrontmatterError::WrongType("metadata", "a map of strings")
    );
    assert_eq!(
        err("---\nname: a\ndescription: [d]\n---\n", "a"),
        FrontmatterError::WrongType("description", "a string")
    );
}

#[test]
fn paths_stay_inside_the_skill() {
    assert!(check_path("references/forms.md").is_ok());
    assert_eq!(check_path("../secrets"), Err(PathError::Climbs));
    assert_eq!(check_path("references/../../x"), Err(PathError::Climbs));
    for bad in ["/etc/passwd", "a//b", "./a", "a/", "a\0b"] {
        assert!(matches!(check_path(bad), Err(PathError::NotNormalized(_))), "{bad}");
    }
    assert_eq!(split_qualified("pdf/references/forms.md"), Ok(("pdf", "references/forms.md")));
    assert_eq!(split_qualified("forms.md"), Err(PathError::Unqualified));
    assert_eq!(split_qualified("../pdf/x"), Err(PathError::Climbs));
    assert_eq!(ResourceKind::of("scripts/a.sh"), ResourceKind::Script);
    assert_eq!(ResourceKind::of("assets/a.png"), ResourceKind::Asset);
    assert_eq!(ResourceKind::of("notes.txt"), ResourceKind::File);
    assert!(
        check_script_path("scripts/run.sh").is_ok() && check_script_path("scripts/x.bash").is_ok()
    );
    assert!(matches!(check_script_path("run.sh"), Err(ScriptError::Path(_))));
    assert!(matches!(check_script_path("scripts/../x.sh"), Err(ScriptError::Path(_))));
    assert!(
        check_script_path("scripts/x.mjs").is_ok() && check_script_path("scripts/x.js").is_ok()
    );
    assert!(matches!(check_script_path("scripts/x.ts"), Err(ScriptError::TypeScript(_))));
    assert!(matches!(check_script_path("scripts/x.rb"), Err(ScriptError::Unsupported(_))));
}

fn write(ws: &Workspace, path: &str, text: &str) {
    block_on(ws.write_file(path, text, "text/plain")).unwrap();
}

#[test]
fn catalog_lists_valid_skills_and_reports_the_rest() {
    let (_sql, ws) = ws();
    write(&ws, "/skills/pdf/SKILL.md", &md("pdf", "Fill PDF forms."));
    write(&ws, "/skills/pdf/references/forms.md", "Form fields");
    write(&ws, "/skills/broken/SKILL.md", "---\nname: broken\n---\n");
    write(&ws, "/skills/notes/readme.txt", "no SKILL.md here");
    write(&ws, "/elsewhere/x/SKILL.md", &md("x", "not in the folder"));
    write(&ws, "/skills-old/y/SKILL.md", &md("y", "a sibling folder, not below /skills"));
    write(&ws, "/skills/SKILL.md", &md("skills", "not in a skill folder"));
    let skills = Skills::new(SkillsConfig::default());
    let catalog = block_on(skills.refresh(&ws, None, 0.0));
    assert_eq!(catalog.prompt().unwrap(), format!("{CATALOG_HEADER}\n\n- pdf: Fill PDF forms."));
    assert_eq!(
        skills.system_prompt("Base."),
        format!("Base.\n\n{CATALOG_HEADER}\n\n- pdf: Fill PDF forms.")
    );
    let reports = serde_json::to_value(&catalog.reports).unwrap();
    assert_eq!(
        reports,
        json!([
            {"name": "broken", "description": "", "source": "workspace", "valid": false,
             "error": "frontmatter field `description` is required"},
            {"name": "pdf", "description": "Fill PDF forms.", "source": "workspace", "valid": true}
        ])
    );
    let pdf = catalog.get("pdf").unwrap();
    assert_eq!(pdf.resources, vec![ResourceInfo::new("references/forms.md", 11)]);
    let text = tools::activation_text(pdf);
    assert!(
        text.starts_with(&format!(
            "<skill_content name=\"pdf\" version=\"{}\">\n# pdf\n\nBody of pdf.\n",
            pdf.version
        )),
        "{text}"
    );
    assert!(text.contains("<skill_resources>\n  <file kind=\"reference\" encoding=\"text\" size=\"11\">references/forms.md</file>\n</skill_resources>\n</skill_content>"), "{text}");
    assert!(
        text.ends_with(
            "Bundled resources:\n- references/forms.md (reference, text, text/markdown, 11 bytes)"
        ),
        "{text}"
    );
    let empty = Skills::new(SkillsConfig::default());
    let (_sql2, ws2) = crate::workspace::tests::ws();
    assert!(block_on(empty.refresh(&ws2, None, 0.0)).prompt().is_none());
    assert_eq!(empty.system_prompt("Base."), "Base.");
    assert!(empty.tools(Rc::new(ws2), ScriptRunners::default()).is_empty());
}

#[test]
fn a_skill_is_read_again_only_when_its_files_change() {
    let (_sql, ws) = ws();
    write(&ws, "/skills/pdf/SKILL.md", &md("pdf", "One."));
    write(&ws, "/skills/csv/SKILL.md", &md("csv", "Tables."));
    let skills = Skills::new(SkillsConfig::default());
    block_on(skills.refresh(&ws, None, 0.0));
    assert_eq!(skills.workspace_reads(), 2);
    let v1 = skills.catalog().get("pdf").unwrap().version.clone();
    block_on(skills.refresh(&ws, None, 0.0));
    assert_eq!(skills.workspace_reads(), 2, "nothing changed, nothing read");
    write(&ws, "/skills/pdf/SKILL.md", &md("pdf", "Two."));
    let catalog = block_on(skills.refresh(&ws, None, 0.0));
    assert_eq!(skills.workspace_reads(), 3, "only the changed skill is read");
    assert_eq!(catalog.get("pdf").unwrap().meta.description, "Two.");
    assert_ne!(catalog.get("pdf").unwrap().version, v1);
    write(&ws, "/skills/pdf/references/new.md", "x");
    let catalog = block_on(skills.refresh(&ws, None, 0.0));
    assert_eq!(skills.workspace_reads(), 4, "a new resource changes the skill");
    assert_eq!(catalog.get("pdf").unwrap().resources.len(), 1);
    block_on(ws.rm("/skills/csv", true, false)).unwrap();
    let catalog = block_on(skills.refresh(&ws, None, 0.0));
    assert!(catalog.get("csv").is_none());
    assert_eq!(catalog.reports.len(), 1);
}

#[test]
fn rust_then_r2_then_workspace() {
    let (_sql, ws) = ws();
    write(&ws, "/skills/pdf/SKILL.md", &md("pdf", "From the workspace."));
    write(&ws, "/skills/csv/SKILL.md", &md("csv", "From the workspace."));
    write(&ws, "/skills/only-ws/SKILL.md", &md("only-ws", "From the workspace."));
    let blobs = MemoryBlobs::default();
    for (k, v) in [
        ("skills/pdf/SKILL.md", md("pdf", "From R2.")),
        ("skills/csv/SKILL.md", md("csv", "From R2.")),
        ("skills/csv/scripts/a.sh", "echo hi".into()),
    ] {
        blobs.objects.borrow_mut().insert(k.into(), v.into_bytes());
    }
    let config = SkillsConfig {
        rust: vec![Skill::new("pdf", md("pdf", "From Rust.")).file("assets/logo.png", vec![1, 2])],
        r2_prefix: Some("skills".into()),
        ..Default::default()
    };
    let skills = Skills::new(config);
    let catalog = block_on(skills.refresh(&ws, Some(&blobs), 0.0));
    let seen: Vec<(&str, &str)> = catalog
        .skills
        .iter()
        .map(|s| (s.meta.name.as_str(), s.meta.description.as_str()))
        .collect();
    assert_eq!(
        seen,
        [("pdf", "From Rust."), ("csv", "From R2."), ("only-ws", "From the workspace.")]
    );
    let shadowed: Vec<(&str, Source, Option<&str>)> = catalog
        .reports
        .iter()
        .filter(|r| !r.valid)
        .map(|r| (r.name.as_str(), r.source, r.error.as_deref()))
        .collect();
    assert_eq!(
        shadowed,
        [
            ("pdf", Source::R2, Some("a rust skill of the same name comes first")),
            ("csv", Source::Workspace, Some("a r2 skill of the same name comes first")),
            ("pdf", Source::Workspace, Some("a rust skill of the same name comes first")),
        ]
    );
    assert_eq!(catalog.get("csv").unwrap().resources[0].kind, ResourceKind::Script);
    assert_eq!(catalog.get("pdf").unwrap().resources[0].size, 2);
    // The R2 listing is reused within the refresh interval, then read again.
    blobs
        .objects
        .borrow_mut()
        .insert("skills/csv/SKILL.md".into(), md("csv", "Newer.").into_bytes());
    let catalog = block_on(skills.refresh(&ws, Some(&blobs), 1_000.0));
    assert_eq!(catalog.get("csv").unwrap().meta.description, "From R2.");
    let catalog = block_on(skills.refresh(&ws, Some(&blobs), R2_REFRESH_MS + 1.0));
    assert_eq!(catalog.get("csv").unwrap().meta.description, "Newer.");
    // Without a bucket the R2 source reports why.
    let alone =
        Skills::new(SkillsConfig { r2_prefix: Some("skills".into()), ..Default::default() });
    let catalog = block_on(alone.refresh(&ws, None, 0.0));
    assert!(catalog.reports[0].error.as_deref().unwrap().contains("no R2 bucket"));
}

fn call(tools: &[ToolRef], name: &str, input: Value) -> Result<Value, crate::tools::ToolError> {
    let tool = tools.iter().find(|t| t.definition().name == name).unwrap();
    block_on(tool.execute(input, &crate::tools::ToolContext::default()))
}

#[test]
fn tools_activate_read_and_refuse() {
    let (_sql, ws) = ws();
    let ws = Rc::new(ws);
    write(&ws, "/skills/pdf/SKILL.md", &md("pdf", "Fill PDF forms."));
    write(&ws, "/skills/pdf/references/forms.md", "Form fields");
    block_on(ws.write_file_bytes("/skills/pdf/assets/x.png", &[0, 159, 146, 150], "image/png"))
        .unwrap();
    let skills = Skills::new(SkillsConfig::default());
    block_on(skills.refresh(&ws, None, 0.0));
    let tools = skills.tools(ws.clone(), ScriptRunners::default());
    let names: Vec<_> = tools.iter().map(|t| t.definition().name.clone()).collect();
    assert_eq!(names, ["activate_skill", "read_skill_resource"], "no engine, no scripts");
    assert_eq!(tools[0].definition().input_schema["properties"]["name"]["enum"], json!(["pdf"]));
    let out =
        call(&tools, "read_skill_resource", json!({"path": "pdf/references/forms.md"})).unwrap();
    assert_eq!(
        out,
        json!("<skill_resource name=\"pdf\" path=\"references/forms.md\" kind=\"reference\" encoding=\"text\" mimeType=\"text/markdown\">\nForm fields\n</skill_resource>")
    );
    let out = call(&tools, "read_skill_resource", json!({"name": "pdf", "path": "assets/x.png"}))
        .unwrap();
    assert!(
        out.as_str().unwrap().contains("encoding=\"base64\" mimeType=\"image/png\">\nAJ+Slg==\n"),
        "{out}"
    );
    let err =
        call(&tools, "read_skill_resource", json!({"name": "pdf", "path": "../pdf/SKILL.md"}))
            .unwrap_err();
    assert!(err.to_string().starts_with("Resource paths cannot use \"../\""), "{err}");
    let err = call(&tools, "read_skill_resource", json!({"path": "nope/x.md"})).unwrap_err();
    assert_eq!(err.to_string(), "Unknown skill in qualified resource path: nope");
    let err =
        call(&tools, "read_skill_resource", json!({"name": "pdf", "path": "references/none.md"}))
            .unwrap_err();
    assert_eq!(err.to_string(), "Resource not found: pdf/references/none.md");
    write(&ws, "/skills/pdf/assets/big.txt", &"x".repeat(1_000_001));
    block_on(skills.refresh(&ws, None, 0.0));
    let tools = skills.tools(ws.clone(), ScriptRunners::default());
    let err =
        call(&tools, "read_skill_resource", json!({"path": "pdf/assets/big.txt"})).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Resource too large to read: pdf/assets/big.txt (1000001 bytes; the limit is 1000000)"
    );
    let err = call(&tools, "activate_skill", json!({"name": "nope"})).unwrap_err();
    assert_eq!(err.to_string(), "Skill not found: nope");
    assert!(!skills.needs_approval("bash"));
    call(&tools, "activate_skill", json!({"name": "pdf"})).unwrap();
    assert!(!skills.needs_approval("bash"), "pdf declares no allowed-tools");
}

#[test]
fn allowed_tools_of_an_activated_skill_gate_other_tools() {
    let (_sql, ws) = ws();
    let ws = Rc::new(ws);
    write(
        &ws,
        "/skills/pdf/SKILL.md",
        "---\nname: pdf\ndescription: d\nallowed-tools: Read grep\n---\nbody",
    );
    let skills = Skills::new(SkillsConfig::default());
    block_on(skills.refresh(&ws, None, 0.0));
    assert!(!skills.needs_approval("bash"), "not activated yet");
    let part = |state: &str| {
        crate::protocol::message::UIMessage::new(
            "m1",
            crate::protocol::message::Role::Assistant,
            vec![
                json!({"type": "tool-activate_skill", "toolCallId": "c1", "state": state, "input": {"name": "pdf"}, "output": "x"}),
            ],
        )
    };
    skills.note_activations(&[part("output-error")]);
    assert!(!skills.needs_approval("bash"), "a failed activation does not count");
    skills.note_activations(&[part("output-available")]);
    assert!(skills.needs_approval("bash"));
    assert!(!skills.needs_approval("read") && !skills.needs_approval("grep"));
    assert!(!skills.needs_approval("read_skill_resource"));
    skills.note_activations(&[]);
    assert!(!skills.needs_approval("bash"));
    let tools = skills.tools(ws.clone(), ScriptRunners::default());
    call(&tools, "activate_skill", json!({"name": "pdf"})).unwrap();
    assert!(skills.needs_approval("write"), "an activation in the running turn counts");
}

/// Runs the script as a shell would for the one script of the test: echoes the input and
/// writes an output file; records the request.
struct EchoEngine(RefCell<Option<EngineRequest>>);

#[async_trait::async_trait(?Send)]
impl BashEngine for EchoEngine {
    async fn run(
        &self,
        request: EngineRequest,
    ) -> Result<EngineResponse, crate::tools::workspace::bash::BashError> {
        let input = request.files.iter().find(|(p, _)| p == "/input.json").unwrap().1.clone();
        *self.0.borrow_mut() = Some(request);
        let mut entries = vec![FinalEntry {
            path: "/output/echo.json".into(),
            kind: crate::tools::workspace::bash::FinalKind::File,
            content: Some(input.clone()),
        }];
        entries.push(FinalEntry {
            path: "/output/big.bin".into(),
            kind: crate::tools::workspace::bash::FinalKind::File,
            content: Some(vec![0xff; 64_001]),
        });
        Ok(EngineResponse {
            stdout: String::from_utf8(input).unwrap(),
            exit_code: 3,
            entries,
            ..Default::default()
        })
    }
}

#[test]
fn scripts_run_over_the_skill_files_with_the_input() {
    let (_sql, ws) = ws();
    let ws = Rc::new(ws);
    write(&ws, "/skills/pdf/SKILL.md", &md("pdf", "d"));
    write(&ws, "/skills/pdf/scripts/fill.sh", "cat /input.json");
    write(&ws, "/skills/pdf/scripts/fill.mjs", "export default () => 1");
    write(&ws, "/notes.txt", "workspace file");
    let skills = Skills::new(SkillsConfig::default());
    block_on(skills.refresh(&ws, None, 0.0));
    let engine = Rc::new(EchoEngine(RefCell::new(None)));
    let tools = skills
        .tools(ws.clone(), ScriptRunners { engine: Some(engine.clone()), ..Default::default() });
    let out = call(
        &tools,
        "run_skill_script",
        json!({"name": "pdf", "path": "scripts/fill.sh", "input": {"a": 1}}),
    )
    .unwrap();
    assert_eq!(
        out,
        json!({"stdout": "{\"a\":1}", "stderr": "", "exitCode": 3,
               "outputFiles": [{"path": "/output/echo.json", "encoding": "text", "content": "{\"a\":1}"}],
               "omittedOutputFiles": ["/output/big.bin: larger than 64000 bytes"]})
    );
    let request = engine.0.borrow().clone().unwrap();
    assert_eq!(request.script, "bash /skill/scripts/fill.sh < /input.json");
    assert!(!request.network);
    let mounted: Vec<&str> = request.files.iter().map(|(p, _)| p.as_str()).collect();
    for p in ["/skill/SKILL.md", "/skill/scripts/fill.sh", "/workspace/notes.txt", "/context.json"]
    {
        assert!(mounted.contains(&p), "{p} in {mounted:?}");
    }
    assert!(request.dirs.contains(&"/output".to_owned()));
    let err = call(&tools, "run_skill_script", json!({"name": "pdf", "path": "scripts/fill.mjs"}))
        .unwrap_err();
    assert!(
        err.to_string().starts_with("JavaScript skill scripts need the Code Mode sandbox"),
        "{err}"
    );
    let err = call(&tools, "run_skill_script", json!({"name": "pdf", "path": "scripts/none.sh"}))
        .unwrap_err();
    assert_eq!(err.to_string(), "Script not found: pdf/scripts/none.sh");
    assert_eq!(block_on(ws.read_file("/notes.txt")).unwrap().as_deref(), Some("workspace file"));
}

#[test]
fn an_unchanged_skills_folder_costs_one_statement() {
    let (sql, ws) = ws();
    for i in 0..50 {
        write(&ws, &format!("/skills/s{i}/SKILL.md"), &md(&format!("s{i}"), "d"));
        for j in 0..20 {
            write(&ws, &format!("/skills/s{i}/references/r{j}.md"), "x");
        }
    }
    let skills = Skills::new(SkillsConfig::default());
    assert_eq!(block_on(skills.refresh(&ws, None, 0.0)).skills.len(), 50);
    let before = sql.statements();
    assert_eq!(block_on(skills.refresh(&ws, None, 0.0)).skills.len(), 50);
    assert_eq!(sql.statements() - before, 1, "one range scan over 1,050 files");
}

#[test]
fn yaml_reads_the_forms_frontmatter_uses() {
    use super::yaml::{parse, Node};
    let s = |v: &str| Node::Scalar(v.into());
    let doc = parse(
        "# a comment\nname: pdf   # trailing comment\nplain: a: b is fine\ncontinued: one\n  two\n  three\n\
         single: 'it''s # not a comment'\ndouble: \"tab\\there \\u00e9 \\\"q\\\"\"\n\
         literal: |\n  line one\n    indented\n\n  line three\nfolded: >-\n  folded\n  text\n\n  para\n\
         keep: |+\n  k\n\nempty:\nnull: ~\nflow: [a, 'b, c', \"d\"]\nmap: {version: \"1.0\", n: 2}\n\
         metadata:\n  version: 1.0\n  author: me\nlist:\n- x\n- 'y'\nnested:\n  - z\n\"quoted key\": v\n",
    )
    .unwrap();
    let get = |k: &str| doc.get(k).cloned().unwrap_or_else(|| panic!("no {k}"));
    assert_eq!(get("name"), s("pdf"));
    assert_eq!(get("plain"), s("a: b is fine"));
    assert_eq!(get("continued"), s("one two three"));
    assert_eq!(get("single"), s("it's # not a comment"));
    assert_eq!(get("double"), s("tab\there é \"q\""));
    assert_eq!(get("literal"), s("line one\n  indented\n\nline three\n"));
    assert_eq!(get("folded"), s("folded text\npara"));
    assert_eq!(get("keep"), s("k\n\n"));
    assert_eq!(get("empty"), Node::Null);
    assert_eq!(get("null"), Node::Null);
    assert_eq!(get("flow"), Node::List(vec![s("a"), s("b, c"), s("d")]));
    assert_eq!(get("map"), Node::Map(vec![("version".into(), s("1.0")), ("n".into(), s("2"))]));
    assert_eq!(
        get("metadata"),
        Node::Map(vec![("version".into(), s("1.0")), ("author".into(), s("me"))])
    );
    assert_eq!(get("list"), Node::List(vec![s("x"), s("y")]));
    assert_eq!(get("nested"), Node::List(vec![s("z")]));
    assert_eq!(get("quoted key"), s("v"));
    assert_eq!(parse("").unwrap(), Node::Null);
    let refused = |text: &str| parse(text).unwrap_err().to_string();
    assert_eq!(refused("a: &x 1"), "line 1: anchors are not supported in frontmatter");
    assert_eq!(refused("a: *x"), "line 1: aliases are not supported in frontmatter");
    assert_eq!(refused("a: !!str 1"), "line 1: tags are not supported in frontmatter");
    assert_eq!(refused("a: 1\na: 2"), "line 2: duplicate key \"a\"");
    assert_eq!(refused("a: 1\n   b: 2"), "line 2: unexpected indentation");
    assert_eq!(refused("a: \"open"), "line 1: a quoted value must close on its line");
    assert_eq!(
        refused("a: [b, [c]]"),
        "line 1: nested flow collections are not supported in frontmatter"
    );
    assert_eq!(refused("just text"), "line 1: expected `key: value`, found \"just text\"");
    assert_eq!(refused("a: 'x' y"), "line 1: unexpected text after a quoted value: \" y\"");
}

#[test]
fn the_documented_example_is_a_valid_skill() {
    let readme = include_str!("../../../../docs/skills.md");
    let start = readme.find("```markdown\n---\n").expect("docs/skills.md shows a SKILL.md") + 12;
    let end = start + readme[start..].find("```").unwrap();
    let p = parse_skill_md(&readme[start..end], "pdf").unwrap();
    assert_eq!(p.meta.description, "Fill PDF forms and merge PDF files.");
    assert_eq!(p.meta.allowed_tools, Some(vec!["read".into(), "list".into()]));
    assert_eq!(p.meta.metadata.get("version").map(String::as_str), Some("1.0"));
    assert_eq!(p.meta.compatibility.as_deref(), Some("needs bash"));
}

#[test]
fn yaml_never_panics_on_odd_input() {
    let pieces = [
        "a:",
        " b: c",
        "- x",
        "  - y",
        "|",
        ">-",
        "'q''",
        "\"d\\u00",
        "[1, '2'",
        "{k: v}",
        "#",
        ": ",
        "\t",
        "é",
        "  ",
        "\n",
        "\r\n",
        "key: \"x\" y",
        "*",
        "&a",
        "!t",
        "'",
        "\"",
        "]",
        "}",
        ",",
    ];
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..5_000 {
        let mut text = String::new();
        for _ in 0..(seed % 12) {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            text.push_str(pieces[(seed >> 33) as usize % pieces.len()]);
        }
        seed = seed.wrapping_add(1);
        let _ = super::yaml::parse(&text);
        let _ = parse_skill_md(&format!("---\n{text}\n---\n"), "a");
    }
}

/// A sandbox that records the request and makes the calls a script would make, in order,
/// then ends as `end` says (the result, or a thrown message).
struct ScriptedSandbox {
    calls: Vec<(&'static str, Value)>,
    logs: Vec<String>,
    end: Result<Result<Value, String>, crate::codemode::SandboxError>,
    seen: RefCell<Option<crate::codemode::SandboxRequest>>,
    replies: RefCell<Vec<Result<Value, String>>>,
}

impl ScriptedSandbox {
    fn new(
        calls: Vec<(&'static str, Value)>,
        end: Result<Result<Value, String>, crate::codemode::SandboxError>,
    ) -> Rc<Self> {
        Rc::new(Self {
            calls,
            logs: vec!["hello".into(), "[error] oops".into(), "[warn] careful".into()],
            end,
            seen: RefCell::default(),
            replies: RefCell::default(),
        })
    }
}

#[async_trait::async_trait(?Send)]
impl crate::codemode::Sandbox for ScriptedSandbox {
    async fn run(
        &self,
        request: crate::codemode::SandboxRequest,
        dispatcher: Rc<dyn crate::codemode::Dispatcher>,
    ) -> Result<crate::codemode::SandboxOutcome, crate::codemode::SandboxError> {
        let connector = request.namespaces[0].name.clone();
        *self.seen.borrow_mut() = Some(request);
        for (method, args) in &self.calls {
            let call = crate::codemode::CallRequest {
                connector: connector.clone(),
                method: (*method).into(),
                args: args.clone(),
                site: "1:1".into(),
            };
            let reply = dispatcher.call(call).await.map_err(|e| e.to_string());
            self.replies.borrow_mut().push(reply);
        }
        let result = self.end.clone()?;
        Ok(crate::codemode::SandboxOutcome { result, logs: self.logs.clone() })
    }
}

fn js_skill() -> (Rc<Workspace>, Skills) {
    let (_sql, ws) = ws();
    let ws = Rc::new(ws);
    write(&ws, "/skills/pdf/SKILL.md", &md("pdf", "Fill forms"));
    write(&ws, "/skills/pdf/scripts/hello.mjs", "export default async (input, ctx) => input");
    write(&ws, "/skills/pdf/scripts/types.ts", "export default () => 1");
    write(&ws, "/skills/pdf/references/fields.md", "name, date");
    write(&ws, "/notes.txt", "workspace file");
    let skills = Skills::new(SkillsConfig::default());
    block_on(skills.refresh(&ws, None, 0.0));
    (ws, skills)
}

#[test]
fn js_scripts_run_in_the_sandbox_with_ctx() {
    let (ws, skills) = js_skill();
    let mut calls = vec![
        ("readFile", json!({"path": "references/fields.md"})),
        ("readFile", json!({"path": "../other/SKILL.md"})),
        ("readWorkspaceFile", json!({"path": "/notes.txt"})),
        ("writeOutput", json!({"path": "report.txt", "content": "done"})),
        ("writeOutput", json!({"path": "big.txt", "content": "x".repeat(64_001)})),
    ];
    for i in 0..21 {
        calls.push(("writeOutput", json!({"path": format!("f{i:02}.txt"), "content": "n"})));
    }
    let sandbox = ScriptedSandbox::new(calls, Ok(Ok(json!({"filled": 2}))));
    let runners = ScriptRunners { sandbox: Some(sandbox.clone()), ..Default::default() };
    let tools = skills.tools(ws.clone(), runners);
    assert!(
        tools.iter().any(|t| t.definition().name == "run_skill_script"),
        "offered without bash"
    );
    let out = call(
        &tools,
        "run_skill_script",
        json!({"name": "pdf", "path": "scripts/hello.mjs", "input": {"a": 1}}),
    )
    .unwrap();
    let request = sandbox.seen.borrow().clone().unwrap();
    assert_eq!(request.timeout_ms, 30_000);
    assert!(request.snippets.is_empty());
    assert_eq!(request.modules.len(), 1);
    assert!(request.modules[0].source.contains("export default async (input, ctx) => input"));
    assert!(request.body.contains(&format!("import(\"./{}\")", request.modules[0].name)));
    assert!(request.body.contains("mod.default({\"a\":1}, ctx)"), "{}", request.body);
    assert!(request.body.contains("\"description\":\"Fill forms\""), "{}", request.body);
    let replies = sandbox.replies.borrow();
    assert_eq!(replies[0], Ok(json!("name, date")));
    assert!(replies[1].as_ref().unwrap_err().contains("../"), "{:?}", replies[1]);
    assert_eq!(replies[2], Ok(json!("workspace file")));
    assert_eq!(replies[3], Ok(json!("/output/report.txt")));
    assert_eq!(out["stdout"], "hello\n");
    assert_eq!(out["stderr"], "oops\ncareful\n");
    assert_eq!(out["exitCode"], 0);
    assert_eq!(out["result"], json!({"filled": 2}));
    let files = out["outputFiles"].as_array().unwrap();
    assert_eq!(files.len(), 20);
    assert_eq!(
        files[0],
        json!({"path": "/output/report.txt", "encoding": "text", "content": "done"})
    );
    assert_eq!(
        out["omittedOutputFiles"],
        json!([
            "/output/big.txt: larger than 64000 bytes",
            "/output/f19.txt: more than 20 output files",
            "/output/f20.txt: more than 20 output files"
        ])
    );
}

#[test]
fn js_script_failures_map_to_exit_codes() {
    let (ws, skills) = js_skill();
    let run = |end| {
        let sandbox = ScriptedSandbox::new(Vec::new(), end);
        let tools = skills
            .tools(ws.clone(), ScriptRunners { sandbox: Some(sandbox), ..Default::default() });
        call(&tools, "run_skill_script", json!({"name": "pdf", "path": "scripts/hello.mjs"}))
    };
    let thrown = run(Ok(Err("TypeError: bad input".into()))).unwrap();
    assert_eq!(thrown["exitCode"], 1);
    assert_eq!(thrown["stderr"], "oops\ncareful\nTypeError: bad input");
    assert!(thrown.get("result").is_none());
    let slow = run(Ok(Err("Execution timed out after 30000 ms".into()))).unwrap();
    assert_eq!(slow["exitCode"], 124);
    assert!(slow["stderr"].as_str().unwrap().ends_with("Script timed out after 30000 ms"));
    let killed = run(Err(crate::codemode::SandboxError::Timeout(30_000))).unwrap();
    assert_eq!(
        (killed["exitCode"].clone(), killed["stderr"].clone()),
        (json!(124), json!("Script timed out after 30000 ms"))
    );
    let big = run(Ok(Ok(json!("y".repeat(30_000))))).unwrap();
    assert!(big["result"].as_str().unwrap().contains("[truncated: 30002 characters in all]"));
    let err = run(Err(crate::codemode::SandboxError::Unavailable("no LOADER".into()))).unwrap_err();
    assert_eq!(err.to_string(), "Skill script failed: The sandbox is unavailable: no LOADER");
    let sandbox = ScriptedSandbox::new(Vec::new(), Ok(Ok(Value::Null)));
    let tools =
        skills.tools(ws.clone(), ScriptRunners { sandbox: Some(sandbox), ..Default::default() });
    let ts = call(&tools, "run_skill_script", json!({"name": "pdf", "path": "scripts/types.ts"}));
    assert!(ts.unwrap_err().to_string().starts_with("TypeScript skill scripts are not supported"));
    let sh = call(&tools, "run_skill_script", json!({"name": "pdf", "path": "scripts/x.sh"}));
    assert_eq!(sh.unwrap_err().to_string(), "Skill scripts cannot run here: no bash engine");
}
