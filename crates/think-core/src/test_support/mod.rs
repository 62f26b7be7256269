//! Test doubles shared by the whole crate's host tests: one manual clock and one scripted
//! model, so every layer's tests drive time and inference the same way, and the MCP test kit.

pub mod alloc;
pub mod mcp;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};

use async_trait::async_trait;
use futures::StreamExt;

use crate::model::{FinishReason, Model, ModelError, ModelEvent, ModelRequest, ModelStream};
use crate::platform::Clock;

/// Where a fresh [`ManualClock`] starts, in ms since the epoch.
pub const START_MS: f64 = 1_000_000.0;

#[derive(Default)]
struct SleepState {
    fired: bool,
    waker: Option<Waker>,
}

/// Time that moves only when the test says so: [`ManualClock::advance`] by a step, or
/// [`ManualClock::advance_to_next_timer`] (what an executor does when everything is stuck).
/// Random bytes are a fixed xorshift stream, so ids differ yet every run is the same.
pub struct ManualClock {
    now: Cell<f64>,
    /// How far each reading moves the time (0: readings do not move it).
    tick: f64,
    timers: RefCell<Vec<(f64, Weak<RefCell<SleepState>>)>>,
    seed: Cell<u64>,
}

impl ManualClock {
    /// A clock at [`START_MS`] that moves only when advanced.
    pub fn new() -> Rc<Self> {
        Self::ticking(START_MS, 0.0)
    }

    /// A clock at `start_ms` whose every reading first moves it `tick_ms` on, so successive
    /// timestamps differ (for stores that order by time).
    pub fn ticking(start_ms: f64, tick_ms: f64) -> Rc<Self> {
        Rc::new(Self {
            now: Cell::new(start_ms),
            tick: tick_ms,
            timers: RefCell::new(Vec::new()),
            seed: Cell::new(0x9E37_79B9_7F4A_7C15),
        })
    }

    /// The current time, without moving it.
    pub fn now(&self) -> f64 {
        self.now.get()
    }

    /// Moves time `ms` on and wakes every sleep that is due.
    pub fn advance(&self, ms: f64) {
        self.now.set(self.now.get() + ms);
        self.fire_due();
    }

    /// Jumps to the earliest pending sleep and wakes everything due then; false if no sleep
    /// is pending.
    pub fn advance_to_next_timer(&self) -> bool {
        let next = {
            let mut timers = self.timers.borrow_mut();
            timers.retain(|(_, w)| w.upgrade().is_some_and(|s| !s.borrow().fired));
            timers.iter().map(|(at, _)| *at).reduce(f64::min)
        };
        let Some(next) = next else { return false };
        if next > self.now.get() {
            self.now.set(next);
        }
        self.fire_due();
        true
    }

    fn fire_due(&self) {
        let now = self.now.get();
        for (at, state) in self.timers.borrow().iter() {
            let Some(state) = state.upgrade() else { continue };
            let mut state = state.borrow_mut();
            if *at <= now && !state.fired {
                state.fired = true;
                if let Some(w) = state.waker.take() {
                    w.wake();
                }
            }
        }
    }
}

struct Sleep(Rc<RefCell<SleepState>>);

impl Future for Sleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.0.borrow_mut();
        if state.fired {
            return Poll::Ready(());
        }
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[async_trait(?Send)]
impl Clock for ManualClock {
    fn now_ms(&self) -> f64 {
        self.now.set(self.now.get() + self.tick);
        self.now.get()
    }

    async fn sleep(&self, ms: u64) {
        let state = Rc::new(RefCell::new(SleepState { fired: ms == 0, waker: None }));
        self.timers.borrow_mut().push((self.now.get() + ms as f64, Rc::downgrade(&state)));
        Sleep(state).await
    }

    fn random_bytes(&self, buf: &mut [u8]) {
        for b in buf {
            let mut x = self.seed.get();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.seed.set(x);
            *b = (x >> 24) as u8;
        }
    }
}

/// A model that plays one list of events per call, in order, and records every request.
/// When the script runs out it plays the fallback, or fails with "no script" if there is none.
#[derive(Default)]
pub struct ScriptedModel {
    calls: RefCell<VecDeque<Vec<ModelEvent>>>,
    /// Errors that end the calls queued with [`ScriptedModel::push_broken`], by the number
    /// of the call they end (counting every call made).
    breaks: RefCell<BTreeMap<usize, ModelError>>,
    fallback: Option<Vec<ModelEvent>>,
    seen: RefCell<Vec<ModelRequest>>,
    /// Each call's stream waits this long on this clock before it ends, so a test can act
    /// while a turn streams.
    delay: RefCell<Option<(Rc<dyn Clock>, u64)>>,
}

impl ScriptedModel {
    /// A model that plays `script`, then fails.
    pub fn new(script: Vec<Vec<ModelEvent>>) -> Rc<Self> {
        Rc::new(Self { calls: RefCell::new(script.into()), ..Self::default() })
    }

    /// A model that plays what is pushed, then answers `fallback` to every further call.
    pub fn with_fallback(fallback: Vec<ModelEvent>) -> Rc<Self> {
        Rc::new(Self { fallback: Some(fallback), ..Self::default() })
    }

    /// Queues the events of further calls.
    pub fn push(&self, calls: impl IntoIterator<Item = Vec<ModelEvent>>) {
        self.calls.borrow_mut().extend(calls);
    }

    /// Queues a call that streams `events`, then fails with `error` (a stream that broke off,
    /// or a provider's error event), after the calls already queued.
    pub fn push_broken(&self, events: Vec<ModelEvent>, error: ModelError) {
        let call = self.seen.borrow().len() + self.calls.borrow().len();
        self.breaks.borrow_mut().insert(call, error);
        self.calls.borrow_mut().push_back(events);
    }

    /// Makes every further call stream its first event, then wait `ms` on `clock` before
    /// the rest.
    pub fn delay_streams(&self, clock: Rc<dyn Clock>, ms: u64) {
        *self.delay.borrow_mut() = Some((clock, ms));
    }

    /// Every request the model was sent, in order.
    pub fn seen(&self) -> std::cell::Ref<'_, Vec<ModelRequest>> {
        self.seen.borrow()
    }
}

#[async_trait(?Send)]
impl Model for ScriptedModel {
    fn id(&self) -> &str {
        "scripted"
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let call = self.seen.borrow().len();
        self.seen.borrow_mut().push(request.clone());
        let events = self
            .calls
            .borrow_mut()
            .pop_front()
            .or_else(|| self.fallback.clone())
            .ok_or_else(|| ModelError::other("no script"))?;
        if let Some(error) = self.breaks.borrow_mut().remove(&call) {
            let events = events.into_iter().map(Ok).chain([Err(error)]);
            return Ok(futures::stream::iter(events).boxed_local());
        }
        let Some((clock, ms)) = self.delay.borrow().clone() else {
            return Ok(futures::stream::iter(events.into_iter().map(Ok)).boxed_local());
        };
        let mut events = events.into_iter();
        let first: Vec<_> = events.next().into_iter().collect();
        let rest = async move {
            clock.sleep(ms).await;
            futures::stream::iter(events)
        };
        let stream = futures::stream::iter(first).chain(futures::stream::once(rest).flatten());
        Ok(stream.map(Ok).boxed_local())
    }
}

/// The events of a model call that answers `t` and stops.
pub fn text(t: &str) -> Vec<ModelEvent> {
    vec![
        ModelEvent::TextDelta(t.into()),
        ModelEvent::Finish { reason: FinishReason::Stop, usage: None },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_wake_when_time_reaches_them() {
        let clock = ManualClock::new();
        let mut pool = futures::executor::LocalPool::new();
        let woke = Rc::new(Cell::new(0));
        for ms in [10, 30] {
            let (clock, woke) = (clock.clone(), woke.clone());
            futures::task::LocalSpawnExt::spawn_local(&pool.spawner(), async move {
                clock.sleep(ms).await;
                woke.set(woke.get() + 1);
            })
            .unwrap();
        }
        pool.run_until_stalled();
        clock.advance(9.0);
        pool.run_until_stalled();
        assert_eq!(woke.get(), 0);
        clock.advance(1.0);
        pool.run_until_stalled();
        assert_eq!(woke.get(), 1);
        assert!(clock.advance_to_next_timer());
        pool.run_until_stalled();
        assert_eq!((woke.get(), clock.now()), (2, START_MS + 30.0));
        assert!(!clock.advance_to_next_timer(), "no sleep is left");
    }

    #[test]
    fn a_ticking_clock_moves_on_each_reading_and_bytes_differ() {
        let clock = ManualClock::ticking(5.0, 1.0);
        assert_eq!((clock.now_ms(), clock.now_ms()), (6.0, 7.0));
        let (mut a, mut b) = ([0u8; 8], [0u8; 8]);
        clock.random_bytes(&mut a);
        clock.random_bytes(&mut b);
        assert_ne!(a, b);
    }
}
