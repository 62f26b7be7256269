//! The compatibility decomposition (NFKD) of one character, for the Unicode matching level
//! (`matcher::fold_char`). In the Worker it is the platform's `String.prototype.normalize`,
//! on the host (unit tests, native embedders) the `unicode-normalization` crate, a host-only
//! dependency.
//!
//! Measured reason (README, "Other figures"): the crate's decomposition tables were 97,252 B
//! of the wasm's data section, 47,482 B of its deflate, for a fallback level that V8's own
//! ICU tables answer. Over every code point from U+0080 up, `decompose_compatible` and a
//! one-character `normalize("NFKD")` agree except on 68 code points that the crate's and
//! Node's Unicode data assign differently (letters added in the newest Unicode version).

/// Calls `out` with each character of the NFKD form of `c`.
#[cfg(not(target_arch = "wasm32"))]
pub(super) fn decompose_compatible(c: char, out: &mut dyn FnMut(char)) {
    unicode_normalization::char::decompose_compatible(c, out)
}

/// How many decompositions the Worker keeps, so that a file of one script crosses into JS
/// once per distinct character rather than once per character.
#[cfg(target_arch = "wasm32")]
const CACHE_ENTRIES: usize = 4096;

#[cfg(target_arch = "wasm32")]
thread_local! {
    static CACHE: std::cell::RefCell<std::collections::HashMap<char, Box<str>>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// Calls `out` with each character of the NFKD form of `c`.
#[cfg(target_arch = "wasm32")]
pub(super) fn decompose_compatible(c: char, out: &mut dyn FnMut(char)) {
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= CACHE_ENTRIES && !cache.contains_key(&c) {
            cache.clear();
        }
        let form = cache.entry(c).or_insert_with(|| {
            let mut buf = [0u8; 4];
            let js = js_sys::JsString::from(&*c.encode_utf8(&mut buf)).normalize("NFKD");
            String::from(js).into_boxed_str()
        });
        form.chars().for_each(out);
    })
}
