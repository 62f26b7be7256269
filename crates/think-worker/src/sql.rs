//! `Sql` over the Durable Object's SQLite (`ctx.storage.sql`).
//!
//! Every statement crosses from wasm into JavaScript and back, and the crossing, not SQLite,
//! is what a workspace operation mostly costs. So a statement is one call into a small JS
//! helper: the bindings go in packed in one byte buffer (read in place from wasm memory),
//! and the helper runs the statement and packs the whole result into one byte buffer
//! (strings as UTF-8 via the native `TextEncoder`), which it copies into a buffer in wasm
//! memory when it fits (else Rust copies it in with one `memcpy`), and Rust decodes it. The alternative, passing and reading values one by one through
//! wasm-bindgen, costs several crossings per value and encodes strings in a JS loop.
//!
//! A large value (a file's content, a long message row) does not go through the packed
//! buffers, which would hold a second copy of it in wasm memory next to the value itself:
//! a large text binding is passed on its own (JavaScript reads it straight out of wasm
//! memory), and a large result value is left out of the packed result and fetched by
//! itself into a buffer of its exact size.

use js_sys::{Function, Reflect, Uint8Array};
use wasm_bindgen::{closure::ScopedClosure, prelude::wasm_bindgen, JsCast, JsValue};

use think_core::store::{Row, Sql, SqlValue, StoreError};

#[wasm_bindgen(inline_js = r#"
import * as nodeCrypto from "node:crypto";
const encoder = new TextEncoder();
const SMALL = 1 << 16;
// Result values longer than this go out of band (tags 5 and 6), fetched by `takeLarge`.
// Bytes go out of band from a lower size: fetched as they are, they are copied into wasm
// once, where packing them copies them twice more (a file's text read as
// `CAST(content AS BLOB)` is the common case).
const LARGE = 1 << 16;
const LARGE_BYTES = 1 << 12;
// Text results longer than this (file texts, long messages) are encoded into the caller's
// scratch buffer in wasm memory when they fit (tag 8: offset and length there).
const SCRATCH_TEXT = 1 << 10;
let large = [];
const uniqueNames = new Map();
let buf = new Uint8Array(SMALL);
let view = new DataView(buf.buffer);
function room(pos, extra) {
  if (pos + extra <= buf.length) return;
  let size = buf.length * 2;
  while (size < pos + extra) size *= 2;
  const next = new Uint8Array(size);
  next.set(buf.subarray(0, pos));
  buf = next;
  view = new DataView(buf.buffer);
}
const decoder = new TextDecoder();
// As wasm-bindgen decodes a `&str`: a leading BOM is kept.
const bigDecoder = new TextDecoder("utf-8", { ignoreBOM: true });
// Values are packed as a tag (0 null, 1 integer, 2 real, 3 text, 4 blob) and a payload
// (f64, or u32 length + bytes), little-endian; tag 8 is text in the scratch buffer. A large value is left out: tag 5 (text) or
// 6 (blob) and its u32 index for `takeLarge` in results, tag 5 (text) or 7 (blob) alone for
// the `big` binding, a view of wasm memory: a blob is bound as that view, not copied into
// the JS heap (SQLite copies it), so a large row written as a blob under `CAST(? AS TEXT)`
// costs no JS string. Bindings arrive packed that way (a view of wasm memory); results go
// back as u32 columns, u32 rows, then the values.
function unpackParams(p, big) {
  // A view only for numbers: a read's one path binding needs none (a view per statement
  // was a tenth of this function).
  let pv = null;
  const out = [];
  let at = 0;
  while (at < p.length) {
    const tag = p[at];
    if (tag === 0) {
      out.push(null);
      at += 1;
    } else if (tag === 5) {
      out.push(bigDecoder.decode(big));
      at += 1;
    } else if (tag === 7) {
      out.push(big);
      at += 1;
    } else if (tag === 1 || tag === 2) {
      pv ??= new DataView(p.buffer, p.byteOffset, p.byteLength);
      out.push(pv.getFloat64(at + 1, true));
      at += 9;
    } else {
      const len = (p[at + 1] | (p[at + 2] << 8) | (p[at + 3] << 16) | (p[at + 4] << 24)) >>> 0;
      const from = at + 5;
      if (tag === 4) {
        out.push(p.slice(from, from + len));
      } else if (len <= 64) {
        // Short text: a loop beats a native decode call; bail out on non-ASCII.
        let s = "";
        let k = 0;
        for (; k < len && p[from + k] < 128; k++) s += String.fromCharCode(p[from + k]);
        out.push(k === len ? s : decoder.decode(p.subarray(from, from + len)));
      } else {
        out.push(decoder.decode(p.subarray(from, from + len)));
      }
      at = from + len;
    }
  }
  return out;
}
// Code Mode's and OAuth's digests (`src/platform/digest.rs`): the platform's native hashes
// (node:crypto, which the agent has under nodejs_compat, as the bash tool's node:zlib) are
// many times faster than SHA-256 in wasm, and cost no wasm code. The one-shot `hash` where
// node:crypto has it: in workerd it builds the same Hash object inside, so it only saves the
// JavaScript calls around the native hash.
const oneShot = typeof nodeCrypto.hash === "function" ? nodeCrypto.hash : null;
export function digestHex(algorithm, bytes) {
  return oneShot ? oneShot(algorithm, bytes, "hex") : nodeCrypto.createHash(algorithm).update(bytes).digest("hex");
}
export function takeLarge(i) {
  const v = large[i];
  large[i] = undefined;
  return typeof v === "string" ? encoder.encode(v) : v instanceof ArrayBuffer ? new Uint8Array(v) : new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}
// Whether a statement changed a row: workerd's `rowsWritten` counts the rows it wrote, their
// index entries and its triggers' writes, so it is 0 exactly when it changed none. `exec`
// runs a statement that returns no rows to its end before it returns (an error throws there),
// so the cursor is not iterated.
export function execChanged(sql, query, packedParams, big) {
  return sql.exec(query, ...unpackParams(packedParams, big)).rowsWritten > 0;
}
export function execPacked(sql, query, packedParams, big, scratch, head) {
  // Large values go out of band, so the buffer stays small; one that grew is not kept.
  if (buf.length > 4 * SMALL) { buf = new Uint8Array(SMALL); view = new DataView(buf.buffer); }
  large = [];
  let spos = 0;
  const cursor = sql.exec(query, ...unpackParams(packedParams, big));
  const names = cursor.columnNames;
  const cols = names.length;
  // Rows as objects (`toArray`), read in column order: workerd keeps memory for every
  // `raw()` cursor (hundreds of bytes each, never freed), but not for these. Duplicate
  // column names would collide in an object, so such results come through `raw()`. Whether
  // a query's names are unique is remembered per query text (and column count, which a
  // `SELECT *` changes with the schema).
  let known = uniqueNames.get(query);
  if (known === undefined || known.cols !== cols) {
    known = { cols, unique: new Set(names).size === cols };
    if (uniqueNames.size >= 512) uniqueNames.clear();
    uniqueNames.set(query, known);
  }
  const unique = known.unique;
  const all = unique ? cursor.toArray() : Array.from(cursor.raw());
  let pos = 8;
  const rows = all.length;
  for (let r = 0; r < rows; r++) {
    const row = all[r];
    for (let i = 0; i < cols; i++) {
      const v = unique ? row[names[i]] : row[i];
      if (v === null || v === undefined) {
        room(pos, 1);
        buf[pos++] = 0;
      } else if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") {
        const n = Number(v);
        room(pos, 9);
        buf[pos] = Number.isSafeInteger(n) ? 1 : 2;
        view.setFloat64(pos + 1, n, true);
        pos += 9;
      } else if (typeof v === "string" && v.length > SCRATCH_TEXT && v.length <= LARGE && v.length <= scratch.length - spos) {
        // Encoded straight into wasm memory: no JavaScript buffer, no copy out of one.
        // The first such text needs no view of its own (a read's file text is the only one).
        const { read, written } = encoder.encodeInto(v, spos === 0 ? scratch : scratch.subarray(spos));
        if (read === v.length) {
          room(pos, 9);
          buf[pos] = 8;
          view.setUint32(pos + 1, spos, true);
          view.setUint32(pos + 5, written, true);
          spos += written;
          pos += 9;
        } else {
          room(pos, 5);
          buf[pos] = 5;
          view.setUint32(pos + 1, large.length, true);
          large.push(v);
          pos += 5;
        }
      } else if ((typeof v === "string" && v.length > LARGE) || (typeof v === "object" && v.byteLength > LARGE_BYTES)) {
        room(pos, 5);
        buf[pos] = typeof v === "string" ? 5 : 6;
        view.setUint32(pos + 1, large.length, true);
        large.push(v);
        pos += 5;
      } else if (typeof v === "string") {
        const n = v.length;
        room(pos, 5 + n * 3);
        buf[pos] = 3;
        // Short ASCII strings (names, types, paths, a read's ~70-byte metadata) are copied
        // in a loop: cheaper than a native encodeInto call and the view it needs.
        let k = 0;
        if (n <= 128) {
          const at = pos + 5;
          for (; k < n; k++) {
            const c = v.charCodeAt(k);
            if (c > 127) break;
            buf[at + k] = c;
          }
        }
        if (k === n) {
          view.setUint32(pos + 1, n, true);
          pos += 5 + n;
        } else {
          const { written } = encoder.encodeInto(v, buf.subarray(pos + 5));
          view.setUint32(pos + 1, written, true);
          pos += 5 + written;
        }
      } else {
        const bytes = v instanceof ArrayBuffer ? new Uint8Array(v) : new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
        room(pos, 5 + bytes.length);
        buf[pos] = 4;
        view.setUint32(pos + 1, bytes.length, true);
        buf.set(bytes, pos + 5);
        pos += 5 + bytes.length;
      }
    }
  }
  view.setUint32(0, cols, true);
  view.setUint32(4, rows, true);
  // Into wasm memory when it fits: its length is returned, and Rust reads it in place.
  if (pos <= head.length) {
    head.set(buf.subarray(0, pos));
    return pos;
  }
  return buf.subarray(0, pos);
}
"#)]
extern "C" {
    #[wasm_bindgen(js_name = execPacked, catch)]
    fn exec_packed(
        sql: &JsValue,
        query: &JsValue,
        params: &[u8],
        big: &[u8],
        scratch: &mut [u8],
        head: &mut [u8],
    ) -> Result<JsValue, JsValue>;

    #[wasm_bindgen(js_name = execChanged, catch)]
    fn exec_changed(
        sql: &JsValue,
        query: &JsValue,
        params: &[u8],
        big: &[u8],
    ) -> Result<bool, JsValue>;

    /// The UTF-8 (text) or bytes (blob) of out-of-band result value `i` of the last call.
    #[wasm_bindgen(js_name = takeLarge)]
    fn take_large(i: u32) -> Uint8Array;

    /// The `algorithm` digest of `bytes` (read in place from wasm memory) as lowercase hex,
    /// by the platform's native hash.
    #[wasm_bindgen(js_name = digestHex)]
    fn digest_hex(algorithm: &str, bytes: &[u8]) -> String;
}

/// The `algorithm` (a `node:crypto` name) digest of `bytes` as lowercase hex
/// (`think_core::platform::digest`).
pub(crate) fn native_digest_hex(algorithm: &str, bytes: &[u8]) -> String {
    digest_hex(algorithm, bytes)
}

/// Text bindings longer than this are passed on their own, not packed (JavaScript decodes
/// them to a string).
const LARGE_PARAM: usize = 1 << 16;
/// Blob bindings longer than this are passed on their own: bound as a view of wasm memory,
/// they cost no copy into the packed buffer and none out of it (SQLite copies them).
const LARGE_BLOB_PARAM: usize = 1 << 12;
/// The scratch buffer text results are encoded into (see `execPacked`).
const SCRATCH_BYTES: usize = 1 << 16;
/// The buffer in wasm memory a packed result is copied into when it fits (most do: a read's
/// metadata, a `RETURNING` row), so that Rust reads it in place instead of copying it
/// out of a JavaScript buffer into a new vector.
const HEAD_BYTES: usize = 1 << 12;
/// Texts longer than this go into the scratch buffer when it has room (`SCRATCH_TEXT` in
/// `execPacked`); one that came packed instead makes the buffer be allocated.
const SCRATCH_TEXT: usize = 1 << 10;
/// Query texts whose JavaScript strings are kept ([`DoSql::query`]), and the longest kept.
const QUERY_CACHE: usize = 32;
const QUERY_CACHE_BYTES: usize = 4 << 10;

/// `Sql` over `ctx.storage.sql`, with `transactionSync` for atomic groups.
pub struct DoSql {
    /// `ctx.storage.sql`.
    sql: JsValue,
    /// `ctx.storage`, for `transactionSync`.
    storage: JsValue,
    /// Where JavaScript encodes long text results, in wasm memory.
    scratch: std::cell::RefCell<Vec<u8>>,
    /// Where JavaScript copies a packed result that fits, in wasm memory.
    head: std::cell::RefCell<Vec<u8>>,
    /// The JavaScript strings of recent query texts, and the slot the next one replaces.
    queries: std::cell::RefCell<(Vec<KeptQuery>, usize)>,
}

/// A query text and its JavaScript string ([`DoSql::with_query`]).
type KeptQuery = (Box<str>, JsValue);

impl DoSql {
    /// The database of the object whose state this is.
    pub fn new(state: &worker::State) -> Self {
        let storage = state.storage();
        let raw: &JsValue = storage.as_raw().as_ref();
        let sql: JsValue = AsRef::<JsValue>::as_ref(&storage.sql()).clone();
        Self {
            sql,
            storage: raw.clone(),
            scratch: Default::default(),
            head: Default::default(),
            queries: Default::default(),
        }
    }

    /// Calls `f` with `sql` as a JavaScript string, the same string each time a recent query
    /// text comes again. A new string per call cost about 1 µs of a 10 KB file's read (0.9 KB
    /// of query decoded here, then interned by workerd, whose statement cache is keyed by the
    /// interned string) and left as much V8 garbage; a kept string is interned already.
    fn with_query<R>(&self, sql: &str, f: impl FnOnce(&JsValue) -> R) -> R {
        let Ok(mut held) = self.queries.try_borrow_mut() else {
            return f(&JsValue::from_str(sql));
        };
        if sql.len() > QUERY_CACHE_BYTES {
            return f(&JsValue::from_str(sql));
        }
        let (kept, next) = &mut *held;
        let at = match kept.iter().position(|(q, _)| same_text(q, sql)) {
            Some(at) => at,
            None => {
                let entry = (Box::from(sql), JsValue::from_str(sql));
                if kept.len() < QUERY_CACHE {
                    kept.push(entry);
                    kept.len() - 1
                } else {
                    let at = *next;
                    kept[at] = entry;
                    *next = (at + 1) % QUERY_CACHE;
                    at
                }
            }
        };
        f(&kept[at].1)
    }
}

/// Whether `a` and `b` are the same text, compared eight bytes a step: `==` on strings is
/// wasm's byte-by-byte `memcmp`, and comparing a kept query of about 1 KB with the one asked
/// for showed as 2.5 % of the write row's loop (V8 profile).
fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let (wa, wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (wa.remainder(), wb.remainder());
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
    wa.zip(wb).all(|(x, y)| word(x) == word(y)) && ra == rb
}

/// The first text or blob binding large enough to be passed on its own, if any.
fn large_param(params: &[SqlValue]) -> Option<usize> {
    params.iter().position(|p| match p {
        SqlValue::Text(s) => s.len() > LARGE_PARAM,
        SqlValue::Blob(b) => b.len() > LARGE_BLOB_PARAM,
        _ => false,
    })
}

/// Packs bindings for `execPacked` (the layout of its results, without the header); the
/// binding at `big` is left out (tag 5 for text, 7 for a blob) and passed on its own.
fn pack(params: &[SqlValue], big: Option<usize>) -> Vec<u8> {
    let size: usize = params
        .iter()
        .enumerate()
        .map(|(i, p)| match p {
            _ if Some(i) == big => 1,
            SqlValue::Null => 1,
            SqlValue::Integer(_) | SqlValue::Real(_) => 9,
            SqlValue::Text(s) => 5 + s.len(),
            SqlValue::Blob(b) => 5 + b.len(),
        })
        .sum();
    let mut out = Vec::with_capacity(size);
    for (i, p) in params.iter().enumerate() {
        if Some(i) == big {
            // Text passed on its own is decoded to a string; anything else there is the
            // blob (a NULL placeholder for `exec_changed_blob`'s borrowed bytes).
            out.push(if matches!(p, SqlValue::Text(_)) { 5 } else { 7 });
            continue;
        }
        match p {
            SqlValue::Null => out.push(0),
            SqlValue::Integer(i) => {
                out.push(1);
                out.extend_from_slice(&(*i as f64).to_le_bytes());
            }
            SqlValue::Real(f) => {
                out.push(2);
                out.extend_from_slice(&f.to_le_bytes());
            }
            SqlValue::Text(s) => {
                out.push(3);
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            SqlValue::Blob(b) => {
                out.push(4);
                out.extend_from_slice(&(b.len() as u32).to_le_bytes());
                out.extend_from_slice(b);
            }
        }
    }
    out
}

/// Reads the buffer `execPacked` wrote; `large(i)` fetches out-of-band value `i`, and
/// `scratch` holds the texts it encoded there. `long_text` is set when a text came out of
/// band or packed that the scratch buffer could have held.
fn decode(
    buf: &[u8],
    scratch: &[u8],
    large: &mut dyn FnMut(u32) -> Vec<u8>,
    long_text: &mut bool,
) -> Result<Vec<Row>, StoreError> {
    let bad = || StoreError::Encoding("malformed result buffer".into());
    let mut pos = 0usize;
    let mut take = |n: usize| -> Result<&[u8], StoreError> {
        let s = buf.get(pos..pos + n).ok_or_else(bad)?;
        pos += n;
        Ok(s)
    };
    let u32_at = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
    let cols = u32_at(take(4)?);
    let rows = u32_at(take(4)?);
    let mut out = Vec::with_capacity(rows);
    for _ in 0..rows {
        let mut row = Vec::with_capacity(cols);
        for _ in 0..cols {
            let tag = take(1)?[0];
            row.push(match tag {
                0 => SqlValue::Null,
                1 | 2 => {
                    let b = take(8)?;
                    let f = f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                    if tag == 1 {
                        SqlValue::Integer(f as i64)
                    } else {
                        SqlValue::Real(f)
                    }
                }
                3 => {
                    let len = u32_at(take(4)?);
                    *long_text |= len > SCRATCH_TEXT;
                    SqlValue::Text(encoded_text(take(len)?))
                }
                4 => {
                    let len = u32_at(take(4)?);
                    SqlValue::Blob(take(len)?.to_vec())
                }
                8 => {
                    let at = u32_at(take(4)?);
                    let len = u32_at(take(4)?);
                    SqlValue::Text(encoded_text(scratch.get(at..at + len).ok_or_else(bad)?))
                }
                5 | 6 => {
                    let index = u32::try_from(u32_at(take(4)?)).map_err(|_| bad())?;
                    let bytes = large(index);
                    if tag == 5 {
                        *long_text |= bytes.len() <= SCRATCH_BYTES;
                        SqlValue::Text(String::from_utf8(bytes).map_err(|_| bad())?)
                    } else {
                        SqlValue::Blob(bytes)
                    }
                }
                _ => return Err(bad()),
            });
        }
        out.push(row);
    }
    Ok(out)
}

/// A text value as `execPacked` wrote it: the output of `TextEncoder` (`encodeInto` into a
/// buffer with room for all of it, checked by `read === v.length`) or ASCII copied by code
/// unit, so UTF-8 by construction and not checked again (a check of a 10 KB file's text cost
/// 3 % of a read). The bytes' bounds come from the buffer's lengths, which `decode` checks.
fn encoded_text(bytes: &[u8]) -> String {
    // SAFETY: see above; `TextEncoder` writes whole UTF-8 sequences only (lone surrogates
    // become U+FFFD), and the ASCII path writes bytes below 128.
    unsafe { String::from_utf8_unchecked(bytes.to_vec()) }
}

fn js_error(e: JsValue) -> StoreError {
    let msg = Reflect::get(&e, &"message".into()).ok().and_then(|m| m.as_string());
    StoreError::Sql(
        msg.map(|m| format!("Error: {m}"))
            .or_else(|| e.as_string())
            .unwrap_or_else(|| format!("{e:?}")),
    )
}

/// The binding of `params` passed on its own, if any, and its bytes (empty when none).
fn split_large(params: &[SqlValue]) -> (Option<usize>, &[u8]) {
    let big = large_param(params);
    let bytes: &[u8] = match big.map(|i| &params[i]) {
        Some(SqlValue::Text(s)) => s.as_bytes(),
        Some(SqlValue::Blob(b)) => b,
        _ => &[],
    };
    (big, bytes)
}

impl Sql for DoSql {
    fn exec(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>, StoreError> {
        let (big, big_bytes) = split_large(params);
        // Empty until a long text first comes back (an instance that never reads one, like
        // the short-lived ones at start, allocates none); borrowed unless a statement runs
        // inside another's call, which none does.
        let mut own = Vec::new();
        let mut held = self.scratch.try_borrow_mut();
        let scratch = match held.as_deref_mut() {
            Ok(s) => s,
            Err(_) => &mut own,
        };
        let mut own_head = Vec::new();
        let mut held_head = self.head.try_borrow_mut();
        let head = match held_head.as_deref_mut() {
            Ok(h) => {
                if h.is_empty() {
                    h.resize(HEAD_BYTES, 0);
                }
                h
            }
            Err(_) => &mut own_head,
        };
        let packed = self
            .with_query(sql, |query| {
                exec_packed(&self.sql, query, &pack(params, big), big_bytes, scratch, head)
            })
            .map_err(js_error)?;
        let packed: std::borrow::Cow<[u8]> = match packed.as_f64() {
            Some(len) => head
                .get(..len as usize)
                .ok_or_else(|| StoreError::Encoding("malformed result length".into()))?
                .into(),
            None => Uint8Array::from(packed).to_vec().into(),
        };
        // Each large value is copied once, into a buffer of its exact size.
        let mut large = |i: u32| take_large(i).to_vec();
        let mut long_text = false;
        let rows = decode(&packed, scratch, &mut large, &mut long_text);
        if long_text && scratch.len() < SCRATCH_BYTES {
            scratch.resize(SCRATCH_BYTES, 0);
        }
        rows
    }

    /// By workerd's `rowsWritten` (see `execChanged`): one crossing that returns a boolean,
    /// with no result to pack or decode.
    fn exec_changed(&self, sql: &str, params: &[SqlValue]) -> Result<bool, StoreError> {
        let (big, big_bytes) = split_large(params);
        self.with_query(sql, |query| exec_changed(&self.sql, query, &pack(params, big), big_bytes))
            .map_err(js_error)
    }

    /// The bytes are bound as a view of wasm memory (tag 7), not copied into the packed
    /// bindings or into a vector first.
    fn exec_changed_blob(
        &self,
        sql: &str,
        params: &[SqlValue],
        at: usize,
        bytes: &[u8],
    ) -> Result<bool, StoreError> {
        self.with_query(sql, |query| exec_changed(&self.sql, query, &pack(params, Some(at)), bytes))
            .map_err(js_error)
    }

    fn transaction(&self, f: &mut dyn FnMut() -> Result<(), StoreError>) -> Result<(), StoreError> {
        let tx: Function = Reflect::get(&self.storage, &"transactionSync".into())
            .ok()
            .and_then(|f| f.dyn_into::<Function>().ok())
            .ok_or_else(|| StoreError::Unavailable("transactionSync is not available".into()))?;
        let mut failure: Option<StoreError> = None;
        let outcome = {
            // transactionSync rolls back when its callback throws, so an Err is thrown.
            let mut body = || -> Result<JsValue, JsValue> {
                f().map_err(|e| {
                    let js = JsValue::from_str(&e.to_string());
                    failure = Some(e);
                    js
                })?;
                Ok(JsValue::UNDEFINED)
            };
            let closure =
                ScopedClosure::<dyn FnMut() -> Result<JsValue, JsValue>>::borrow_mut_aborting(
                    &mut body,
                );
            tx.call1(&self.storage, closure.as_js_value())
        };
        match (outcome, failure) {
            (_, Some(e)) => Err(e),
            (Ok(_), None) => Ok(()),
            (Err(e), None) => {
                Err(StoreError::Sql(e.as_string().unwrap_or_else(|| format!("{e:?}"))))
            }
        }
    }
}
