//! Runs: one execution of a graph on a pool, waited for, polled, or awaited as a `Future`.
use crate::body::Element;
use crate::completion::{Completion, Where};
use crate::error::{check, Error, Result, Status};
use crate::graph::{Data, Task};
use gpuflow_sys as sys;
use std::ffi::CStr;
use std::future::Future;
use std::mem::size_of;
use std::os::raw::c_void;
use std::os::unix::io::RawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RunState {
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TaskState {
    Waiting,
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

/// Counters of a run (gf_run_stats).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunStats {
    pub tasks: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub attempts: u64,
    pub transfers: u64,
    pub bytes_transferred: u64,
    pub elapsed_s: f64,
}

pub(crate) fn run_state(raw: sys::gf_run_state) -> RunState {
    match raw {
        sys::GF_RUN_SUCCEEDED => RunState::Succeeded,
        sys::GF_RUN_FAILED => RunState::Failed,
        sys::GF_RUN_CANCELLED => RunState::Cancelled,
        _ => RunState::Running,
    }
}

/// A submitted graph. Thread-safe (every gf_run_* call but destroy is, and destroy is `Drop`,
/// which cancels the run if it is still running).
pub struct Run {
    raw: *mut sys::gf_run,
    completion: Arc<Completion>,
}

// SAFETY: gpuflow.h documents every gf_run_* function as thread-safe except gf_run_destroy,
// which Drop calls with exclusive access.
unsafe impl Send for Run {}
unsafe impl Sync for Run {}

impl Run {
    pub(crate) fn from_raw(raw: *mut sys::gf_run, completion: Arc<Completion>) -> Run {
        Run { raw, completion }
    }

    /// A future that resolves when the run has finished, to what `wait` returns. It never
    /// blocks: the run's completion callback wakes the task that polled it.
    pub fn finished(&self) -> Finished<'_> {
        Finished { run: self }
    }

    /// Where the run runs: `InProcess`, `InService` or `Split`.
    pub fn run_where(&self) -> Result<Where> {
        let mut w = sys::GF_RUN_ANYWHERE;
        check(unsafe { sys::gf_run_where_get(&mut w, self.raw) })?;
        Ok(Where::from_raw(w))
    }

    /// The worker that ran (or runs) the task's last attempt; Status::STATE if it never started.
    pub fn task_worker(&self, task: Task) -> Result<u32> {
        let mut n = 0;
        check(unsafe { sys::gf_run_task_worker(&mut n, self.raw, task.raw()) })?;
        Ok(n)
    }

    pub(crate) fn raw(&self) -> *mut sys::gf_run {
        self.raw
    }

    /// Waits until the run finishes: Ok when every task succeeded, else the error
    /// (Status::TASK_FAILED naming the first failed task, or Status::CANCELLED).
    pub fn wait(&self) -> Result<()> {
        check(unsafe { sys::gf_run_wait(self.raw, -1) })
    }

    /// Waits at most `timeout`: Ok(true) when finished successfully, Ok(false) when still
    /// running, Err as `wait`.
    pub fn wait_for(&self, timeout: Duration) -> Result<bool> {
        let ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        finished(unsafe { sys::gf_run_wait(self.raw, ms) })
    }

    /// `wait_for` with a zero timeout.
    pub fn poll(&self) -> Result<bool> {
        finished(unsafe { sys::gf_run_poll(self.raw) })
    }

    /// Tasks not yet started never start; the run then finishes as cancelled.
    pub fn cancel(&self) -> Result<()> {
        check(unsafe { sys::gf_run_cancel(self.raw) })
    }

    pub fn state(&self) -> Result<RunState> {
        let mut s = 0;
        check(unsafe { sys::gf_run_state_get(&mut s, self.raw) })?;
        Ok(run_state(s))
    }

    /// A descriptor that becomes readable once the run has finished, for event loops. Owned by
    /// the run: do not read or close it; valid while the Run lives.
    pub fn fd(&self) -> Result<RawFd> {
        let mut fd = -1;
        check(unsafe { sys::gf_run_fd(&mut fd, self.raw) })?;
        Ok(fd)
    }

    /// Copies buffer `data` (a kept result or a host input) to a new vector of bytes.
    pub fn fetch(&self, data: Data) -> Result<Vec<u8>> {
        let mut size = 0u64;
        check(unsafe {
            sys::gf_run_fetch(&mut size, self.raw, data.raw(), std::ptr::null_mut(), 0)
        })?;
        let mut bytes = vec![0u8; size as usize];
        check(unsafe {
            sys::gf_run_fetch(
                &mut size,
                self.raw,
                data.raw(),
                bytes.as_mut_ptr() as *mut c_void,
                bytes.len() as u64,
            )
        })?;
        Ok(bytes)
    }

    /// Copies buffer `data` into a new vector of numbers.
    pub fn fetch_as<T: Element + Default>(&self, data: Data) -> Result<Vec<T>> {
        let mut size = 0u64;
        check(unsafe {
            sys::gf_run_fetch(&mut size, self.raw, data.raw(), std::ptr::null_mut(), 0)
        })?;
        if size % size_of::<T>() as u64 != 0 {
            return Err(Error::invalid(format!(
                "the buffer has {size} bytes, not a whole number of {}",
                std::any::type_name::<T>()
            )));
        }
        let mut values = vec![T::default(); size as usize / size_of::<T>()];
        check(unsafe {
            sys::gf_run_fetch(
                &mut size,
                self.raw,
                data.raw(),
                values.as_mut_ptr() as *mut c_void,
                size,
            )
        })?;
        Ok(values)
    }

    pub fn task_state(&self, task: Task) -> Result<TaskState> {
        let mut s = 0;
        check(unsafe { sys::gf_run_task_state(&mut s, self.raw, task.raw()) })?;
        Ok(match s {
            sys::GF_TASK_WAITING => TaskState::Waiting,
            sys::GF_TASK_QUEUED => TaskState::Queued,
            sys::GF_TASK_RUNNING => TaskState::Running,
            sys::GF_TASK_SUCCEEDED => TaskState::Succeeded,
            sys::GF_TASK_FAILED => TaskState::Failed,
            _ => TaskState::Cancelled,
        })
    }

    /// The error text of a failed or cancelled task ("" otherwise).
    pub fn task_error(&self, task: Task) -> Result<String> {
        let mut p = std::ptr::null();
        check(unsafe { sys::gf_run_task_error(&mut p, self.raw, task.raw()) })?;
        Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    /// Attempts made (1 + retries used).
    pub fn task_attempts(&self, task: Task) -> Result<u32> {
        let mut n = 0;
        check(unsafe { sys::gf_run_task_attempts(&mut n, self.raw, task.raw()) })?;
        Ok(n)
    }

    pub fn stats(&self) -> Result<RunStats> {
        let mut s: sys::gf_run_stats = unsafe { std::mem::zeroed() };
        s.struct_size = size_of::<sys::gf_run_stats>() as u32;
        check(unsafe { sys::gf_run_stats_get(&mut s, self.raw) })?;
        Ok(RunStats {
            tasks: s.tasks,
            succeeded: s.succeeded,
            failed: s.failed,
            cancelled: s.cancelled,
            attempts: s.attempts,
            transfers: s.transfers,
            bytes_transferred: s.bytes_transferred,
            elapsed_s: s.elapsed_s,
        })
    }
}

fn finished(status: sys::gf_status) -> Result<bool> {
    if status == Status::TIMEOUT.0 {
        return Ok(false);
    }
    check(status).map(|()| true)
}

/// What `Run::finished` returns: `Ready(Ok(()))` when every task succeeded, else the error
/// `wait` would give.
pub struct Finished<'a> {
    run: &'a Run,
}

impl Future for Finished<'_> {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        match self.run.completion.finished_or_register(cx.waker()) {
            // The callback has recorded the end as its last step; the library publishes the
            // outcome as soon as it returns, so this wait is that instant at most.
            Some(_) => Poll::Ready(check(unsafe { sys::gf_run_wait(self.run.raw, -1) })),
            None => Poll::Pending,
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        unsafe { sys::gf_run_destroy(self.raw) }
    }
}
