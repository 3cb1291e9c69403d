//! The embedded service (gf_service_*): the node's device owner and lease ledger, run on a
//! thread of this process, so that programs and tests can connect pools to it in-process.
//!
//! (`no_run`, as the crate's own example: a doc test's binary gets no RUNPATH to libgpuflow;
//! tests/ runs the same steps.)
//!
//! ```no_run
//! use gpuflow::{LeaseRequest, Pool, PoolConfig, Service, ServiceConfig};
//! let dir = std::env::temp_dir().join(format!("gpuflow-doc-service-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let service = Service::start(&ServiceConfig {
//!     pool: Some(PoolConfig::host(2, 2, 1 << 20)),
//!     socket_path: Some(dir.join("s.sock")),
//!     ..ServiceConfig::default()
//! })?;
//! let pool = Pool::connect(&service.endpoint())?;
//! let lease = pool.lease(&LeaseRequest::gpus(1.0), None)?.expect("no timeout given");
//! assert_eq!(lease.devices()?.len(), 1);
//! lease.release()?;
//! # Ok::<(), gpuflow::Error>(())
//! ```
use crate::error::{check, Result};
use crate::pool::{opt_ptr, path_c_string, with_c_config, PoolConfig};
use gpuflow_sys as sys;
use std::ffi::CStr;
use std::mem::{size_of, MaybeUninit};
use std::path::PathBuf;
use std::ptr;

/// What to serve and where (gf_service_config); `None` means the library's default.
#[derive(Clone, Debug, Default)]
pub struct ServiceConfig {
    /// The devices and CPUs to lease out (backend, emulated devices, cpu_workers...).
    pub pool: Option<PoolConfig>,
    /// The unix socket to listen on; `None`: $XDG_RUNTIME_DIR/gpuflow.sock or
    /// /tmp/gpuflow-$UID/gpuflow.sock.
    pub socket_path: Option<PathBuf>,
    /// GPUs one client may hold at once; `None`: no cap.
    pub client_gpu_cap: Option<f64>,
    /// GPUs one user may hold at once; `None`: no cap.
    pub user_gpu_cap: Option<f64>,
}

/// A running service. Stopped on drop: every client is disconnected and its leases end
/// (their holders see them revoked). `Send + Sync`: gpuflow.h makes every gf_service_* call
/// but stop thread-safe, and stop is `Drop`, with exclusive access.
pub struct Service {
    raw: *mut sys::gf_service,
}

// SAFETY: see the type's comment: stop is the only call that is not thread-safe.
unsafe impl Send for Service {}
unsafe impl Sync for Service {}

impl Service {
    /// Starts the service; returns once it accepts connections. A live socket already at
    /// `socket_path` is GF_ERR_STATE naming it.
    pub fn start(config: &ServiceConfig) -> Result<Service> {
        let socket = match &config.socket_path {
            Some(p) => Some(path_c_string(p, "the socket path")?),
            None => None,
        };
        let pool = config.pool.clone().unwrap_or_default();
        with_c_config(&pool, |pool_c| {
            // SAFETY: all zeroes is GF_SERVICE_CONFIG_INIT but for struct_size, set next
            // (NULL pointers, no log callback, zero numbers).
            let mut c: sys::gf_service_config = unsafe { MaybeUninit::zeroed().assume_init() };
            c.struct_size = size_of::<sys::gf_service_config>() as u32;
            c.pool = pool_c;
            c.socket_path = opt_ptr(&socket);
            c.client_gpu_cap = config.client_gpu_cap.unwrap_or(0.0);
            c.user_gpu_cap = config.user_gpu_cap.unwrap_or(0.0);
            let mut raw = ptr::null_mut();
            // SAFETY: every pointer in c lives until the call returns; the library copies them.
            check(unsafe { sys::gf_service_start(&mut raw, &c) })?;
            Ok(Service { raw })
        })
    }

    /// The endpoint clients connect to ("unix:///…"), for `Pool::connect`.
    pub fn endpoint(&self) -> String {
        // SAFETY: owned by the service, valid while it runs (we hold it); copied at once.
        unsafe { copy_str(sys::gf_service_endpoint(self.raw)) }.unwrap_or_default()
    }

    /// Where clients of other hosts connect ("tcp://HOST:PORT"); `None` without a listen
    /// address.
    pub fn remote_endpoint(&self) -> Option<String> {
        // SAFETY: as for endpoint; NULL when there is none.
        unsafe { copy_str(sys::gf_service_remote_endpoint(self.raw)) }
    }

    /// Stops the service now (what drop does), for code that wants the point explicit.
    pub fn stop(self) {
        drop(self)
    }
}

/// Where a service listens when given no socket path ("unix:///…").
pub fn default_endpoint() -> String {
    // SAFETY: static storage.
    unsafe { copy_str(sys::gf_default_endpoint()) }.unwrap_or_default()
}

/// Copies a C string the library owns; `None` for NULL.
///
/// # Safety
/// `p` is NULL or a valid NUL-terminated string for the duration of the call.
pub(crate) unsafe fn copy_str(p: *const std::os::raw::c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        Some(CStr::from_ptr(p).to_string_lossy().into_owned())
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        // SAFETY: &mut self: no other call uses the service now or later.
        unsafe { sys::gf_service_stop(self.raw) }
    }
}
