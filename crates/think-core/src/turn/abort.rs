//! A cancellation signal shared between a turn and whoever may stop it (a cancel frame, a
//! clear, a newer message under the `latest` policy).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct Inner {
    aborted: Cell<bool>,
    wakers: RefCell<Vec<Waker>>,
}

/// Cloneable; every clone observes the same abort.
#[derive(Clone, Default)]
pub struct AbortSignal(Rc<Inner>);

impl AbortSignal {
    /// A signal not yet raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the signal: every run under it stops at its next await.
    pub fn abort(&self) {
        if !self.0.aborted.replace(true) {
            for w in self.0.wakers.borrow_mut().drain(..) {
                w.wake();
            }
        }
    }

    /// Whether the signal was raised.
    pub fn is_aborted(&self) -> bool {
        self.0.aborted.get()
    }

    /// Resolves once the signal is aborted.
    pub fn aborted(&self) -> Aborted {
        Aborted(self.clone())
    }

    /// Runs `fut` unless the signal fires first; `None` means it was aborted.
    pub async fn run<F: Future>(&self, fut: F) -> Option<F::Output> {
        if self.is_aborted() {
            return None;
        }
        let fut = std::pin::pin!(fut);
        match futures::future::select(fut, self.aborted()).await {
            futures::future::Either::Left((out, _)) => Some(out),
            futures::future::Either::Right(_) => None,
        }
    }
}

/// The future returned by [`AbortSignal::aborted`].
pub struct Aborted(AbortSignal);

impl Future for Aborted {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let inner = &(self.0).0;
        if inner.aborted.get() {
            Poll::Ready(())
        } else {
            inner.wakers.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_returns_none_once_aborted() {
        let s = AbortSignal::new();
        let s2 = s.clone();
        let out = futures::executor::block_on(s.run(async move {
            s2.abort();
            futures::future::pending::<()>().await
        }));
        assert!(out.is_none());
        assert!(s.is_aborted());
        assert_eq!(futures::executor::block_on(AbortSignal::new().run(async { 7 })), Some(7));
    }
}
