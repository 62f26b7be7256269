//! The platform's natives for the core (`think_core::platform::natives`): `toUpperCase`,
//! `toLowerCase`, `normalize("NFKD")`, `parseFloat` and `node:crypto` digests.

use std::cell::RefCell;
use std::collections::HashMap;

use think_core::platform::digest::Algorithm;
use think_core::platform::natives::Natives;

/// How many decompositions are kept, so that a file of one script crosses into JS once per
/// distinct character rather than once per character.
const CACHE_ENTRIES: usize = 4096;

thread_local! {
    static NFKD: RefCell<HashMap<char, Box<str>>> = RefCell::new(HashMap::new());
}

/// The Worker's natives.
pub struct JsNatives;

impl Natives for JsNatives {
    fn to_uppercase(&self, s: &str) -> String {
        String::from(js_sys::JsString::from(s).to_upper_case())
    }

    fn to_lowercase(&self, s: &str) -> String {
        String::from(js_sys::JsString::from(s).to_lower_case())
    }

    fn decompose_compatible(&self, c: char, out: &mut dyn FnMut(char)) {
        NFKD.with(|cache| {
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

    fn parse_decimal(&self, s: &str) -> f64 {
        js_sys::parse_float(s)
    }

    fn digest_hex(&self, algorithm: Algorithm, bytes: &[u8]) -> String {
        super::sql::native_digest_hex(algorithm.name(), bytes)
    }
}

/// Installs [`JsNatives`] (idempotent).
pub fn install() {
    think_core::platform::natives::install(&JsNatives);
}
