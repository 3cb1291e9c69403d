//! gpuflow: run annotated task graphs on a pool of CPU workers and GPUs (real, or emulated in
//! host memory), through the C ABI of libgpuflow (`include/gpuflow.h`).
//!
//! ```
//! use gpuflow::{Graph, Pool};
//! let pool = Pool::with_defaults()?;
//! let mut graph = Graph::new()?;
//! let answer = graph.buffer_of::<i64>("answer", 1, true)?;
//! graph
//!     .task("eleven")
//!     .resource("cpu", 1.0)
//!     .output(answer)
//!     .cpu(|ctx| {
//!         ctx.output_as::<i64>(0).map_err(|e| e.to_string())?[0] = 10 + 1;
//!         Ok(())
//!     })
//!     .add()?;
//! let run = graph.submit(&pool)?;
//! run.wait()?;
//! assert_eq!(run.fetch_as::<i64>(answer)?, vec![11]);
//! # Ok::<(), gpuflow::Error>(())
//! ```
//!
//! Thread safety follows gpuflow.h: `Pool` and `Run` are `Send + Sync`; `Graph` is `Send` only
//! (externally synchronized); task bodies are `Fn + Send + Sync` closures, since a body may run
//! on any worker thread, for several runs at once. `Service` and `Lease` are `Send + Sync`; a
//! `Lease` borrows its `Pool`, so the pool outlives every lease of it. A panicking body fails
//! its attempt with the panic's message; the panic never crosses into C.
//!
//! A graph cannot be shared between threads, only moved:
//! ```compile_fail
//! fn shared<T: Sync>(_: &T) {}
//! shared(&gpuflow::Graph::new().unwrap());
//! ```
//! and what a body sees stays on the body's thread:
//! ```compile_fail
//! fn sent<T: Send>(_: T) {}
//! fn body(ctx: &mut gpuflow::TaskContext<'_>) { sent(ctx) }
//! ```
mod body;
mod command;
mod completion;
mod devices;
mod document;
mod error;
mod events;
mod graph;
mod kernels;
mod lease;
mod pool;
mod run;
mod service;
mod value;

pub use body::{Element, TaskContext, TaskEnv};
pub use command::Command;
pub use completion::{SubmitOptions, Where};
pub use devices::DeviceInfo;
pub use document::DocumentFormat;
pub use error::{Error, Result, Status};
pub use events::{Event, EventKind};
pub use graph::{Data, Graph, Task, TaskBuilder};
pub use lease::{Lease, LeaseDevice, LeaseRequest};
pub use pool::{Backend, LedgerEntry, Pool, PoolConfig, WorkerInfo};
pub use run::{Finished, Run, RunState, RunStats, TaskState};
pub use service::{default_endpoint, Service, ServiceConfig};

/// The version of the loaded library, "major.minor.patch".
pub fn version() -> String {
    unsafe { std::ffi::CStr::from_ptr(gpuflow_sys::gf_version_string()) }
        .to_string_lossy()
        .into_owned()
}
