//! Closures as task bodies. A body runs on a worker thread; whatever it returns or however it
//! panics, the panic stops at the boundary (it never unwinds into C) and becomes the failure of
//! that attempt, with the panic's message.
use crate::error::{check, Error, Result};
use gpuflow_sys as sys;
use std::any::Any;
use std::ffi::{CStr, CString};
use std::mem::{align_of, size_of};
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Plain numbers a buffer may be viewed as: every bit pattern is a value, no padding.
///
/// # Safety
/// Implement only for types with no padding and no invalid bit patterns.
pub unsafe trait Element: Copy + Send + Sync + 'static {}
unsafe impl Element for u8 {}
unsafe impl Element for i8 {}
unsafe impl Element for u16 {}
unsafe impl Element for i16 {}
unsafe impl Element for u32 {}
unsafe impl Element for i32 {}
unsafe impl Element for u64 {}
unsafe impl Element for i64 {}
unsafe impl Element for f32 {}
unsafe impl Element for f64 {}

/// `bytes` as a slice of T: its length must be a multiple of T's size, its address aligned.
pub(crate) fn cast<'a, T: Element>(bytes: &'a [u8], what: &str) -> Result<&'a [T]> {
    check_cast::<T>(bytes.as_ptr(), bytes.len(), what)?;
    // SAFETY: aligned, whole elements, T accepts every bit pattern.
    Ok(unsafe {
        std::slice::from_raw_parts(bytes.as_ptr() as *const T, bytes.len() / size_of::<T>())
    })
}

fn check_cast<T: Element>(ptr: *const u8, len: usize, what: &str) -> Result<()> {
    if len % size_of::<T>() != 0 || (ptr as usize) % align_of::<T>() != 0 {
        return Err(Error::invalid(format!(
            "{what} ({len} bytes) is not a whole, aligned array of {}",
            std::any::type_name::<T>()
        )));
    }
    Ok(())
}

/// What a running body sees: its inputs, its outputs, where it runs. Borrowed for the call.
pub struct TaskContext<'a> {
    raw: *mut sys::gf_task_ctx,
    output_sizes: &'a [u64],
    sizes_known: bool,
}

/// Where and how a body runs (gf_task_env).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskEnv {
    pub gpu: bool,
    pub device: Option<u32>,
    pub worker: u32,
    pub attempt: u32,
    pub task_name: String,
    /// The CUDA stream (cudaStream_t) to enqueue on, null otherwise.
    pub stream: *mut c_void,
}

impl<'a> TaskContext<'a> {
    pub(crate) fn raw(&self) -> *mut sys::gf_task_ctx {
        self.raw
    }

    /// Input `index` as bytes (in the executing worker's memory: device memory on a real GPU).
    pub fn input(&self, index: u32) -> Result<&[u8]> {
        let mut ptr: *const c_void = std::ptr::null();
        let mut size = 0u64;
        check(unsafe { sys::gf_task_ctx_input(&mut ptr, &mut size, self.raw, index) })?;
        if size == 0 {
            return Ok(&[]);
        }
        // SAFETY: the library guarantees `size` readable bytes for the duration of the call.
        Ok(unsafe { std::slice::from_raw_parts(ptr as *const u8, size as usize) })
    }

    /// Input `index` as a slice of numbers.
    pub fn input_as<T: Element>(&self, index: u32) -> Result<&[T]> {
        cast(self.input(index)?, &format!("input #{index}"))
    }

    /// Output buffer `index` as bytes, of its declared size.
    pub fn output(&mut self, index: u32) -> Result<&mut [u8]> {
        match self.output_sizes.get(index as usize) {
            _ if !self.sizes_known => Err(Error::invalid(format!(
                "output #{index}: a kernel's body does not know the sizes of its task's outputs: \
                 give the size with output_sized"
            ))),
            Some(0) => Err(Error::invalid(format!(
                "output #{index} was declared with size 0: give its size with output_sized"
            ))),
            Some(&size) => self.output_sized(index, size),
            None => Err(Error::invalid(format!(
                "output #{index}: the task has {} outputs",
                self.output_sizes.len()
            ))),
        }
    }

    /// Output buffer `index` as bytes; `size` must be its declared size, or any size for a
    /// buffer declared with size 0 (which gets `size` bytes now).
    pub fn output_sized(&mut self, index: u32, size: u64) -> Result<&mut [u8]> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        check(unsafe { sys::gf_task_ctx_output(&mut ptr, self.raw, index, size) })?;
        if size == 0 {
            return Ok(&mut []);
        }
        // SAFETY: `size` writable bytes for the call; &mut self keeps one view at a time.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, size as usize) })
    }

    /// Output buffer `index` as numbers of type T, of its declared size.
    pub fn output_as<T: Element>(&mut self, index: u32) -> Result<&mut [T]> {
        let bytes = self.output(index)?;
        check_cast::<T>(bytes.as_ptr(), bytes.len(), &format!("output #{index}"))?;
        let len = bytes.len() / size_of::<T>();
        // SAFETY: checked: aligned, whole elements, T accepts every bit pattern.
        Ok(unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr() as *mut T, len) })
    }

    /// True once the run was cancelled or the pool is shutting down.
    pub fn cancelled(&self) -> bool {
        unsafe { sys::gf_task_ctx_cancelled(self.raw) != 0 }
    }

    pub fn env(&self) -> Result<TaskEnv> {
        let mut e: sys::gf_task_env = unsafe { std::mem::zeroed() };
        e.struct_size = size_of::<sys::gf_task_env>() as u32;
        check(unsafe { sys::gf_task_ctx_env(&mut e, self.raw) })?;
        Ok(TaskEnv {
            gpu: e.kind == sys::GF_WORKER_GPU,
            device: if e.device >= 0 {
                Some(e.device as u32)
            } else {
                None
            },
            worker: e.worker,
            attempt: e.attempt,
            task_name: if e.task_name.is_null() {
                String::new()
            } else {
                unsafe { CStr::from_ptr(e.task_name) }
                    .to_string_lossy()
                    .into_owned()
            },
            stream: e.stream,
        })
    }
}

/// A body: Ok(()) succeeds, Err(message) fails the attempt with that message.
pub(crate) type BodyFn =
    dyn Fn(&mut TaskContext<'_>) -> std::result::Result<(), String> + Send + Sync;

/// The user_data of a task with closure bodies; freed by the library through `destroy`.
pub(crate) struct Bodies {
    pub cpu: Option<Box<BodyFn>>,
    pub gpu: Option<Box<BodyFn>>,
    /// The declared sizes of the task's outputs, in order (0: set by the body); None for a
    /// kernel's bodies, which serve many tasks.
    pub output_sizes: Option<Vec<u64>>,
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

fn fail(ctx: *mut sys::gf_task_ctx, message: String) -> c_int {
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    unsafe { sys::gf_task_ctx_fail(ctx, c.as_ptr()) };
    1
}

fn run(ctx: *mut sys::gf_task_ctx, user_data: *mut c_void, gpu: bool) -> c_int {
    // SAFETY: user_data is the Bodies this task was added with; the library keeps it alive
    // while any body may run and frees it through `destroy` only afterwards.
    let bodies = unsafe { &*(user_data as *const Bodies) };
    let body = if gpu { &bodies.gpu } else { &bodies.cpu };
    let body = match body {
        Some(b) => b,
        None => return fail(ctx, "no body for this worker kind".into()),
    };
    let mut context = TaskContext {
        raw: ctx,
        output_sizes: bodies.output_sizes.as_deref().unwrap_or(&[]),
        sizes_known: bodies.output_sizes.is_some(),
    };
    match catch_unwind(AssertUnwindSafe(|| body(&mut context))) {
        Ok(Ok(())) => 0,
        Ok(Err(message)) => fail(ctx, message),
        Err(payload) => fail(ctx, format!("panicked: {}", panic_message(&*payload))),
    }
}

pub(crate) extern "C" fn cpu_trampoline(
    ctx: *mut sys::gf_task_ctx,
    user_data: *mut c_void,
) -> c_int {
    // A panic in the panic message's formatting would still be caught by the outer guard.
    catch_unwind(|| run(ctx, user_data, false)).unwrap_or(1)
}

pub(crate) extern "C" fn gpu_trampoline(
    ctx: *mut sys::gf_task_ctx,
    user_data: *mut c_void,
) -> c_int {
    catch_unwind(|| run(ctx, user_data, true)).unwrap_or(1)
}

pub(crate) extern "C" fn destroy_bodies(user_data: *mut c_void) {
    // SAFETY: called once, with the Box<Bodies> given as user_data. A panic in a closure's
    // destructor must not unwind into C either.
    let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
        drop(Box::from_raw(user_data as *mut Bodies))
    }));
}
