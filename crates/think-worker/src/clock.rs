//! `Clock` over `Date.now`, `setTimeout` and `crypto.getRandomValues`.

use async_trait::async_trait;
use std::time::Duration;

use think_core::platform::Clock;

/// `Clock` over `Date.now`, `setTimeout` and `crypto.getRandomValues`.
pub struct WorkerClock;

#[async_trait(?Send)]
impl Clock for WorkerClock {
    fn now_ms(&self) -> f64 {
        js_sys::Date::now()
    }

    async fn sleep(&self, ms: u64) {
        worker::Delay::from(Duration::from_millis(ms)).await;
    }

    fn random_bytes(&self, buf: &mut [u8]) {
        // crypto.getRandomValues cannot fail for buffers this small; fall back to time if it does.
        if getrandom::fill(buf).is_err() {
            let seed = js_sys::Date::now() as u64;
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (seed.rotate_left(i as u32 % 64) ^ (i as u64 * 0x9e37_79b9)) as u8;
            }
        }
    }
}
