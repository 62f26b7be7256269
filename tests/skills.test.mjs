// Skills end to end: the scripted model writes a skill into the workspace with the file
// tools, and the Rust Durable Object in Miniflare finds it on the next turn (catalog in the
// system prompt, activate_skill's enum), serves its resources, runs its bash script in
// just-bash, reports invalid skills through skills() (WebSocket rpc and DO RPC), keeps it
// all across a restart, and gates tools outside an activated skill's allowed-tools.
import { test, before, after } from "node:test";
import http from "node:http";
import assert from "node:assert/strict";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs, newId } from "./helpers/client.mjs";

let model;
let worker;

before(async () => {
  model = await startScriptedModel();
  worker = await startWorker({ vars: modelVars(model), withCaller: true });
});

after(async () => {
  closeTabs();
  await worker?.dispose();
  await model?.close();
});

const HEADER = "Available skills. When a task matches a skill, use activate_skill with its name before proceeding.";

const PDF_SKILL = `---
name: pdf
description: Fill PDF forms and merge PDF files.
license: MIT
metadata:
  version: "1.0"
---
# PDF

Read references/forms.md, then run scripts/fill.sh with the form values.
`;
const FORMS = "Fields: name, date.\n";
const FILL = `echo "input: $(cat /input.json)"
cat /workspace/notes.txt
echo "filled for $(cat)" > /output/form.txt
echo overwritten > /workspace/notes.txt
echo "a warning" >&2
exit 3
`;

/** One turn in which the model calls `calls` (one step), then answers; the output chunks. */
async function callTools(tab, calls) {
  const withIds = calls.map((c) => ({ id: newId("call"), ...c }));
  model.push({ toolCalls: withIds }, { text: "done" });
  const { id } = tab.chat(`run ${calls.map((c) => c.name).join(", ")}`);
  await tab.turn(id, { timeout: 60000 });
  const chunks = tab.chunks(id);
  return withIds.map((call) => {
    const chunk = chunks.find(
      (c) => (c.type === "tool-output-available" || c.type === "tool-output-error") && c.toolCallId === call.id,
    );
    assert.ok(chunk, `no output for ${call.name}: ${JSON.stringify(chunks.map((c) => c.type))}`);
    return chunk;
  });
}

/** A plain turn; returns the request the model received. */
async function plainTurn(tab, text = "hello") {
  model.push({ text: "hi" });
  const before = model.requests.length;
  const { id } = tab.chat(text);
  await tab.turn(id, { timeout: 60000 });
  assert.equal(model.requests.length, before + 1);
  return model.requests.at(-1);
}

const systemOf = (request) => request.messages.find((m) => m.role === "system")?.content ?? "";
const toolOf = (request, name) => request.tools?.find((t) => t.function.name === name)?.function;

async function writeFiles(tab, files) {
  const outs = await callTools(
    tab,
    Object.entries(files).map(([path, content]) => ({ name: "write", args: { path, content } })),
  );
  for (const o of outs) assert.equal(o.type, "tool-output-available", JSON.stringify(o));
}

test("a skill the model writes appears next turn; activate, read and run it; a restart keeps it", async () => {
  const tab = await connect(worker.host, "skills-pdf");
  let request = await plainTurn(tab);
  assert.ok(!systemOf(request).includes(HEADER), "no skills, no catalog");
  assert.equal(toolOf(request, "activate_skill"), undefined, "no skills, no skill tools");

  await writeFiles(tab, {
    "/skills/pdf/SKILL.md": PDF_SKILL,
    "/skills/pdf/references/forms.md": FORMS,
    "/skills/pdf/scripts/fill.sh": FILL,
    "/skills/pdf/scripts/fill.mjs": "export default async () => 1;\n",
    "/notes.txt": "workspace notes\n",
  });
  request = await plainTurn(tab);
  assert.ok(systemOf(request).includes(`\n\n${HEADER}\n\n- pdf: Fill PDF forms and merge PDF files.\n`), systemOf(request));
  assert.deepEqual(toolOf(request, "activate_skill").parameters.properties.name.enum, ["pdf"]);
  assert.ok(toolOf(request, "read_skill_resource"));
  assert.ok(toolOf(request, "run_skill_script"));
  const names = request.tools.map((t) => t.function.name);
  assert.ok(names.indexOf("bash") < names.indexOf("activate_skill"), "skill tools come after the workspace tools");

  const [activated] = await callTools(tab, [{ name: "activate_skill", args: { name: "pdf" } }]);
  assert.equal(activated.type, "tool-output-available");
  const text = activated.output;
  assert.match(text, /^<skill_content name="pdf" version="[0-9a-f]{16}">\n# PDF\n\nRead references\/forms\.md/);
  assert.ok(text.includes(`<file kind="reference" encoding="text" size="${FORMS.length}">references/forms.md</file>`), text);
  assert.ok(text.includes(`<file kind="script" encoding="text" size="${FILL.length}">scripts/fill.sh</file>`), text);
  assert.ok(text.includes(`- references/forms.md (reference, text, text/markdown, ${FORMS.length} bytes)`), text);
  assert.equal(model.requests.at(-1).messages.at(-1).content, text, "the model reads the activation as text");

  const [qualified, named, climbing] = await callTools(tab, [
    { name: "read_skill_resource", args: { path: "pdf/references/forms.md" } },
    { name: "read_skill_resource", args: { name: "pdf", path: "references/forms.md" } },
    { name: "read_skill_resource", args: { name: "pdf", path: "../../notes.txt" } },
  ]);
  const expected = `<skill_resource name="pdf" path="references/forms.md" kind="reference" encoding="text" mimeType="text/markdown">\n${FORMS}\n</skill_resource>`;
  assert.equal(qualified.output, expected);
  assert.equal(named.output, expected);
  assert.equal(climbing.type, "tool-output-error");
  assert.match(climbing.errorText, /cannot use "\.\.\/"/);

  const [ran, js] = await callTools(tab, [
    { name: "run_skill_script", args: { name: "pdf", path: "scripts/fill.sh", input: { who: "Ada" } } },
    { name: "run_skill_script", args: { name: "pdf", path: "scripts/fill.mjs" } },
  ]);
  assert.equal(ran.type, "tool-output-available", JSON.stringify(ran));
  assert.equal(ran.output.exitCode, 3);
  assert.equal(ran.output.stdout, 'input: {"who":"Ada"}\nworkspace notes\n');
  assert.equal(ran.output.stderr, "a warning\n");
  assert.deepEqual(ran.output.outputFiles, [{ path: "/output/form.txt", encoding: "text", content: 'filled for {"who":"Ada"}\n' }]);
  assert.equal(js.type, "tool-output-available", JSON.stringify(js));
  assert.deepEqual(js.output, { stdout: "", stderr: "", exitCode: 0, result: 1 });
  const [notes] = await callTools(tab, [{ name: "read", args: { path: "/notes.txt" } }]);
  assert.match(JSON.stringify(notes.output), /workspace notes/, "the script could not change the workspace");

  await worker.restart();
  const again = await connect(worker.host, "skills-pdf");
  const listed = await again.client.call("skills", []);
  assert.deepEqual(listed, [{ name: "pdf", description: "Fill PDF forms and merge PDF files.", source: "workspace", valid: true }]);
  request = await plainTurn(again);
  assert.ok(systemOf(request).includes("- pdf: Fill PDF forms and merge PDF files."));
  const [after] = await callTools(again, [{ name: "read_skill_resource", args: { path: "pdf/references/forms.md" } }]);
  assert.equal(after.output, expected);
});

const HELLO = `function commas(s) {
  let i = 0, n = 0;
  while (i < s.length) { if (s[i] === ",") n++; i++; }
  return n;
}
export default async function (input, ctx) {
  const fields = await ctx.readFile("references/fields.md");
  console.log("hello", input.who, ctx.skill.name);
  console.error("fields:", fields.trim());
  const notes = await ctx.workspace.readFile("/notes.txt");
  const path = await ctx.writeOutput("report.txt", \`\${input.who}: \${fields.trim()}\`);
  return { greeted: input.who, path, notes, description: ctx.skill.description, fields: fields.split(", ").length, commas: commas(fields) };
}
`;

test("a .mjs skill script runs in the sandbox: input, ctx reads, an output file, its result; throws and fetch fail as exit 1", async () => {
  const tab = await connect(worker.host, "skills-js");
  const hits = [];
  const listener = http.createServer((req, res) => {
    hits.push(req.url);
    res.end("reached");
  });
  await new Promise((r) => listener.listen(0, "127.0.0.1", r));
  const port = listener.address().port;
  try {
    await writeFiles(tab, {
      "/skills/greet/SKILL.md": "---\nname: greet\ndescription: Greets people.\n---\nRun scripts/hello.mjs.\n",
      "/skills/greet/references/fields.md": "name, date\n",
      "/skills/greet/scripts/hello.mjs": HELLO,
      "/skills/greet/scripts/boom.js": "export default async () => { console.log('before'); throw new TypeError('no form given'); };\n",
      "/skills/greet/scripts/net.mjs": `export default async () => (await fetch("http://127.0.0.1:${port}/x")).text();\n`,
      "/skills/greet/scripts/noexport.mjs": "export const x = 1;\n",
      "/skills/greet/scripts/types.ts": "export default async (): Promise<number> => 1;\n",
      "/notes.txt": "workspace notes\n",
    });
    const [hello, boom, net, noexport, ts] = await callTools(tab, [
      { name: "run_skill_script", args: { name: "greet", path: "scripts/hello.mjs", input: { who: "Ada" } } },
      { name: "run_skill_script", args: { name: "greet", path: "scripts/boom.js" } },
      { name: "run_skill_script", args: { name: "greet", path: "scripts/net.mjs" } },
      { name: "run_skill_script", args: { name: "greet", path: "scripts/noexport.mjs" } },
      { name: "run_skill_script", args: { name: "greet", path: "scripts/types.ts" } },
    ]);
    assert.equal(hello.type, "tool-output-available", JSON.stringify(hello));
    assert.deepEqual(hello.output, {
      stdout: "hello Ada greet\n",
      stderr: "fields: name, date\n",
      exitCode: 0,
      outputFiles: [{ path: "/output/report.txt", encoding: "text", content: "Ada: name, date" }],
      result: { greeted: "Ada", path: "/output/report.txt", notes: "workspace notes\n", description: "Greets people.", fields: 2, commas: 1 },
    });
    assert.equal(boom.type, "tool-output-available", JSON.stringify(boom));
    assert.deepEqual(boom.output, { stdout: "before\n", stderr: "TypeError: no form given", exitCode: 1 });
    assert.equal(net.output.exitCode, 1, JSON.stringify(net));
    assert.match(net.output.stderr, /not permitted to access the internet/);
    assert.deepEqual(hits, [], "the listener on 127.0.0.1 got nothing");
    assert.equal(noexport.output.exitCode, 1, JSON.stringify(noexport));
    assert.match(noexport.output.stderr, /scripts\/noexport\.mjs must `export default async function \(input, ctx\)`/);
    assert.equal(ts.type, "tool-output-error");
    assert.match(ts.errorText, /TypeScript skill scripts are not supported \(scripts\/types\.ts\)/);
  } finally {
    listener.close();
  }
});

test("a skill script's busy loop ends with exit code 124 at 30 s while the object keeps serving", async () => {
  const tab = await connect(worker.host, "skills-spin");
  await writeFiles(tab, {
    "/skills/spin/SKILL.md": "---\nname: spin\ndescription: Spins.\n---\nDo not run.\n",
    "/skills/spin/scripts/spin.mjs": "export default async () => { let n = 0; while (true) { n++; } };\n",
  });
  const callId = newId("call");
  model.push({ toolCalls: [{ id: callId, name: "run_skill_script", args: { name: "spin", path: "scripts/spin.mjs" } }] }, { text: "done" });
  const started = Date.now();
  const { id } = tab.chat("spin");
  await new Promise((r) => setTimeout(r, 2000));
  const t0 = Date.now();
  assert.equal((await tab.client.call("skills", [])).length, 1);
  const served = Date.now() - t0;
  assert.ok(served < 1000, `skills() answered in ${served} ms during the loop`);
  await tab.turn(id, { timeout: 60000 });
  const out = tab.chunks(id).find((c) => c.type === "tool-output-available" && c.toolCallId === callId);
  assert.ok(out, "the script's output arrived");
  assert.equal(out.output.exitCode, 124, JSON.stringify(out.output));
  assert.match(out.output.stderr, /Script timed out after 30000 ms/);
  const took = Date.now() - started;
  assert.ok(took >= 29000 && took < 40000, `ended after ${took} ms`);
});

test("an invalid skill is left out, reported by skills() over rpc and DO RPC, and the turn goes on", async () => {
  const tab = await connect(worker.host, "skills-invalid");
  await writeFiles(tab, {
    "/skills/Bad/SKILL.md": "---\nname: Bad\ndescription: Uppercase names are refused.\n---\nbody\n",
    "/skills/nodesc/SKILL.md": "---\nname: nodesc\n---\nbody\n",
    "/skills/good/SKILL.md": "---\nname: good\ndescription: A valid one.\n---\nbody\n",
  });
  const request = await plainTurn(tab);
  assert.ok(systemOf(request).includes(`${HEADER}\n\n- good: A valid one.\n`), systemOf(request));
  assert.deepEqual(toolOf(request, "activate_skill").parameters.properties.name.enum, ["good"]);
  const expected = [
    { name: "Bad", description: "", source: "workspace", valid: false, error: 'name "Bad" must be 1-64 lowercase letters, digits and hyphens, not starting or ending with a hyphen and without `--`' },
    { name: "good", description: "A valid one.", source: "workspace", valid: true },
    { name: "nodesc", description: "", source: "workspace", valid: false, error: "frontmatter field `description` is required" },
  ];
  assert.deepEqual(await tab.client.call("skills", []), expected);
  assert.deepEqual(await worker.caller("/skills?name=skills-invalid"), expected);
});

test("while an activated skill declares allowed-tools, other tools need approval", async () => {
  const tab = await connect(worker.host, "skills-gate");
  await writeFiles(tab, {
    "/skills/careful/SKILL.md": "---\nname: careful\ndescription: Only reads.\nallowed-tools: Read list\n---\nOnly read files.\n",
    "/a.txt": "alpha\n",
  });
  // Before activation, write runs freely.
  let [w] = await callTools(tab, [{ name: "write", args: { path: "/b.txt", content: "beta" } }]);
  assert.equal(w.type, "tool-output-available");

  // Activation, then in the same turn a write: it waits for a human; read does not.
  model.push(
    { toolCalls: [{ id: "call_act", name: "activate_skill", args: { name: "careful" } }] },
    { toolCalls: [
      { id: "call_read", name: "read", args: { path: "/a.txt" } },
      { id: "call_write", name: "write", args: { path: "/c.txt", content: "gamma" } },
    ] },
  );
  const { id } = tab.chat("be careful");
  await tab.turn(id, { timeout: 60000 });
  const chunks = tab.chunks(id);
  const approval = chunks.find((c) => c.type === "tool-approval-request");
  assert.equal(approval?.toolCallId, "call_write", JSON.stringify(chunks.map((c) => c.type)));
  assert.ok(chunks.some((c) => c.type === "tool-output-available" && c.toolCallId === "call_read"), "read is allowed");
  assert.ok(!chunks.some((c) => c.type === "tool-output-available" && c.toolCallId === "call_write"), "write waits");

  // A later turn still has the skill activated (it is in the transcript).
  model.push({ text: "Denied, fine." });
  tab.send({ type: "cf_agent_tool_approval", toolCallId: "call_write", approved: false, autoContinue: true });
  await tab.followContinuation();
  model.push({ toolCalls: [{ id: "call_delete", name: "delete", args: { path: "/b.txt" } }] });
  const next = tab.chat("delete b");
  await tab.turn(next.id, { timeout: 60000 });
  const later = tab.chunks(next.id);
  assert.ok(later.some((c) => c.type === "tool-approval-request" && c.toolCallId === "call_delete"), JSON.stringify(later.map((c) => c.type)));
});

test("fifty skills of 21 files each: all in the catalog; what a scan costs per call", async () => {
  const tab = await connect(worker.host, "skills-many");
  const script = `for i in $(seq 0 49); do mkdir -p /skills/s$i/references
printf -- '---\\nname: s%s\\ndescription: Skill %s.\\n---\\nbody\\n' $i $i > /skills/s$i/SKILL.md
for j in $(seq 0 19); do echo x > /skills/s$i/references/r$j.md; done; done`;
  const [made] = await callTools(tab, [{ name: "bash", args: { script } }]);
  assert.equal(made.output.exitCode, 0, JSON.stringify(made.output));
  const median = async (method) => {
    const times = [];
    for (let i = 0; i < 21; i++) {
      const t = performance.now();
      await tab.client.call(method, []);
      times.push(performance.now() - t);
    }
    return times.sort((a, b) => a - b)[10];
  };
  const listed = await tab.client.call("skills", []);
  assert.equal(listed.filter((s) => s.valid).length, 50);
  const withScan = await median("skills");
  const without = await median("getMcpServers");
  console.log(`skills() over 1,050 files: median ${withScan.toFixed(2)} ms; getMcpServers(): ${without.toFixed(2)} ms`);
  const request = await plainTurn(tab);
  assert.ok(systemOf(request).includes("- s49: Skill 49."));
  assert.equal(toolOf(request, "activate_skill").parameters.properties.name.enum.length, 50);
});
