//! Kernels: bodies registered with a pool under a name, which tasks (and graph documents, which
//! cannot hold closures) name instead of carrying a body. Registered from Rust closures, or
//! loaded from a C plugin library (gpuflow_plugin.h).
//!
//! ```
//! use gpuflow::{Graph, Pool, PoolConfig};
//! let pool = Pool::new(&PoolConfig::host(2, 0, 0))?;
//! pool.register_kernel("double", |ctx| {
//!     let x = ctx.input_as::<i32>(0)?[0];
//!     ctx.output_sized(0, 4)?.copy_from_slice(&(2 * x).to_ne_bytes());
//!     Ok(())
//! })?;
//! assert_eq!(pool.kernel_names()?, vec!["double".to_string()]);
//! let mut graph = Graph::new()?;
//! let x = graph.host_buffer("x", &[21i32])?;
//! let y = graph.buffer_of::<i32>("y", 1, true)?;
//! graph.task("twice").kernel("double").input(x).output(y).add()?;
//! let run = graph.submit(&pool)?;
//! run.wait()?;
//! assert_eq!(run.fetch_as::<i32>(y)?, vec![42]);
//! # Ok::<(), gpuflow::Error>(())
//! ```
use crate::body::{cpu_trampoline, destroy_bodies, Bodies, TaskContext};
use crate::error::{c_string, check, Result};
use crate::pool::{path_c_string, Pool};
use crate::service::copy_str;
use gpuflow_sys as sys;
use std::mem::size_of;
use std::os::raw::c_void;
use std::path::Path;
use std::ptr;

impl Pool {
    /// Registers `body` as the CPU body of kernel `name` (once per name and pool). It may run on
    /// any worker thread, for several tasks at once; its outputs' sizes come with
    /// `TaskContext::output_sized`.
    pub fn register_kernel<F>(&self, name: &str, body: F) -> Result<()>
    where
        F: Fn(&mut TaskContext<'_>) -> std::result::Result<(), String> + Send + Sync + 'static,
    {
        let name = c_string(name, "the kernel name")?;
        let bodies = Box::into_raw(Box::new(Bodies {
            cpu: Some(Box::new(body)),
            gpu: None,
            output_sizes: None,
        }));
        let mut d: sys::gf_kernel_desc = unsafe { std::mem::zeroed() };
        unsafe { sys::gf_kernel_desc_init(&mut d, size_of::<sys::gf_kernel_desc>() as u32) };
        d.name = name.as_ptr();
        d.cpu_fn = Some(cpu_trampoline);
        d.user_data = bodies as *mut c_void;
        d.user_data_destroy = Some(destroy_bodies);
        let status = unsafe { sys::gf_pool_register_kernel(self.raw(), &d) };
        if status != sys::GF_OK {
            // On failure user_data stays ours.
            destroy_bodies(bodies as *mut c_void);
        }
        check(status)
    }

    /// Loads the C plugin library at `path` and registers its kernels (a name without '/' is
    /// searched as dlopen does). It stays loaded until the pool is dropped.
    pub fn load_plugin(&self, path: &Path) -> Result<()> {
        let path = path_c_string(path, "the plugin path")?;
        check(unsafe { sys::gf_pool_load_plugin(self.raw(), path.as_ptr()) })
    }

    /// The names of the pool's kernels, in registration order.
    pub fn kernel_names(&self) -> Result<Vec<String>> {
        let mut n = 0;
        check(unsafe { sys::gf_pool_kernel_count(&mut n, self.raw()) })?;
        (0..n)
            .map(|i| {
                let mut p = ptr::null();
                check(unsafe { sys::gf_pool_kernel_name(&mut p, self.raw(), i) })?;
                Ok(unsafe { copy_str(p) }.unwrap_or_default())
            })
            .collect()
    }
}
