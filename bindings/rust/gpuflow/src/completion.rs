//! How a run tells it has finished: a completion callback (`SubmitOptions::on_complete`), and a
//! `Future` (`Run::finished`) that any executor drives, Tokio's or a plain `poll` loop's, without
//! the crate depending on one.
//!
//! Every run the crate submits carries the same C callback (`on_complete` of gf_submit_options):
//! it calls the caller's closure, if any, then records the final state and wakes the task that
//! awaits the run. The library calls it once, on one of its threads, after every body of the
//! run has returned, and publishes the run's outcome when it returns.
//!
//! ```
//! use gpuflow::{Graph, Pool, PoolConfig, RunState, SubmitOptions};
//! use std::sync::mpsc;
//! let pool = Pool::new(&PoolConfig::host(2, 0, 0))?;
//! let mut graph = Graph::new()?;
//! graph.task("noop").cpu(|_| Ok(())).add()?;
//! let (tx, rx) = mpsc::channel();
//! let run = graph.submit_with(
//!     &pool,
//!     SubmitOptions::new().on_complete(move |state| tx.send(state).unwrap()),
//! )?;
//! assert_eq!(rx.recv().unwrap(), RunState::Succeeded);
//! run.wait()?;
//! # Ok::<(), gpuflow::Error>(())
//! ```
use crate::run::{run_state, RunState};
use gpuflow_sys as sys;
use std::os::raw::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::task::Waker;

/// Where a graph runs (gf_run_where): for a pool connected to a service, in this process or in
/// the service.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Where {
    /// The library's choice (docs/transport.md, "Graphs in the service").
    Anywhere,
    InProcess,
    InService,
    /// Only reported: the graph runs in steps, part here and part in the service.
    Split,
}

impl Where {
    pub(crate) fn to_raw(self) -> sys::gf_run_where {
        match self {
            Where::Anywhere => sys::GF_RUN_ANYWHERE,
            Where::InProcess => sys::GF_RUN_IN_PROCESS,
            Where::InService => sys::GF_RUN_IN_SERVICE,
            Where::Split => sys::GF_RUN_SPLIT,
        }
    }

    pub(crate) fn from_raw(raw: sys::gf_run_where) -> Where {
        match raw {
            sys::GF_RUN_IN_PROCESS => Where::InProcess,
            sys::GF_RUN_IN_SERVICE => Where::InService,
            sys::GF_RUN_SPLIT => Where::Split,
            _ => Where::Anywhere,
        }
    }
}

type CompleteFn = dyn FnOnce(RunState) + Send;

/// How a graph is submitted (gf_submit_options): where it runs and what is called when it ends.
#[derive(Default)]
pub struct SubmitOptions {
    pub(crate) where_: Option<Where>,
    pub(crate) on_complete: Option<Box<CompleteFn>>,
}

impl SubmitOptions {
    pub fn new() -> SubmitOptions {
        SubmitOptions::default()
    }

    /// Where the graph runs (`Where::Split` is only reported: asking for it is an error).
    pub fn run_where(mut self, where_: Where) -> Self {
        self.where_ = Some(where_);
        self
    }

    /// Called once with the run's final state, on a gpuflow thread, after every body of the run
    /// has returned; also when the run was dropped before it finished (as cancelled). It must
    /// not block on anything a task body of the pool may hold. A panic in it is caught: it is
    /// reported on stderr and never unwinds into the library.
    pub fn on_complete<F: FnOnce(RunState) + Send + 'static>(mut self, callback: F) -> Self {
        self.on_complete = Some(Box::new(callback));
        self
    }
}

/// What the C callback and the run's waiters share.
pub(crate) struct Completion {
    inner: Mutex<Inner>,
}

struct Inner {
    finished: Option<RunState>,
    waker: Option<Waker>,
    callback: Option<Box<CompleteFn>>,
}

impl Completion {
    pub(crate) fn new(callback: Option<Box<CompleteFn>>) -> Arc<Completion> {
        Arc::new(Completion {
            inner: Mutex::new(Inner {
                finished: None,
                waker: None,
                callback,
            }),
        })
    }

    /// The final state once the run has finished; otherwise `waker` is woken when it does.
    pub(crate) fn finished_or_register(&self, waker: &Waker) -> Option<RunState> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.finished.is_none() {
            inner.waker = Some(waker.clone());
        }
        inner.finished
    }

    /// The user_data given to the library: one reference, which `on_complete` takes back.
    pub(crate) fn into_user_data(this: Arc<Completion>) -> *mut c_void {
        Arc::into_raw(this) as *mut c_void
    }

    /// Takes back the reference of a submit that failed (the callback never runs then).
    ///
    /// # Safety
    /// `user_data` came from `into_user_data` and the library will not call back with it.
    pub(crate) unsafe fn reclaim(user_data: *mut c_void) {
        drop(Arc::from_raw(user_data as *const Completion));
    }
}

/// The gf_run_callback of every run the crate submits.
pub(crate) extern "C" fn on_complete(
    _run: *mut sys::gf_run,
    state: sys::gf_run_state,
    user_data: *mut c_void,
) {
    // SAFETY: user_data is the reference `into_user_data` made for this run; the library calls
    // this once per run, so taking it back here drops it exactly once.
    let completion = unsafe { Arc::from_raw(user_data as *const Completion) };
    let state = run_state(state);
    let callback = completion
        .inner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .callback
        .take();
    // Neither the caller's closure nor a waker may unwind into C.
    if let Some(f) = callback {
        if catch_unwind(AssertUnwindSafe(move || f(state))).is_err() {
            eprintln!("gpuflow: a run's completion callback panicked; the panic was stopped there");
        }
    }
    // Last: the library publishes the run's outcome only once this returns, and a woken
    // future waits for that (see Finished::poll), so it must not wait on the closure above.
    let waker = {
        let mut inner = completion.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.finished = Some(state);
        inner.waker.take()
    };
    if let Some(w) = waker {
        let _ = catch_unwind(AssertUnwindSafe(move || w.wake()));
    }
}
