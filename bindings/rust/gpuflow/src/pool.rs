//! Pools: CPU workers plus one worker per device (real or emulated).
use crate::error::{c_string, check, Error, Result};
use crate::events::EventFn;
use gpuflow_sys as sys;
use std::ffi::{CStr, CString};
use std::mem::{size_of, MaybeUninit};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::{Arc, Mutex};

/// Which devices a pool drives (gf_backend).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Backend {
    /// Real GPUs when the CUDA backend finds some, else emulated devices.
    Auto,
    /// Emulated devices in host memory: runs anywhere.
    Host,
    /// Real GPUs; creating the pool fails if none is usable.
    Cuda,
}

/// A pool's configuration (gf_pool_config); `None` and empty lists mean the library's default,
/// as documented in gpuflow.h.
#[derive(Clone, Debug, Default)]
pub struct PoolConfig {
    pub backend: Option<Backend>,
    pub cpu_workers: Option<i32>,
    /// Host backend only; `Some(0)` means none.
    pub emulated_devices: Option<i32>,
    pub emulated_device_memory: Option<u64>,
    /// Bytes per second; negative: as fast as memcpy.
    pub emulated_bandwidth: Option<f64>,
    pub gpu_worker_threads: Option<u32>,
    pub cpu_worker_labels: Vec<(String, f64)>,
    pub gpu_worker_labels: Vec<(String, f64)>,
    /// CUDA backend only: the device ordinals to use.
    pub devices: Vec<i32>,
    pub device_memory_limit: Option<u64>,
    pub spill_threshold: Option<f64>,
    /// The service to connect to ("unix:///path.sock", a socket path, or "tcp://HOST:PORT");
    /// `None`: GPUFLOW_POOL when set, else an embedded pool. See `Pool::connect`.
    pub endpoint: Option<String>,
    /// For a "tcp://" endpoint: the file whose first line is the service's token; `None`:
    /// GPUFLOW_TOKEN_FILE.
    pub token_file: Option<PathBuf>,
    /// "HOST:PORT" to serve the pool's live page and Prometheus metrics on ("127.0.0.1:0": any
    /// free port; `Pool::dashboard_url` tells which); `None`: none.
    pub dashboard: Option<String>,
}

impl PoolConfig {
    /// A host-backend pool of `cpu_workers` CPU workers and `devices` emulated devices of
    /// `device_memory` bytes each: the same on every machine, for tests and examples.
    pub fn host(cpu_workers: i32, devices: i32, device_memory: u64) -> PoolConfig {
        PoolConfig {
            backend: Some(Backend::Host),
            cpu_workers: Some(cpu_workers),
            emulated_devices: Some(devices),
            emulated_device_memory: Some(device_memory),
            ..PoolConfig::default()
        }
    }
}

/// Builds the C view of `config` and hands it to `f` while the strings and lists it points
/// into are alive (the library copies them during the call): for pools and services alike.
pub(crate) fn with_c_config<R>(
    config: &PoolConfig,
    f: impl FnOnce(&sys::gf_pool_config) -> Result<R>,
) -> Result<R> {
    // SAFETY: init writes at most size_of bytes.
    let mut c: sys::gf_pool_config = unsafe {
        let mut c = MaybeUninit::<sys::gf_pool_config>::zeroed();
        sys::gf_pool_config_init(c.as_mut_ptr(), size_of::<sys::gf_pool_config>() as u32);
        c.assume_init()
    };
    c.backend = match config.backend.unwrap_or(Backend::Auto) {
        Backend::Auto => sys::GF_BACKEND_AUTO,
        Backend::Host => sys::GF_BACKEND_HOST,
        Backend::Cuda => sys::GF_BACKEND_CUDA,
    };
    c.cpu_workers = config.cpu_workers.unwrap_or(0);
    c.emulated_devices = match config.emulated_devices {
        Some(0) => -1,
        Some(n) => n,
        None => 0,
    };
    c.emulated_device_memory = config.emulated_device_memory.unwrap_or(0);
    c.emulated_bandwidth = config.emulated_bandwidth.unwrap_or(0.0);
    c.gpu_worker_threads = config.gpu_worker_threads.unwrap_or(0);
    let (_cpu_names, cpu) = labels(&config.cpu_worker_labels, "a CPU worker label")?;
    let (_gpu_names, gpu) = labels(&config.gpu_worker_labels, "a GPU worker label")?;
    c.cpu_worker_labels = ptr_or_null(&cpu);
    c.cpu_worker_label_count = len_u32(cpu.len(), "CPU worker labels")?;
    c.gpu_worker_labels = ptr_or_null(&gpu);
    c.gpu_worker_label_count = len_u32(gpu.len(), "GPU worker labels")?;
    c.devices = ptr_or_null(&config.devices);
    c.device_count = len_u32(config.devices.len(), "devices")?;
    c.device_memory_limit = config.device_memory_limit.unwrap_or(0);
    c.spill_threshold = config.spill_threshold.unwrap_or(0.0);
    let endpoint = opt_c_string(config.endpoint.as_deref(), "the endpoint")?;
    c.endpoint = opt_ptr(&endpoint);
    let token_file = match &config.token_file {
        Some(p) => Some(path_c_string(p, "the token file")?),
        None => None,
    };
    c.token_file = opt_ptr(&token_file);
    let dashboard = opt_c_string(config.dashboard.as_deref(), "the dashboard address")?;
    c.dashboard = opt_ptr(&dashboard);
    f(&c)
}

pub(crate) fn opt_c_string(s: Option<&str>, what: &str) -> Result<Option<CString>> {
    s.map(|s| c_string(s, what)).transpose()
}

pub(crate) fn path_c_string(p: &Path, what: &str) -> Result<CString> {
    let s = p
        .to_str()
        .ok_or_else(|| Error::invalid(format!("{what} is not UTF-8: {}", p.display())))?;
    c_string(s, what)
}

/// NULL for an empty list (the C ABI's "none"), else its first element.
pub(crate) fn ptr_or_null<T>(v: &[T]) -> *const T {
    if v.is_empty() {
        ptr::null()
    } else {
        v.as_ptr()
    }
}

/// NULL for `None` (the library's default), else the string's pointer.
pub(crate) fn opt_ptr(s: &Option<CString>) -> *const std::os::raw::c_char {
    s.as_ref().map_or(ptr::null(), |s| s.as_ptr())
}

/// Copies library-owned bytes out and frees them.
pub(crate) fn take_bytes(mut b: sys::gf_bytes) -> Vec<u8> {
    let v = if b.data.is_null() || b.size == 0 {
        Vec::new()
    } else {
        // SAFETY: the library handed over `size` readable bytes at `data`.
        unsafe { std::slice::from_raw_parts(b.data as *const u8, b.size as usize) }.to_vec()
    };
    // SAFETY: b came from the library and is freed exactly once.
    unsafe { sys::gf_bytes_free(&mut b) };
    v
}

fn labels(list: &[(String, f64)], what: &str) -> Result<(Vec<CString>, Vec<sys::gf_resource>)> {
    let names = list
        .iter()
        .map(|(n, _)| c_string(n, what))
        .collect::<Result<Vec<_>>>()?;
    let resources = names
        .iter()
        .zip(list)
        .map(|(n, (_, amount))| sys::gf_resource {
            name: n.as_ptr(),
            amount: *amount,
        })
        .collect();
    Ok((names, resources))
}

fn len_u32(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::invalid(format!("too many {what}")))
}

/// A pool of workers. Thread-safe (every gf_pool_* call but destroy is, and destroy is `Drop`):
/// share it between threads by reference or in an `Arc`. Runs keep what they need of the pool
/// alive, so a `Run` may outlive its `Pool` (its unfinished tasks are cancelled when the pool
/// is dropped).
pub struct Pool {
    raw: *mut sys::gf_pool,
    /// Every event callback ever set: one replaced may still be finishing a call.
    event_callbacks: Mutex<Vec<Arc<Box<EventFn>>>>,
}

// SAFETY: gpuflow.h documents every gf_pool_* function taking a pool as thread-safe except
// gf_pool_destroy, which Drop calls with exclusive access.
unsafe impl Send for Pool {}
unsafe impl Sync for Pool {}

impl Pool {
    /// Creates a pool and starts its workers.
    pub fn new(config: &PoolConfig) -> Result<Pool> {
        with_c_config(config, |c| {
            let mut raw = ptr::null_mut();
            // SAFETY: every pointer in c lives until the call returns; the library copies them.
            check(unsafe { sys::gf_pool_create_versioned(&mut raw, c, sys::GF_VERSION_MAJOR) })?;
            Ok(Pool {
                raw,
                event_callbacks: Mutex::new(Vec::new()),
            })
        })
    }

    /// A pool connected to the node's service at `endpoint` ("unix:///path.sock", a socket
    /// path, or "tcp://HOST:PORT" with GPUFLOW_TOKEN_FILE): its devices are leased from the
    /// service. Fails with GF_ERR_SYSTEM naming the endpoint when nothing listens there.
    pub fn connect(endpoint: &str) -> Result<Pool> {
        Pool::new(&PoolConfig {
            endpoint: Some(endpoint.to_string()),
            ..PoolConfig::default()
        })
    }

    /// Like `connect`, for a "tcp://HOST:PORT" service on another host, showing the token in
    /// the first line of `token_file`.
    pub fn connect_with_token(endpoint: &str, token_file: &Path) -> Result<Pool> {
        Pool::new(&PoolConfig {
            endpoint: Some(endpoint.to_string()),
            token_file: Some(token_file.to_path_buf()),
            ..PoolConfig::default()
        })
    }

    /// The service's view of the node (`gpuflow status`): devices, leases, queued requests
    /// and clients, as a table (`json` false) or one JSON object. GF_ERR_STATE for an
    /// embedded pool.
    pub fn service_status(&self, json: bool) -> Result<String> {
        let format = if json {
            sys::GF_STATUS_JSON
        } else {
            sys::GF_STATUS_TEXT
        };
        let mut out = sys::gf_bytes {
            data: ptr::null_mut(),
            size: 0,
        };
        // SAFETY: the pool is alive; out receives a caller-owned allocation, freed by take_bytes.
        check(unsafe { sys::gf_pool_service_status(&mut out, self.raw, format) })?;
        Ok(String::from_utf8_lossy(&take_bytes(out)).into_owned())
    }

    /// The default pool: one CPU worker per core and, without a GPU, two emulated devices
    /// (environment variables override it: README.md).
    pub fn with_defaults() -> Result<Pool> {
        Pool::new(&PoolConfig::default())
    }

    pub(crate) fn raw(&self) -> *mut sys::gf_pool {
        self.raw
    }

    pub(crate) fn keep_event_callback(&self, callback: Arc<Box<EventFn>>) {
        self.event_callbacks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(callback);
    }

    pub fn worker_count(&self) -> Result<u32> {
        let mut n = 0;
        check(unsafe { sys::gf_pool_worker_count(&mut n, self.raw) })?;
        Ok(n)
    }

    /// Describes worker `worker`.
    pub fn worker_info(&self, worker: u32) -> Result<WorkerInfo> {
        let mut w: sys::gf_worker_info = unsafe { std::mem::zeroed() };
        w.struct_size = size_of::<sys::gf_worker_info>() as u32;
        check(unsafe { sys::gf_pool_worker_info(&mut w, self.raw, worker) })?;
        Ok(WorkerInfo {
            gpu: w.kind == sys::GF_WORKER_GPU,
            device: if w.device >= 0 {
                Some(w.device as u32)
            } else {
                None
            },
            threads: w.threads,
            emulated: w.emulated != 0,
            // SAFETY: owned by the pool, valid while it lives; copied here.
            name: unsafe { CStr::from_ptr(w.name) }
                .to_string_lossy()
                .into_owned(),
        })
    }

    /// The ledger line of `resource` on worker `worker` (GF_ERR_NOT_FOUND when it does not
    /// advertise it).
    pub fn ledger(&self, worker: u32, resource: &str) -> Result<LedgerEntry> {
        let name = c_string(resource, "the resource name")?;
        let mut e: sys::gf_ledger_entry = unsafe { std::mem::zeroed() };
        e.struct_size = size_of::<sys::gf_ledger_entry>() as u32;
        check(unsafe { sys::gf_pool_ledger_lookup(&mut e, self.raw, worker, name.as_ptr()) })?;
        Ok(LedgerEntry::from_raw(&e))
    }

    pub fn device_count(&self) -> Result<u32> {
        let mut n = 0;
        check(unsafe { sys::gf_pool_device_count(&mut n, self.raw) })?;
        Ok(n)
    }

    /// Bytes of device `device` the pool may use (its gpu_memory capacity).
    pub fn device_memory(&self, device: u32) -> Result<u64> {
        let mut m: sys::gf_device_memory = unsafe { std::mem::zeroed() };
        m.struct_size = size_of::<sys::gf_device_memory>() as u32;
        check(unsafe { sys::gf_pool_device_memory(&mut m, self.raw, device) })?;
        Ok(m.capacity)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: &mut self: no other call uses the pool now or later. The event callbacks are
        // dropped after this, once no worker can call them.
        unsafe { sys::gf_pool_destroy(self.raw) }
    }
}

/// What `Pool::worker_info` reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerInfo {
    pub gpu: bool,
    pub device: Option<u32>,
    pub threads: u32,
    pub emulated: bool,
    pub name: String,
}

/// One line of a worker's resource ledger.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LedgerEntry {
    pub capacity: f64,
    pub in_use: f64,
    pub peak_in_use: f64,
}

impl LedgerEntry {
    pub(crate) fn from_raw(e: &sys::gf_ledger_entry) -> LedgerEntry {
        LedgerEntry {
            capacity: e.capacity,
            in_use: e.in_use,
            peak_in_use: e.peak_in_use,
        }
    }
}
