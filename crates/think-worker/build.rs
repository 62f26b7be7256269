//! Build-time checks. The wasm-bindgen crate and the wasm-bindgen CLI that
//! scripts/wasm-build.sh runs must be the same version, or the generated JS glue silently
//! mismatches the wasm module. The scripts install the CLI version found in Cargo.lock; this
//! check makes sure that version is the exact pin in Cargo.toml, so `cargo update` cannot
//! drift it.

use std::fs;

fn pinned_in_manifest(manifest: &str) -> Option<String> {
    manifest.lines().find_map(|line| {
        let line = line.trim();
        let rest = line.strip_prefix("wasm-bindgen")?.trim_start();
        let rest = rest.strip_prefix('=')?.trim_start();
        let start = rest.find("\"=")? + 2;
        let end = start + rest[start..].find('"')?;
        Some(rest[start..end].to_owned())
    })
}

fn locked_version(lock: &str) -> Option<String> {
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "name = \"wasm-bindgen\"" {
            let version = lines.next()?.trim().strip_prefix("version = \"")?.strip_suffix('"')?;
            return Some(version.to_owned());
        }
    }
    None
}

fn main() {
    // In this repository the pin is in the workspace's manifest and the lock beside it. A
    // packaged copy of the crate (a dependency of another project) has neither: the
    // project's own lock pins what it builds with, and the check is this repository's.
    let (manifest, lock) = ("../../Cargo.toml", "../../Cargo.lock");
    println!("cargo:rerun-if-changed={manifest}");
    println!("cargo:rerun-if-changed={lock}");
    let Ok(manifest) = fs::read_to_string(manifest) else { return };
    if !manifest.contains("[workspace]") {
        return;
    }
    let Some(pinned) = pinned_in_manifest(&manifest) else {
        panic!("the workspace Cargo.toml must pin wasm-bindgen exactly (wasm-bindgen = \"=X.Y.Z\"): the CLI must match it");
    };
    // Cargo.lock is absent only before the first resolution; cargo then writes it from the pin.
    if let Ok(lock) = fs::read_to_string(lock) {
        if let Some(locked) = locked_version(&lock) {
            if locked != pinned {
                panic!("wasm-bindgen is pinned to {pinned} in Cargo.toml but Cargo.lock has {locked}; run `cargo update -p wasm-bindgen`");
            }
        }
    }
}
