//! The embedded service (gf_service_*): the node's device owner and lease ledger, run on a
//! thread of this process, so that programs and tests can connect pools to it in-process.
//!
//! ```
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
use crate::error::{check, Error, Result};
use crate::pool::{opt_c_string, opt_ptr, path_c_string, ptr_or_null, with_c_config, PoolConfig};
use gpuflow_sys as sys;
use std::ffi::{CStr, CString};
use std::mem::{size_of, MaybeUninit};
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::ptr;
use std::time::Duration;

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
    /// A group name: the socket is 0660 and that group's, for a node-wide service; `None`:
    /// 0600, this user's only.
    pub group: Option<String>,
    /// How fast fair share forgets past use; `None`: 300 s.
    pub usage_half_life: Option<Duration>,
    /// Fair-share weights of users, "alice=3,bob=1,1001=2"; users not listed weigh 1.
    pub user_weights: Option<String>,
    /// "HOST:PORT" for the live page and /metrics; `None`: none.
    pub dashboard: Option<String>,
    /// Kernel plugin libraries that graphs run inside the service may name.
    pub plugins: Vec<PathBuf>,
    /// "HOST:PORT" to accept clients of other hosts on, with `token_file`'s token.
    pub listen: Option<String>,
    pub token_file: Option<PathBuf>,
    /// Between SIGTERM and SIGKILL for a job whose holder went without releasing its lease;
    /// `None`: 10 s.
    pub job_kill_grace: Option<Duration>,
}

/// A running service. Stopped on drop: every client is disconnected and its leases end
/// (their holders see them revoked). `Send + Sync`: gpuflow.h makes every gf_service_* call
/// but stop thread-safe, and stop is `Drop`, with exclusive access; the log callback is
/// `Send + Sync` too.
pub struct Service {
    raw: *mut sys::gf_service,
    /// The log callback, dropped after the service has stopped.
    _log: Option<Box<Box<LogFn>>>,
}

type LogFn = dyn Fn(&str) + Send + Sync;

extern "C" fn on_log(line: *const c_char, user_data: *mut c_void) {
    // SAFETY: user_data is the Service's Box<LogFn>, alive until after gf_service_stop; line is
    // valid for the call. A panic stops here, on the service's thread.
    let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
        let f = &*(user_data as *const Box<LogFn>);
        f(&CStr::from_ptr(line).to_string_lossy())
    }));
}

/// The policy fields (and the strings they point into) of a config, in C.
struct CPolicy {
    user_weights: Option<CString>,
}

impl CPolicy {
    fn new(config: &ServiceConfig) -> Result<CPolicy> {
        Ok(CPolicy {
            user_weights: opt_c_string(config.user_weights.as_deref(), "the user weights")?,
        })
    }

    fn fill(&self, config: &ServiceConfig, c: &mut sys::gf_service_config) {
        c.client_gpu_cap = config.client_gpu_cap.unwrap_or(0.0);
        c.user_gpu_cap = config.user_gpu_cap.unwrap_or(0.0);
        c.usage_half_life_s = config.usage_half_life.map_or(0.0, |d| d.as_secs_f64());
        c.user_weights = opt_ptr(&self.user_weights);
    }
}

fn blank_config() -> sys::gf_service_config {
    // SAFETY: all zeroes is GF_SERVICE_CONFIG_INIT but for struct_size, set next (NULL
    // pointers, no log callback, zero numbers).
    let mut c: sys::gf_service_config = unsafe { MaybeUninit::zeroed().assume_init() };
    c.struct_size = size_of::<sys::gf_service_config>() as u32;
    c
}

// SAFETY: see the type's comment: stop is the only call that is not thread-safe.
unsafe impl Send for Service {}
unsafe impl Sync for Service {}

impl Service {
    /// Starts the service; returns once it accepts connections. A live socket already at
    /// `socket_path` is GF_ERR_STATE naming it. Its log lines go to standard error.
    pub fn start(config: &ServiceConfig) -> Result<Service> {
        Service::start_inner(config, None)
    }

    /// `start`, with every line the service logs (connects, leases, refusals, policy changes)
    /// given to `log` on the service's thread instead. `log` must not call into the service.
    pub fn start_with_log<F: Fn(&str) + Send + Sync + 'static>(
        config: &ServiceConfig,
        log: F,
    ) -> Result<Service> {
        Service::start_inner(config, Some(Box::new(Box::new(log))))
    }

    fn start_inner(config: &ServiceConfig, log: Option<Box<Box<LogFn>>>) -> Result<Service> {
        let path =
            |p: &Option<PathBuf>, what| p.as_deref().map(|p| path_c_string(p, what)).transpose();
        let socket = path(&config.socket_path, "the socket path")?;
        let token_file = path(&config.token_file, "the token file")?;
        let group = opt_c_string(config.group.as_deref(), "the group")?;
        let dashboard = opt_c_string(config.dashboard.as_deref(), "the dashboard address")?;
        let listen = opt_c_string(config.listen.as_deref(), "the listen address")?;
        let plugins = config
            .plugins
            .iter()
            .map(|p| path_c_string(p, "a plugin path"))
            .collect::<Result<Vec<_>>>()?;
        let plugin_ptrs: Vec<*const c_char> = plugins.iter().map(|p| p.as_ptr()).collect();
        let policy = CPolicy::new(config)?;
        let pool = config.pool.clone().unwrap_or_default();
        with_c_config(&pool, |pool_c| {
            let mut c = blank_config();
            c.pool = pool_c;
            c.socket_path = opt_ptr(&socket);
            c.group = opt_ptr(&group);
            policy.fill(config, &mut c);
            c.dashboard = opt_ptr(&dashboard);
            c.plugins = ptr_or_null(&plugin_ptrs);
            c.plugin_count =
                u32::try_from(plugin_ptrs.len()).map_err(|_| Error::invalid("too many plugins"))?;
            c.listen = opt_ptr(&listen);
            c.token_file = opt_ptr(&token_file);
            c.job_kill_grace_s = config.job_kill_grace.map_or(0.0, |d| d.as_secs_f64());
            if let Some(f) = &log {
                c.log = Some(on_log);
                c.log_user_data = &**f as *const Box<LogFn> as *mut c_void;
            }
            let mut raw = ptr::null_mut();
            // SAFETY: every pointer in c lives until the call returns; the library copies them.
            check(unsafe { sys::gf_service_start(&mut raw, &c) })?;
            Ok(Service { raw, _log: log })
        })
    }

    /// Replaces the policy with `config`'s user_weights, client_gpu_cap, user_gpu_cap and
    /// usage_half_life (`None`: the default, as at start); its other fields are ignored. Leases
    /// held and requests queued stay; returns once the service applies it. A bad value is
    /// GF_ERR_INVALID_ARGUMENT naming it, and nothing changes.
    pub fn update_policy(&self, config: &ServiceConfig) -> Result<()> {
        let policy = CPolicy::new(config)?;
        let mut c = blank_config();
        policy.fill(config, &mut c);
        // SAFETY: the strings c points into live in `policy` until the call returns.
        check(unsafe { sys::gf_service_update_policy(self.raw, &c) })
    }

    /// The live page ("http://HOST:PORT/") when `dashboard` was set.
    pub fn dashboard_url(&self) -> Option<String> {
        // SAFETY: owned by the service, valid while it runs; copied at once.
        unsafe { copy_str(sys::gf_service_dashboard_url(self.raw)) }
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
