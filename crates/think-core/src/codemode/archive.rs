//! `state.createArchive` / `listArchive` / `extractArchive` (ustar, the format Think's shell
//! writes) and `compressFile` / `decompressFile` (gzip, pure-Rust deflate), over the agent's
//! `Workspace`, so R2 spill and the workspace limits apply to what they write.

use serde_json::{json, Value};

use super::connectors::ConnectorError;
use crate::workspace::{path, EntryType, FsError, Workspace};

/// The most bytes an archive, or a decompressed file, may hold: the isolate has 128 MB and
/// the data is in memory twice while it is built (a gzip bomb stops here too).
pub const MAX_ARCHIVE_BYTES: usize = 32 * 1024 * 1024;

const BLOCK: usize = 512;

fn too_big(what: &str) -> ConnectorError {
    ConnectorError::Failed(format!(
        "{what} would exceed {} MB, the limit for archives and decompressed files",
        MAX_ARCHIVE_BYTES >> 20
    ))
}

fn octal(buf: &mut [u8], value: u64) {
    let width = buf.len() - 1;
    let text = format!("{value:0width$o}");
    buf[..width].copy_from_slice(&text.as_bytes()[text.len() - width..]);
    buf[width] = 0;
}

/// One ustar header; names over 100 bytes go in the 155-byte prefix, split at a `/`.
fn header(name: &str, dir: bool, size: u64, mtime_ms: i64) -> Result<[u8; BLOCK], ConnectorError> {
    let mut h = [0u8; BLOCK];
    let (prefix, base) = if name.len() <= 100 {
        ("", name)
    } else {
        let split = name[..name.len().min(156)]
            .rfind('/')
            .filter(|&i| name.len() - i - 1 <= 100)
            .ok_or_else(|| {
            ConnectorError::Failed(format!("createArchive: path too long for tar: {name}"))
        })?;
        (&name[..split], &name[split + 1..])
    };
    h[..base.len()].copy_from_slice(base.as_bytes());
    octal(&mut h[100..108], if dir { 0o755 } else { 0o644 });
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], (mtime_ms.max(0) / 1000) as u64);
    h[156] = if dir { b'5' } else { b'0' };
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
    h[148..156].fill(b' ');
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    octal(&mut h[148..155], u64::from(sum));
    h[155] = b' ';
    Ok(h)
}

fn field(h: &[u8]) -> String {
    let end = h.iter().position(|&b| b == 0).unwrap_or(h.len());
    String::from_utf8_lossy(&h[..end]).trim().to_owned()
}

/// An entry read back from a tar: its relative path, whether it is a directory, its bytes.
struct TarEntry {
    path: String,
    dir: bool,
    bytes: Vec<u8>,
}

/// Whether a header's checksum (the byte sum with the checksum field as spaces) holds.
fn checksum_ok(h: &[u8]) -> bool {
    let sum: u32 = h
        .iter()
        .enumerate()
        .map(|(i, &b)| if (148..156).contains(&i) { 32 } else { u32::from(b) })
        .sum();
    u32::from_str_radix(field(&h[148..156]).trim(), 8) == Ok(sum)
}

fn parse(bytes: &[u8]) -> Result<Vec<TarEntry>, ConnectorError> {
    let not_tar = || ConnectorError::Failed("Not a tar archive (no valid header)".into());
    if !bytes.is_empty() && bytes.len() < BLOCK {
        return Err(not_tar());
    }
    let mut out = Vec::new();
    let mut at = 0;
    while at + BLOCK <= bytes.len() {
        let h = &bytes[at..at + BLOCK];
        if h.iter().all(|&b| b == 0) {
            break;
        }
        if !checksum_ok(h) {
            return Err(not_tar());
        }
        let size = u64::from_str_radix(field(&h[124..136]).trim(), 8)
            .map_err(|_| ConnectorError::Failed("Not a tar archive (bad size field)".into()))?
            as usize;
        let prefix = if &h[257..262] == b"ustar" { field(&h[345..500]) } else { String::new() };
        let name = field(&h[..100]);
        let path = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        at += BLOCK;
        let end = at.checked_add(size).filter(|&e| e <= bytes.len());
        let end = end.ok_or_else(|| ConnectorError::Failed("Truncated tar archive".into()))?;
        out.push(TarEntry { path, dir: h[156] == b'5', bytes: bytes[at..end].to_vec() });
        at += size.div_ceil(BLOCK) * BLOCK;
    }
    Ok(out)
}

fn entry_json(path: &str, dir: bool, size: usize) -> Value {
    json!({"path": path, "type": if dir { "directory" } else { "file" }, "size": if dir { 0 } else { size }})
}

async fn bytes_of(ws: &Workspace, p: &str) -> Result<Vec<u8>, ConnectorError> {
    ws.read_file_bytes(p)
        .await
        .map_err(ConnectorError::Fs)?
        .ok_or_else(|| ConnectorError::Fs(FsError::new(crate::workspace::Errno::NoEnt, "open", p)))
}

/// `createArchive({path, sources})`: each source (a file or a directory with everything
/// under it) as entries named by their path without the leading `/`.
pub async fn create(
    ws: &Workspace,
    dest: &str,
    sources: &[String],
) -> Result<Value, ConnectorError> {
    let mut tar = Vec::new();
    let mut entries = Vec::new();
    for source in sources {
        let root = ws.lstat(source).map_err(ConnectorError::Fs)?.ok_or_else(|| {
            ConnectorError::Fs(FsError::new(crate::workspace::Errno::NoEnt, "stat", source))
        })?;
        let mut items = vec![root];
        if items[0].kind == EntryType::Directory {
            let under = format!("{}/**", source.trim_end_matches('/'));
            items.extend(ws.glob(&under).map_err(ConnectorError::Fs)?);
        }
        for item in items {
            let name = item.path.trim_start_matches('/');
            let name = if name.is_empty() { "." } else { name };
            match item.kind {
                EntryType::Directory => {
                    tar.extend_from_slice(&header(name, true, 0, item.updated_at)?);
                    entries.push(entry_json(name, true, 0));
                }
                EntryType::File => {
                    let bytes = bytes_of(ws, &item.path).await?;
                    if tar.len() + bytes.len() + 2 * BLOCK > MAX_ARCHIVE_BYTES {
                        return Err(too_big("The archive"));
                    }
                    tar.extend_from_slice(&header(
                        name,
                        false,
                        bytes.len() as u64,
                        item.updated_at,
                    )?);
                    tar.extend_from_slice(&bytes);
                    tar.resize(tar.len().div_ceil(BLOCK) * BLOCK, 0);
                    entries.push(entry_json(name, false, bytes.len()));
                }
                // Think's archives hold files and directories only.
                EntryType::Symlink => {}
            }
        }
    }
    tar.resize(tar.len() + 2 * BLOCK, 0);
    ws.write_file_bytes(dest, &tar, "application/x-tar").await.map_err(ConnectorError::Fs)?;
    Ok(json!({"path": dest, "entries": entries, "bytesWritten": tar.len()}))
}

/// `listArchive({path})`: the entries, sorted by path.
pub async fn list(ws: &Workspace, p: &str) -> Result<Value, ConnectorError> {
    let mut entries = parse(&bytes_of(ws, p).await?)?;
    crate::platform::sort::sort_by(&mut entries, |a, b| a.path.cmp(&b.path));
    Ok(Value::Array(entries.iter().map(|e| entry_json(&e.path, e.dir, e.bytes.len())).collect()))
}

/// `extractArchive({path, destination})`: writes every entry under `destination`; an entry
/// whose path would leave it (`..`) is refused before anything is written.
pub async fn extract(ws: &Workspace, p: &str, destination: &str) -> Result<Value, ConnectorError> {
    let entries = parse(&bytes_of(ws, p).await?)?;
    let base = path::lexical(destination);
    let mut targets = Vec::new();
    for e in &entries {
        let target = path::lexical(&format!("{base}/{}", e.path));
        if !path::is_within(&target, &base) && target != base {
            return Err(ConnectorError::Failed(format!(
                "extractArchive: entry {:?} would land outside {base}",
                e.path
            )));
        }
        targets.push(target);
    }
    for (e, target) in entries.iter().zip(&targets) {
        if e.dir {
            ws.mkdir(target, true).map_err(ConnectorError::Fs)?;
        } else {
            ws.write_file_bytes(target, &e.bytes, "application/octet-stream")
                .await
                .map_err(ConnectorError::Fs)?;
        }
    }
    let listed: Vec<Value> =
        entries.iter().map(|e| entry_json(&e.path, e.dir, e.bytes.len())).collect();
    Ok(json!({"destination": destination, "entries": listed}))
}

/// `compressFile({path, destination?})`: gzip to `destination` (default `path.gz`).
pub async fn compress(
    ws: &Workspace,
    p: &str,
    dest: Option<&str>,
) -> Result<Value, ConnectorError> {
    let dest = dest.map_or_else(|| format!("{p}.gz"), str::to_owned);
    let bytes = bytes_of(ws, p).await?;
    let out = super::gzip::compress(&bytes)
        .map_err(|e| ConnectorError::Failed(format!("compressFile: {e}")))?;
    ws.write_file_bytes(&dest, &out, "application/gzip").await.map_err(ConnectorError::Fs)?;
    Ok(json!({"path": p, "destination": dest, "bytesWritten": out.len()}))
}

/// `decompressFile({path, destination?})`: gunzip to `destination` (default `path` without
/// `.gz`); output past [`MAX_ARCHIVE_BYTES`] is refused.
pub async fn decompress(
    ws: &Workspace,
    p: &str,
    dest: Option<&str>,
) -> Result<Value, ConnectorError> {
    let dest = match dest {
        Some(d) => d.to_owned(),
        None if p.to_ascii_lowercase().ends_with(".gz") => p[..p.len() - 3].to_owned(),
        None => p.to_owned(),
    };
    let bytes = bytes_of(ws, p).await?;
    let out = super::gzip::decompress(&bytes, MAX_ARCHIVE_BYTES + 1).map_err(|e| {
        ConnectorError::Failed(format!("decompressFile: {p} is not gzip data ({e})"))
    })?;
    if out.len() > MAX_ARCHIVE_BYTES {
        return Err(too_big("The decompressed file"));
    }
    ws.write_file_bytes(&dest, &out, "application/octet-stream")
        .await
        .map_err(ConnectorError::Fs)?;
    Ok(json!({"path": p, "destination": dest, "bytesWritten": out.len()}))
}
