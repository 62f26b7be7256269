// The floor column of `npm run bench`: the bare SQL statements a workload needs at minimum,
// issued from plain JavaScript against the same Durable Object SQLite and the same table
// (`cf_wsfile_default`, which the think-rs Workspace created and the set-up filled). No
// wasm, no tool logic, no output formatting: what is left is SQLite and the JS API around
// it, the physical limit a tool implementation can approach. The table's triggers (the
// workspace's version history, created with the table) are dropped before the timed loop,
// so that the floor's statements run bare: with them, a floor edit's UPDATE fired the
// history triggers, about 45 % of its SQLite instructions (callgrind over rusqlite).
//
// Per tool, per input:
// - write: one INSERT … ON CONFLICT DO UPDATE (parent directories are not created);
// - read:  one SELECT of the content;
// - edit:  one SELECT of the content, the replacement in JS, one UPDATE;
// - grep:  one range scan fetching every file's path and text (no matching);
// - find:  one range scan of path and type (with the literal suffix in SQL when the pattern
//          is `**/*<suffix>`);
// - list:  one SELECT of a directory page (name, type, size);
// - bash:  the snapshot: one range scan fetching every file's path and text.
const T = "cf_wsfile_default";

const parentOf = (p) => {
  const i = p.lastIndexOf("/");
  return i <= 0 ? "/" : p.slice(0, i);
};

const FLOORS = {
  write(sql, input) {
    const p = input.path;
    const now = Date.now();
    sql.exec(
      `INSERT INTO ${T} (path, parent_path, name, type, mime_type, size, storage, created_at, modified_at, content)
       VALUES (?, ?, ?, 'file', 'text/plain', ?, 'inline', ?, ?, ?)
       ON CONFLICT(path) DO UPDATE SET content = excluded.content, size = excluded.size,
         modified_at = excluded.modified_at`,
      p,
      parentOf(p),
      p.slice(p.lastIndexOf("/") + 1),
      input.content.length,
      now,
      now,
      input.content,
    );
    return 1;
  },
  read(sql, input) {
    const rows = sql.exec(`SELECT content FROM ${T} WHERE path = ?`, input.path).toArray();
    return rows.length ? rows[0].content.length : 0;
  },
  edit(sql, input) {
    const rows = sql.exec(`SELECT content FROM ${T} WHERE path = ?`, input.path).toArray();
    if (!rows.length) return 0;
    const text = rows[0].content;
    const at = text.indexOf(input.old_string);
    if (at < 0) return 0;
    const next = text.slice(0, at) + input.new_string + text.slice(at + input.old_string.length);
    sql.exec(`UPDATE ${T} SET content = ?, size = ?, modified_at = ? WHERE path = ?`, next, next.length, Date.now(), input.path);
    return 1;
  },
  grep(sql) {
    let n = 0;
    for (const row of sql.exec(`SELECT path, content FROM ${T} WHERE path > '/' AND type = 'file' ORDER BY path`)) {
      n += row.content.length;
    }
    return n;
  },
  find(sql, input) {
    const m = /^\*\*\/\*([^*?[\]{}]+)$/.exec(input.pattern);
    const rows = m
      ? sql.exec(`SELECT path, type FROM ${T} WHERE path > '/' AND substr(path, ?) = ? ORDER BY path`, -m[1].length, m[1]).toArray()
      : sql.exec(`SELECT path, type FROM ${T} WHERE path > '/' ORDER BY path`).toArray();
    return rows.length;
  },
  list(sql, input) {
    return sql
      .exec(`SELECT name, type, size FROM ${T} WHERE parent_path = ? ORDER BY type, name LIMIT ? OFFSET ?`, input.path, input.limit ?? 1000, input.offset ?? 0)
      .toArray().length;
  },
  bash(sql) {
    return FLOORS.grep(sql);
  },
};

/**
 * Runs `inputs` (a JSON array) through the floor of `tool`, `iterations` times, and returns
 * `{ms}` as JSON, `ms` per iteration; `{unsupported: true}` for a tool without a floor.
 */
export function floorRun(sql, tool, inputsJson, iterations) {
  const floor = FLOORS[tool];
  if (!floor) return JSON.stringify({ unsupported: true });
  for (const { name } of sql.exec("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", T).toArray()) {
    sql.exec(`DROP TRIGGER "${name}"`);
  }
  const batches = Array.from({ length: Math.max(1, iterations) }, () => JSON.parse(inputsJson));
  let sink = 0;
  const start = Date.now();
  for (const batch of batches) for (const input of batch) sink += floor(sql, input);
  const ms = (Date.now() - start) / batches.length;
  return JSON.stringify({ ms, sink });
}
