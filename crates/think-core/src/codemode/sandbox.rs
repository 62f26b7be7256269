//! The sandbox seam, shared by every feature that runs untrusted JavaScript (the `execute`
//! tool, skill scripts in `src/skills/js_script.rs`; extensions and `browser_execute` later):
//! run one piece of code in a fresh isolate whose only way out is [`Dispatcher::call`] into
//! the host, within limits.
//! The Worker implements it with Worker Loader (`src/wasm/loader.rs`); host tests script
//! the calls a program would make.
//!
//! Creating an isolate makes V8 drop the baseline-compiled code of every wasm module in the
//! process (workerd signals memory pressure to each new isolate's heap), so the agent's code
//! that runs after a pass starts is compiled again before it runs. The async functions a pass
//! resumes through therefore keep what runs before the sandbox's await in functions of their
//! own (never inlined): the body resumed, compiled again in full, stays small
//! (BENCHMARKS.md, issue 41).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use async_trait::async_trait;
use futures::channel::oneshot;
use futures::FutureExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One global of the sandbox (`state`, `tools`, …) and the methods it has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Namespace {
    /// The global's name.
    pub name: String,
    /// Its methods; each is `async (args) => result` in the sandbox.
    pub methods: Vec<String>,
}

/// A saved snippet as the sandbox loads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnippetModule {
    /// Its name.
    pub name: String,
    /// Its normalized body.
    pub body: String,
}

/// An extra ES module loaded as is, which the body can `import("./<name>")` (a skill's
/// `.js`/`.mjs` script).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxModule {
    /// Its module name in the isolate (ends in `.js`; not `sandbox.js`, `user.js`, `snippet_N.js`).
    pub name: String,
    /// Its source.
    pub source: String,
}

/// One pass: code to run and what it may reach.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxRequest {
    /// Names the isolate (unique per pass).
    pub id: String,
    /// The body of an async function; its return value is the result.
    pub body: String,
    /// Globals backed by the dispatcher. `codemode.step` is provided by the sandbox itself.
    pub namespaces: Vec<Namespace>,
    /// Saved snippets `codemode.run(name, input)` can run, each an async function body with
    /// `input` in scope.
    pub snippets: Vec<SnippetModule>,
    /// Extra modules the body may import; `execute` sends none.
    #[serde(default)]
    pub modules: Vec<SandboxModule>,
    /// Wall-clock limit of the pass inside the isolate; also its CPU limit where supported.
    pub timeout_ms: u64,
    /// Lets the pass enter the isolate of earlier passes that named the same key, which keeps
    /// what their code left in its globals and modules (an extension's isolate, kept like
    /// Think's). The key must name the modules and body exactly (they are not loaded again);
    /// what differs per pass travels in `input`. `None` (Code Mode) is a fresh isolate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reuse: Option<String>,
    /// The pass's input, in scope of the body as `__think_input` (an extension's operation).
    #[serde(default)]
    pub input: Value,
    /// What may leave the isolate, enforced inside it before anything is copied out.
    #[serde(flatten)]
    pub output: OutputLimits,
}

/// Bounds on what a pass hands back, applied by the sandbox runtime so that a 50 MB result or
/// log never reaches the host's memory, the journal's rows or the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputLimits {
    /// The result's JSON, in UTF-16 units; over it the pass fails with a message that says so.
    pub max_result_chars: usize,
    /// All `console.*` lines together; lines past it are dropped and counted.
    pub max_log_chars: usize,
}

/// Default bound of a pass's logs: far above what a model reads, far below a 2 MB row.
pub const MAX_LOG_CHARS: usize = 100_000;

impl Default for OutputLimits {
    fn default() -> Self {
        Self { max_result_chars: super::MAX_DURABLE_VALUE_BYTES, max_log_chars: MAX_LOG_CHARS }
    }
}

/// How a pass ended when the code itself ran.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxOutcome {
    /// The returned value (JSON), or the message of what the code threw.
    pub result: Result<Value, String>,
    /// `console.*` lines, in order.
    pub logs: Vec<String>,
}

/// Why a pass did not run to an outcome.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SandboxError {
    /// No isolate could be made (no loader binding, the loader refused).
    Unavailable(String),
    /// The code did not load: a syntax error, with the parser's message and position.
    Syntax(String),
    /// The pass ran past its time (or CPU) limit and was stopped.
    Timeout(u64),
    /// The isolate failed in some other way (out of memory, crashed).
    Crashed(String),
}

impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SandboxError::Unavailable(e) => write!(f, "The sandbox is unavailable: {e}"),
            SandboxError::Syntax(e) => write!(f, "SyntaxError: {e}"),
            SandboxError::Timeout(ms) => write!(f, "Execution timed out after {ms} ms"),
            SandboxError::Crashed(e) => write!(f, "The sandbox failed: {e}"),
        }
    }
}

impl std::error::Error for SandboxError {}

/// One call from the sandbox into the host.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRequest {
    /// The global (`state`, `tools`, `codemode`).
    pub connector: String,
    /// The method on it.
    pub method: String,
    /// Its one argument (`null` when the code passed none).
    pub args: Value,
    /// Where in the code the call was made (`line:column`), so replay can tell apart calls
    /// started in parallel.
    pub site: String,
}

/// Why a call did not return a value.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CallError {
    /// The call failed; the code sees a thrown `Error` with this message.
    Failed(String),
    /// The run is paused for approval; the code sees a thrown error and its result is ignored.
    Paused,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Failed(e) => f.write_str(e),
            CallError::Paused => f.write_str("The execution is paused waiting for approval."),
        }
    }
}

impl std::error::Error for CallError {}

/// The host side of the connectors: the sandbox sends every call here.
#[async_trait(?Send)]
pub trait Dispatcher {
    /// Runs one call.
    async fn call(&self, call: CallRequest) -> Result<Value, CallError>;
}

/// Worker Loader isolates one object may have in flight at once (the platform's limit); the
/// Worker's sandbox counts every use (`execute` passes, skill scripts, extensions) against it.
pub const MAX_ISOLATES_IN_FLIGHT: usize = 10;

/// A FIFO counting semaphore: at most `n` holders at once, the rest wait in order.
pub struct Slots {
    free: Cell<usize>,
    waiters: RefCell<VecDeque<oneshot::Sender<()>>>,
}

/// A held slot; dropping it hands the slot to the next waiter.
pub struct SlotGuard<'a>(&'a Slots);

impl Slots {
    /// `n` slots (at least one).
    pub fn new(n: usize) -> Self {
        Self { free: Cell::new(n.max(1)), waiters: RefCell::default() }
    }

    /// A free slot now, if there is one (and nobody is waiting for it).
    pub fn try_acquire(&self) -> Option<SlotGuard<'_>> {
        (self.free.get() > 0).then(|| {
            self.free.set(self.free.get() - 1);
            SlotGuard(self)
        })
    }

    /// Waits for a slot, in arrival order.
    pub async fn acquire(&self) -> SlotGuard<'_> {
        if let Some(slot) = self.try_acquire() {
            return slot;
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.borrow_mut().push_back(tx);
        let mut waiting = Waiting { slots: self, rx: Some(rx) };
        if let Some(rx) = waiting.rx.as_mut() {
            // A dropped sender cannot happen while `self` lives; either way the slot is ours.
            let _ = rx.await;
        }
        waiting.rx = None;
        SlotGuard(self)
    }

    /// Hands a slot to the next waiter still waiting, or frees it.
    fn release(&self) {
        loop {
            let next = self.waiters.borrow_mut().pop_front();
            match next {
                // A waiter that went away (its future was dropped) does not take the slot.
                Some(tx) => {
                    if tx.send(()).is_ok() {
                        return;
                    }
                }
                None => {
                    self.free.set(self.free.get() + 1);
                    return;
                }
            }
        }
    }

    /// [`Slots::acquire`], giving up (`None`) once `wait` ends first.
    pub async fn acquire_within(
        &self,
        wait: impl std::future::Future<Output = ()>,
    ) -> Option<SlotGuard<'_>> {
        let acquire = self.acquire().fuse();
        let wait = wait.fuse();
        futures::pin_mut!(acquire, wait);
        futures::select! {
            slot = acquire => Some(slot),
            _ = wait => None,
        }
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// A waiter's place in the queue: if it is dropped after a slot was handed to it but before
/// it took it (a timeout that fired at the same moment), the slot goes on to the next.
struct Waiting<'a> {
    slots: &'a Slots,
    rx: Option<oneshot::Receiver<()>>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            if let Ok(Some(())) = rx.try_recv() {
                self.slots.release();
            }
        }
    }
}

/// Runs code in a fresh isolate.
#[async_trait(?Send)]
pub trait Sandbox {
    /// Runs one pass to its end (or its limit).
    async fn run(
        &self,
        request: SandboxRequest,
        dispatcher: Rc<dyn Dispatcher>,
    ) -> Result<SandboxOutcome, SandboxError>;

    /// Like [`Sandbox::run`], but the isolate's outbound requests go through the host's
    /// network gateway, which lets only `network`'s hosts through (extensions). A sandbox
    /// without a gateway refuses.
    async fn run_networked(
        &self,
        _request: SandboxRequest,
        _dispatcher: Rc<dyn Dispatcher>,
        _network: &crate::net::NetworkGrant,
    ) -> Result<SandboxOutcome, SandboxError> {
        Err(SandboxError::Unavailable("this sandbox has no network gateway".into()))
    }
}
