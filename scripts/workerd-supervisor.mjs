#!/usr/bin/env node
// `npm start`'s workerd, as Miniflare runs it (MINIFLARE_WORKERD_PATH, set by scripts/start.sh):
// the real workerd binary with two additions that Cloudflare's runtime has and local workerd
// lacks.
//
// 1. A heap cap. Local workerd gives every isolate V8's default heap (about 1.4 GB here), and
//    V8 aborts the whole process when one isolate reaches it. Model-written code that grows an
//    array without bound took about 130 s to get there, most of it in last-resort garbage
//    collections during which no instance answered. With `--max-old-space-size` at
//    THINK_LOCAL_HEAP_MB (default 256, twice Cloudflare's 128 MB isolate limit, so whatever
//    fits there fits here) the same code ends the process in seconds. The flag is passed the
//    way workerd takes V8 flags, in the config's `v8Flags`: Miniflare writes the config as a
//    binary Cap'n Proto message on stdin and has no option for them, so the message is
//    extended here (no Cap'n Proto library is installed, and the change is one list in a new
//    segment: see `withV8Flags`).
// 2. A restart. When workerd dies of anything but Miniflare's own stop (a heap abort, a crash),
//    it is started again at once with the same config on the same ports, so `wrangler dev`
//    keeps serving and the agent's durable recovery settles the interrupted turn (the call
//    that was running is reported to the model, never run again). More than MAX_RESTARTS
//    deaths within RESTART_WINDOW_MS stop the restarts, and the wrapper exits as workerd did.
//
// Miniflare stops workerd with SIGKILL, which a wrapper cannot catch, so workerd runs under
// `setpriv --pdeathsig KILL`: the kernel kills it when this process dies.
import { spawn } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;
const heapMb = Number.parseInt(process.env.THINK_LOCAL_HEAP_MB ?? "256", 10);

const require = createRequire(import.meta.url);
const workerdBin = process.env.THINK_REAL_WORKERD ?? require("workerd").default;

const say = (line) => process.stderr.write(`think-rs: ${line}\n`);

/**
 * `message` (a Cap'n Proto stream-framed Config) with `flags` as its `v8Flags` (pointer 2 of
 * the root struct), when the root has that pointer and it is unset; otherwise null. The flags go
 * in one new segment: a landing pad (a list pointer to the list of text pointers), the list, and
 * the texts; the root's pointer 2 becomes a far pointer to the pad.
 */
export function withV8Flags(message, flags) {
  const buf = Buffer.from(message);
  const count = buf.readUInt32LE(0) + 1;
  const headerWords = Math.ceil((4 + 4 * count) / 8);
  const sizes = [];
  for (let i = 0; i < count; i++) sizes.push(buf.readUInt32LE(4 + 4 * i));
  const segStart = [];
  let at = headerWords * 8;
  for (const words of sizes) {
    segStart.push(at);
    at += words * 8;
  }
  if (at !== buf.length) return null;
  // The root pointer: a struct pointer in segment 0, or a single far pointer to one.
  let rootSeg = 0;
  let rootPtrAt = segStart[0];
  let lo = buf.readUInt32LE(rootPtrAt);
  let hi = buf.readUInt32LE(rootPtrAt + 4);
  if ((lo & 3) === 2) {
    if (lo & 4) return null;
    rootSeg = hi;
    rootPtrAt = segStart[rootSeg] + (lo >>> 3) * 8;
    lo = buf.readUInt32LE(rootPtrAt);
    hi = buf.readUInt32LE(rootPtrAt + 4);
  }
  if ((lo & 3) !== 0) return null;
  const offset = lo >> 2;
  const dataWords = hi & 0xffff;
  const ptrCount = hi >>> 16;
  if (ptrCount < 3) return null;
  const structAt = rootPtrAt + 8 + offset * 8;
  const slot = structAt + (dataWords + 2) * 8;
  if (buf.readUInt32LE(slot) !== 0 || buf.readUInt32LE(slot + 4) !== 0) return null;

  const texts = flags.map((f) => Buffer.from(f + "\0", "utf8"));
  const textWords = texts.map((t) => Math.ceil(t.length / 8));
  const words = 1 + flags.length + textWords.reduce((a, b) => a + b, 0);
  const seg = Buffer.alloc(words * 8);
  // The landing pad at word 0: a list of pointers (element size 6) starting right after it.
  seg.writeUInt32LE(((0 << 2) | 1) >>> 0, 0);
  seg.writeUInt32LE(((flags.length << 3) | 6) >>> 0, 4);
  let textAt = 1 + flags.length;
  texts.forEach((t, i) => {
    const ptrWord = 1 + i;
    const rel = textAt - (ptrWord + 1);
    seg.writeUInt32LE(((rel << 2) | 1) >>> 0, ptrWord * 8);
    seg.writeUInt32LE(((t.length << 3) | 2) >>> 0, ptrWord * 8 + 4);
    t.copy(seg, textAt * 8);
    textAt += textWords[i];
  });
  const newCount = count + 1;
  const newHeaderWords = Math.ceil((4 + 4 * newCount) / 8);
  const header = Buffer.alloc(newHeaderWords * 8);
  header.writeUInt32LE(newCount - 1, 0);
  sizes.forEach((w, i) => header.writeUInt32LE(w, 4 + 4 * i));
  header.writeUInt32LE(words, 4 + 4 * count);
  const body = Buffer.from(buf.subarray(headerWords * 8));
  const slotInBody = slot - headerWords * 8;
  // A far pointer (kind 2, one-word landing pad at word 0 of the new segment).
  body.writeUInt32LE(2, slotInBody);
  body.writeUInt32LE(count, slotInBody + 4);
  return Buffer.concat([header, body, seg]);
}

function readStdin() {
  const chunks = [];
  for (;;) {
    const chunk = Buffer.alloc(1 << 20);
    let n;
    try {
      n = fs.readSync(0, chunk, 0, chunk.length, null);
    } catch (e) {
      if (e.code === "EAGAIN") continue;
      throw e;
    }
    if (n === 0) break;
    chunks.push(chunk.subarray(0, n));
  }
  return Buffer.concat(chunks);
}

function main() {
  let args = process.argv.slice(2);
  if (args[0] !== "serve" || !args.includes("-")) {
    // Not Miniflare's serve (`workerd --version` and the like): run workerd as it is.
    const child = spawn(workerdBin, args, { stdio: "inherit" });
    child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
    return;
  }
  let config = readStdin();
  if (heapMb > 0) {
    const patched = withV8Flags(config, [`--max-old-space-size=${heapMb}`]);
    if (patched) config = patched;
    else say("could not add the heap cap to workerd's config; running without it");
  }
  // Ports that workerd reported on the control pipe, to bind again after a restart.
  const ports = new Map();
  const control = fs.createWriteStream(null, { fd: 3 });
  const deaths = [];
  let stopping = false;
  let child;
  let oom = false;

  const start = (first) => {
    oom = false;
    child = spawn("setpriv", ["--pdeathsig", "KILL", "--", workerdBin, ...args], {
      stdio: ["pipe", "pipe", "pipe", "pipe"],
    });
    child.stdin.end(config);
    // V8's fatal message goes to stdout, other errors to stderr.
    for (const [from, to] of [[child.stdout, process.stdout], [child.stderr, process.stderr]]) {
      from.on("data", (d) => {
        if (/Reached heap limit|heap out of memory/.test(d.toString())) oom = true;
        to.write(d);
      });
    }
    let pending = "";
    child.stdio[3].on("data", (d) => {
      if (first) control.write(d);
      pending += d.toString();
      let nl;
      while ((nl = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        try {
          const event = JSON.parse(line);
          if (event.event === "listen" && event.socket) ports.set(event.socket, event.port);
          if (event.event === "listen-inspector") ports.set("\0inspector", event.port);
        } catch {
          // Not a JSON line: passed on above, nothing to remember.
        }
      }
    });
    child.on("exit", (code, signal) => {
      if (stopping) return process.exit(code ?? 0);
      const now = Date.now();
      deaths.push(now);
      while (deaths.length && now - deaths[0] > RESTART_WINDOW_MS) deaths.shift();
      const why = oom
        ? `an isolate reached the ${heapMb} MB heap cap (THINK_LOCAL_HEAP_MB), most likely model-written code that allocates without bound`
        : `workerd stopped (${signal ?? "exit " + code})`;
      if (deaths.length > MAX_RESTARTS) {
        say(`${why}; it stopped ${deaths.length} times within a minute, so it is not restarted again`);
        return process.exit(code ?? 1);
      }
      say(`${why}; restarting it (durable recovery settles the interrupted turn)`);
      args = args.map((a) => {
        const m = /^--socket-addr=([^=]+)=(.*):0$/.exec(a);
        if (m && ports.has(m[1])) return `--socket-addr=${m[1]}=${m[2]}:${ports.get(m[1])}`;
        const i = /^--inspector-addr=(.*):0$/.exec(a);
        if (i && ports.has("\0inspector")) return `--inspector-addr=${i[1]}:${ports.get("\0inspector")}`;
        return a;
      });
      start(false);
    });
  };
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) {
    process.on(signal, () => {
      stopping = true;
      child?.kill(signal);
    });
  }
  start(true);
}

if (process.argv[1] && fs.realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) main();
