//! Time bounds for the tools' adversarial tests, measured in the test thread's CPU time so
//! that other processes on a shared machine do not make them flaky (wall time where the
//! platform has no per-thread clock).

use std::time::Instant;

/// CPU seconds the calling thread has used (Linux: `/proc/thread-self/stat`).
fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the parenthesized command name; utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// Runs `f` and fails when it takes more than `secs` of CPU time; returns its result and
/// the time taken, for the report of worst times.
pub(crate) fn within<T>(secs: f64, what: &str, f: impl FnOnce() -> T) -> (T, f64) {
    let (cpu0, wall0) = (thread_cpu_seconds(), Instant::now());
    let out = f();
    let took = match (cpu0, thread_cpu_seconds()) {
        (Some(a), Some(b)) => b - a,
        _ => wall0.elapsed().as_secs_f64(),
    };
    println!("time bound: {what}: {took:.2} s (bound {secs} s)");
    assert!(took < secs, "{what} took {took:.2} s of CPU (bound {secs} s)");
    (out, took)
}
