//! The pool's stream of events (gf_pool_set_event_callback): task attempts starting and ending
//! on workers, data copied to where a task runs, data spilled to host memory. For progress
//! displays, traces and metrics.
//!
//! ```
//! use gpuflow::{EventKind, Graph, Pool, PoolConfig};
//! use std::sync::{Arc, Mutex};
//! let pool = Pool::new(&PoolConfig::host(2, 0, 0))?;
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let log = seen.clone();
//! pool.set_event_callback(move |e| {
//!     if e.kind == EventKind::TaskFinished {
//!         log.lock().unwrap().push(e.task_name.clone());
//!     }
//! })?;
//! let mut graph = Graph::new()?;
//! graph.task("step").cpu(|_| Ok(())).add()?;
//! graph.submit(&pool)?.wait()?;
//! pool.clear_event_callback()?;
//! assert_eq!(*seen.lock().unwrap(), vec!["step".to_string()]);
//! # Ok::<(), gpuflow::Error>(())
//! ```
use crate::error::{check, Result};
use crate::graph::{Data, Task};
use crate::pool::Pool;
use crate::service::copy_str;
use gpuflow_sys as sys;
use std::os::raw::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// What happened (gf_event_kind); kinds added to the library later are `Other`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum EventKind {
    /// A body is about to run on `worker`.
    TaskStarted,
    /// It returned; `ok` says whether it succeeded.
    TaskFinished,
    /// A copy of `data` into `worker`'s memory ended, from `source_worker`'s (None: host memory).
    TransferFinished,
    /// `data` left `worker`'s device memory for host memory.
    SpillFinished,
    Other(i32),
}

/// One event (gf_event), copied out of the library's for the callback.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub kind: EventKind,
    /// The task (task events; `Task(0)` otherwise) and its name ("" when unnamed).
    pub task: Task,
    pub task_name: String,
    /// None for host memory.
    pub worker: Option<u32>,
    pub attempt: u32,
    pub ok: bool,
    /// Seconds since the pool was created (steady clock).
    pub time_s: f64,
    /// TaskFinished: the attempt's run time; transfers and spills: the copy's.
    pub duration_s: f64,
    /// TaskStarted: from ready in its worker's queue to started.
    pub queue_wait_s: f64,
    /// Transfers and spills: the data moved and its size.
    pub data: Data,
    pub bytes: u64,
    pub source_worker: Option<u32>,
}

pub(crate) type EventFn = dyn Fn(&Event) + Send + Sync;

fn worker(w: u32) -> Option<u32> {
    if w == sys::GF_NO_WORKER {
        None
    } else {
        Some(w)
    }
}

fn event(e: &sys::gf_event) -> Event {
    Event {
        kind: match e.kind {
            sys::GF_EVENT_TASK_STARTED => EventKind::TaskStarted,
            sys::GF_EVENT_TASK_FINISHED => EventKind::TaskFinished,
            sys::GF_EVENT_TRANSFER_FINISHED => EventKind::TransferFinished,
            sys::GF_EVENT_SPILL_FINISHED => EventKind::SpillFinished,
            other => EventKind::Other(other as i32),
        },
        task: Task(e.task.id),
        // SAFETY: borrowed for the call, copied here.
        task_name: unsafe { copy_str(e.task_name) }.unwrap_or_default(),
        worker: worker(e.worker),
        attempt: e.attempt,
        ok: e.ok != 0,
        time_s: e.time_s,
        duration_s: e.duration_s,
        queue_wait_s: e.queue_wait_s,
        data: Data(e.data.id),
        bytes: e.bytes,
        source_worker: worker(e.source_worker),
    }
}

extern "C" fn on_event(e: *const sys::gf_event, user_data: *mut c_void) {
    // SAFETY: user_data is the Box<EventFn> the pool keeps alive until it is destroyed (every
    // callback ever set, since an old one may still be finishing a call); e is valid for the
    // call. A panic stops here: it never unwinds into a worker thread of the library.
    let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
        let f = &*(user_data as *const Box<EventFn>);
        f(&event(&*e))
    }));
}

impl Pool {
    /// Calls `callback` with every event from now on, on the thread where it happens (worker
    /// threads): it must be quick and must not block. Replaces the previous callback. A panic in
    /// it is caught and that event is lost.
    pub fn set_event_callback<F: Fn(&Event) + Send + Sync + 'static>(
        &self,
        callback: F,
    ) -> Result<()> {
        let boxed: Arc<Box<EventFn>> = Arc::new(Box::new(callback));
        let user_data = &*boxed as *const Box<EventFn> as *mut c_void;
        // Kept before the library may call it; freed only when the pool is.
        self.keep_event_callback(boxed);
        check(unsafe { sys::gf_pool_set_event_callback(self.raw(), Some(on_event), user_data) })
    }

    /// No event callback from now on (one may still be finishing a call on another thread).
    pub fn clear_event_callback(&self) -> Result<()> {
        check(unsafe { sys::gf_pool_set_event_callback(self.raw(), None, std::ptr::null_mut()) })
    }
}
