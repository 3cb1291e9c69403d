//! Opaque values: Rust objects that flow between tasks as they are, never copied or serialized.
//! gpuflow holds each one as a pointer and drops it exactly once, when the graph and every run
//! that could still read it are gone (a graph input) or when its data is freed (a task's output).
//! A value is `Send + Sync`: several tasks may read it at once on different workers, and it is
//! dropped on whichever thread lets go of it last.
//!
//! ```
//! use gpuflow::{Graph, Pool, PoolConfig};
//! let pool = Pool::new(&PoolConfig::host(2, 0, 0))?;
//! let mut graph = Graph::new()?;
//! let words = graph.host_value("words", vec!["a".to_string(), "bc".to_string()], 0)?;
//! let total = graph.value_slot("total", 8, true)?;
//! graph
//!     .task("count")
//!     .input(words)
//!     .output(total)
//!     .cpu(|ctx| {
//!         let n: usize = ctx.input_value::<Vec<String>>(0)?.iter().map(|w| w.len()).sum();
//!         ctx.set_value(0, n, 8)?;
//!         Ok(())
//!     })
//!     .add()?;
//! let run = graph.submit(&pool)?;
//! run.wait()?;
//! assert_eq!(*run.value::<usize>(total)?, 3);
//! # Ok::<(), gpuflow::Error>(())
//! ```
use crate::body::TaskContext;
use crate::error::{c_string, check, Error, Result};
use crate::graph::{Data, Graph};
use crate::run::Run;
use gpuflow_sys as sys;
use std::any::{type_name, Any};
use std::os::raw::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Marks the values this crate made, so that a pointer from another runtime (a C plugin's
/// value, a Python object) is refused instead of being read as one of ours.
const MAGIC: u64 = 0x6766_7275_7374_7631; // "gfrustv1"

#[repr(C)]
struct Boxed {
    magic: u64,
    value: Box<dyn Any + Send + Sync>,
}

fn into_raw<T: Any + Send + Sync>(value: T) -> *mut c_void {
    Box::into_raw(Box::new(Boxed {
        magic: MAGIC,
        value: Box::new(value),
    })) as *mut c_void
}

extern "C" fn destroy(raw: *mut c_void) {
    // SAFETY: the library calls this once, with a pointer `into_raw` made. A panicking Drop
    // must not unwind into C.
    let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
        drop(Box::from_raw(raw as *mut Boxed))
    }));
}

/// Ok when the library took `raw` (`status` GF_OK); otherwise the value is still ours and is
/// dropped here, and the error returned.
fn handed_over(raw: *mut c_void, status: sys::gf_status) -> Result<()> {
    if status != sys::GF_OK {
        destroy(raw);
    }
    check(status)
}

/// The value at `raw` as a T, borrowed for `'a`.
///
/// # Safety
/// `raw` is NULL or points to a value the library holds for at least `'a`: ours (made by
/// `into_raw`) or another runtime's, whose first 8 bytes are readable (a pointer-sized object
/// at least).
unsafe fn borrow<'a, T: Any>(raw: *const c_void, what: &str) -> Result<&'a T> {
    if raw.is_null() {
        return Err(Error::invalid(format!("{what} holds no value")));
    }
    let boxed = raw as *const Boxed;
    if std::ptr::read(std::ptr::addr_of!((*boxed).magic)) != MAGIC {
        return Err(Error::invalid(format!(
            "{what} was not made by the Rust binding (a value of another runtime)"
        )));
    }
    (*boxed)
        .value
        .downcast_ref::<T>()
        .ok_or_else(|| Error::invalid(format!("{what} is not a {}", type_name::<T>())))
}

impl Graph {
    /// A graph input: `value`, moved into the graph and dropped once the graph and every run of
    /// it are gone. `size_estimate` (bytes) guides scheduling only.
    pub fn host_value<T: Any + Send + Sync>(
        &mut self,
        name: &str,
        value: T,
        size_estimate: u64,
    ) -> Result<Data> {
        let name = c_string(name, "the value name")?;
        let raw = into_raw(value);
        let mut out = sys::gf_data { id: 0 };
        let status = unsafe {
            sys::gf_graph_add_host_value(
                &mut out,
                self.raw(),
                name.as_ptr(),
                raw,
                Some(destroy),
                size_estimate,
            )
        };
        handed_over(raw, status)?;
        Ok(Data(out.id))
    }

    /// A slot for a value that one task of the graph sets (`TaskContext::set_value`). `keep`:
    /// keep it after its last consumer, for `Run::value`.
    pub fn value_slot(&mut self, name: &str, size_estimate: u64, keep: bool) -> Result<Data> {
        let name = c_string(name, "the value name")?;
        #[allow(clippy::unnecessary_cast)]
        let flags = if keep { sys::GF_DATA_KEEP as u32 } else { 0 };
        let mut out = sys::gf_data { id: 0 };
        check(unsafe {
            sys::gf_graph_add_value(&mut out, self.raw(), name.as_ptr(), size_estimate, flags)
        })?;
        Ok(Data(out.id))
    }
}

impl TaskContext<'_> {
    /// Input `index` as the value of type T a graph input or an earlier task gave it.
    pub fn input_value<T: Any + Send + Sync>(&self, index: u32) -> Result<&T> {
        let mut ptr: *const c_void = std::ptr::null();
        let mut size = 0u64;
        check(unsafe { sys::gf_task_ctx_input(&mut ptr, &mut size, self.raw(), index) })?;
        // SAFETY: an opaque input stays alive while the body runs; the borrow ends with it.
        unsafe { borrow(ptr, &format!("input #{index}")) }
    }

    /// Sets value output `index` to `value`, which gpuflow then owns and drops once its data is
    /// freed. It is host data wherever the body runs.
    pub fn set_value<T: Any + Send + Sync>(
        &mut self,
        index: u32,
        value: T,
        size_estimate: u64,
    ) -> Result<()> {
        let raw = into_raw(value);
        let status = unsafe {
            sys::gf_task_ctx_set_value(self.raw(), index, raw, Some(destroy), size_estimate)
        };
        handed_over(raw, status)
    }

    /// `set_value` for a value that holds `size` bytes of the executing GPU worker's device
    /// memory (a handle to a device allocation): they are charged to the device while the value
    /// lives there, and it is never spilled. On a CPU worker it is `set_value`.
    pub fn set_device_value<T: Any + Send + Sync>(
        &mut self,
        index: u32,
        value: T,
        size: u64,
    ) -> Result<()> {
        let raw = into_raw(value);
        let status = unsafe {
            sys::gf_task_ctx_set_device_value(
                self.raw(),
                index,
                raw,
                Some(destroy),
                size,
                std::ptr::null(),
            )
        };
        handed_over(raw, status)
    }
}

impl Run {
    /// The value `data` holds (a kept value output, or a value input), borrowed from the run.
    pub fn value<T: Any + Send + Sync>(&self, data: Data) -> Result<&T> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        check(unsafe { sys::gf_run_value(&mut ptr, self.raw(), data.raw()) })?;
        // SAFETY: gf_run_value's value stays valid until gf_run_destroy, i.e. while &self lives.
        unsafe { borrow(ptr, "the value") }
    }
}
