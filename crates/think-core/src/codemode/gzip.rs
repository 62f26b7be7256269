//! The gzip framing of `compressFile`/`decompressFile` around `flate2`'s raw deflate: the
//! header, the CRC-32 and the size trailer, and members one after another. The bytes written
//! and read, the errors and the output limit are those of `flate2::write::GzEncoder` and
//! `flate2::read::MultiGzDecoder` (the tests compare them over truncations and corruptions).
//!
//! Measured reason (BENCHMARKS.md, "Sizes"): `flate2`'s gzip layer brings `crc32fast`, whose
//! slice-by-16 table is 16,384 B of incompressible data in the wasm; this CRC is computed
//! from a 1 KB table, and `flate2`'s gz code is left out.

use std::io::{self, ErrorKind, Read, Write};

/// The gzip header `GzEncoder` writes at the default level: no flags, no time, XFL 0,
/// OS 255 (unknown).
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
const FHCRC: u8 = 1 << 1;
const FEXTRA: u8 = 1 << 2;
const FNAME: u8 = 1 << 3;
const FCOMMENT: u8 = 1 << 4;
const FRESERVED: u8 = 0xe0;
/// The longest file name or comment a header may carry.
const MAX_HEADER_FIELD: usize = 65535;

/// `bytes` gzipped at the default level.
pub fn compress(bytes: &[u8]) -> io::Result<Vec<u8>> {
    let mut enc =
        flate2::write::DeflateEncoder::new(HEADER.to_vec(), flate2::Compression::default());
    enc.write_all(bytes)?;
    enc.flush()?;
    let mut out = enc.finish()?;
    out.extend_from_slice(&crc32(bytes).to_le_bytes());
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    Ok(out)
}

/// The data of every gzip member of `input`, stopping once `limit` bytes are out (what is
/// past the limit is then not read, nor checked).
pub fn decompress(mut input: &[u8], limit: usize) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        header(&mut input)?;
        let mut body = flate2::bufread::DeflateDecoder::new(input);
        let (mut crc, mut amount) = (!0u32, 0u32);
        loop {
            if out.len() >= limit {
                return Ok(out);
            }
            let start = out.len();
            out.resize(start + (limit - start).min(32 * 1024), 0);
            let n = body.read(&mut out[start..])?;
            out.truncate(start + n);
            if n == 0 {
                break;
            }
            crc = crc_update(crc, &out[start..]);
            amount = amount.wrapping_add(n as u32);
        }
        input = body.into_inner();
        let trailer = take(&mut input, 8)?;
        let stored = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
        let size = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
        if stored != !crc || size != amount {
            return Err(corrupt());
        }
        if input.is_empty() {
            return Ok(out);
        }
    }
}

/// Reads one member's header off `input`.
fn header(input: &mut &[u8]) -> io::Result<()> {
    let fixed = take(input, 10)?;
    if fixed[0] != 0x1f || fixed[1] != 0x8b || fixed[2] != 8 || fixed[3] & FRESERVED != 0 {
        return Err(io::Error::new(ErrorKind::InvalidInput, "invalid gzip header"));
    }
    let flags = fixed[3];
    let mut crc = crc_update(!0, fixed);
    if flags & FEXTRA != 0 {
        let len = take(input, 2)?;
        crc = crc_update(crc, len);
        let extra = take(input, u16::from_le_bytes([len[0], len[1]]) as usize)?;
        crc = crc_update(crc, extra);
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            let Some(end) = input.iter().position(|&b| b == 0) else {
                return Err(if input.len() > MAX_HEADER_FIELD { too_long() } else { eof() });
            };
            if end > MAX_HEADER_FIELD {
                return Err(too_long());
            }
            crc = crc_update(crc, &input[..=end]);
            *input = &input[end + 1..];
        }
    }
    if flags & FHCRC != 0 {
        let stored = take(input, 2)?;
        if u16::from_le_bytes([stored[0], stored[1]]) != !crc as u16 {
            return Err(corrupt());
        }
    }
    Ok(())
}

/// The next `n` bytes of `input`, or the error a short read gives.
fn take<'a>(input: &mut &'a [u8], n: usize) -> io::Result<&'a [u8]> {
    if input.len() < n {
        *input = &[];
        return Err(eof());
    }
    let (head, rest) = input.split_at(n);
    *input = rest;
    Ok(head)
}

fn eof() -> io::Error {
    ErrorKind::UnexpectedEof.into()
}

fn too_long() -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, "gzip header field too long")
}

fn corrupt() -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, "corrupt gzip stream does not have a matching checksum")
}

/// The CRC-32 (IEEE, reflected) table, built at compile time.
const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// Continues a CRC-32 register (start from `!0`, finish with `!`) over `bytes`.
fn crc_update(mut crc: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        crc = CRC_TABLE[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// The CRC-32 of `bytes`.
fn crc32(bytes: &[u8]) -> u32 {
    !crc_update(!0, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `flate2`'s own decoder gives, as the archive code called it.
    fn theirs(input: &[u8], limit: usize) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(input)
            .take(limit as u64)
            .read_to_end(&mut out)
            .map(|_| out)
            .map_err(|e| e.to_string())
    }

    fn ours(input: &[u8], limit: usize) -> Result<Vec<u8>, String> {
        decompress(input, limit).map_err(|e| e.to_string())
    }

    fn flate2_gzip(bytes: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(bytes).unwrap();
        enc.flush().unwrap();
        enc.finish().unwrap()
    }

    fn samples() -> Vec<Vec<u8>> {
        let mut seed = 1u32;
        let noise: Vec<u8> = (0..70_000)
            .map(|_| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (seed >> 16) as u8
            })
            .collect();
        vec![
            Vec::new(),
            b"hello".to_vec(),
            b"abc".repeat(50_000),
            noise,
            (0..=255u8).cycle().take(100_000).collect(),
        ]
    }

    #[test]
    fn compresses_byte_for_byte_as_gz_encoder() {
        for s in samples() {
            assert_eq!(compress(&s).unwrap(), flate2_gzip(&s), "len {}", s.len());
        }
    }

    #[test]
    fn decompresses_as_multi_gz_decoder() {
        let samples = samples();
        let a = flate2_gzip(&samples[1]);
        let b = flate2_gzip(&samples[2]);
        // A member with every optional header field, and its header CRC.
        let mut fancy = Vec::new();
        let mut enc = flate2::GzBuilder::new()
            .filename("f.txt")
            .comment("a comment")
            .extra(vec![1, 2, 3])
            .mtime(7)
            .write(&mut fancy, flate2::Compression::best());
        enc.write_all(b"fancy").unwrap();
        enc.finish().unwrap();
        let mut with_hcrc = fancy.clone();
        with_hcrc[3] |= FHCRC;
        let end = 10 + 2 + 3 + 6 + 10;
        let hcrc = !crc_update(!0, &with_hcrc[..end]) as u16;
        with_hcrc.splice(end..end, hcrc.to_le_bytes());
        let mut inputs = vec![a.clone(), [a.clone(), b.clone()].concat(), fancy, with_hcrc];
        inputs.push([a.clone(), b"garbage!!!!!".to_vec()].concat());
        inputs.push([a.clone(), vec![0]].concat());
        inputs.push(b"not gzip at all".to_vec());
        let mut long_name = HEADER.to_vec();
        long_name[3] = FNAME;
        long_name.extend(std::iter::repeat_n(b'n', MAX_HEADER_FIELD + 1));
        inputs.push(long_name.clone());
        long_name.push(0);
        inputs.push(long_name);
        for input in &inputs {
            for limit in [usize::MAX, 3, samples[2].len() + 5] {
                assert_eq!(ours(input, limit), theirs(input, limit), "limit {limit}");
            }
        }
        // Every truncation and a flipped bit at every position of a two-member stream.
        let two = [flate2_gzip(b"first member"), flate2_gzip(b"second")].concat();
        for cut in 0..two.len() {
            assert_eq!(ours(&two[..cut], usize::MAX), theirs(&two[..cut], usize::MAX), "cut {cut}");
        }
        for at in 0..two.len() {
            let mut bad = two.clone();
            bad[at] ^= 0x10;
            assert_eq!(ours(&bad, usize::MAX), theirs(&bad, usize::MAX), "flip {at}");
        }
    }
}
