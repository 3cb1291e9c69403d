//! Leases (gf_lease_*): grants of devices (whole, or a share of one) and CPUs from the node's
//! service, held by a connected pool until released.
//!
//! ```
//! use gpuflow::{LeaseRequest, Pool, PoolConfig, Service, ServiceConfig};
//! use std::time::Duration;
//! let dir = std::env::temp_dir().join(format!("gpuflow-doc-lease-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let service = Service::start(&ServiceConfig {
//!     pool: Some(PoolConfig::host(2, 1, 1 << 20)),
//!     socket_path: Some(dir.join("s.sock")),
//!     ..ServiceConfig::default()
//! })?;
//! let pool = Pool::connect(&service.endpoint())?;
//! let half = LeaseRequest::gpus(0.5).cpus(1.0).name("doc");
//! let lease = pool.lease(&half, Some(Duration::from_secs(5)))?.expect("granted in time");
//! assert_eq!(lease.devices()?[0].share, 0.5);
//! assert!(lease.environment()?.iter().any(|(k, _)| k == "GPUFLOW_LEASE_ID"));
//! assert!(!lease.revoked()?);
//! # Ok::<(), gpuflow::Error>(())
//! ```
use crate::error::{c_string, check, Error, Result};
use crate::pool::{opt_ptr, Pool};
use crate::service::copy_str;
use gpuflow_sys as sys;
use std::marker::PhantomData;
use std::mem::{size_of, MaybeUninit};
use std::ptr;
use std::time::Duration;

/// What to ask the service for (gf_lease_request), built by chaining: `LeaseRequest::gpus(0.5)
/// .memory(1 << 30).cpus(2.0)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LeaseRequest {
    /// 0: none; a fraction in (0, 1): a share of one device; N: N whole devices.
    pub gpus: f64,
    /// Bytes on each device; 0: the share's part of the device's memory.
    pub gpu_memory: u64,
    pub cpus: f64,
    /// Only these device ordinals; empty: any.
    pub devices: Vec<i32>,
    /// Orders this client's own requests (higher first).
    pub priority: i32,
    /// Shown by `gpuflow status`.
    pub name: Option<String>,
}

impl LeaseRequest {
    /// A request for `gpus` devices (a fraction for a share of one).
    pub fn gpus(gpus: f64) -> LeaseRequest {
        LeaseRequest {
            gpus,
            ..LeaseRequest::default()
        }
    }
    /// Bytes of each device granted.
    pub fn memory(mut self, bytes: u64) -> LeaseRequest {
        self.gpu_memory = bytes;
        self
    }
    pub fn cpus(mut self, cpus: f64) -> LeaseRequest {
        self.cpus = cpus;
        self
    }
    pub fn devices(mut self, ordinals: &[i32]) -> LeaseRequest {
        self.devices = ordinals.to_vec();
        self
    }
    pub fn priority(mut self, priority: i32) -> LeaseRequest {
        self.priority = priority;
        self
    }
    pub fn name(mut self, name: &str) -> LeaseRequest {
        self.name = Some(name.to_string());
        self
    }
}

/// One device of a lease (gf_lease_device).
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseDevice {
    /// The service's ordinal (PCI bus order).
    pub ordinal: i32,
    pub uuid: String,
    /// Empty when emulated.
    pub pci_bus_id: String,
    /// Of the device: 1 for a whole one.
    pub share: f64,
    /// Bytes of it.
    pub memory: u64,
}

/// A held lease, released on drop (or by `release`, which says whether the service heard).
/// It borrows its pool, so the pool cannot be dropped while a lease of it is held: the
/// lease's connection is the pool's:
///
/// ```compile_fail
/// # use gpuflow::{LeaseRequest, Pool};
/// let pool = Pool::connect("unix:///nowhere.sock").unwrap();
/// let lease = pool.lease(&LeaseRequest::gpus(1.0), None).unwrap().unwrap();
/// drop(pool); // error: `pool` is borrowed by `lease`
/// lease.release().unwrap();
/// ```
///
/// `Send + Sync`: every gf_lease_* call taking `&self` is
/// thread-safe; bind and release, externally synchronized, take `&mut self` / `self`.
pub struct Lease<'pool> {
    raw: *mut sys::gf_lease,
    _pool: PhantomData<&'pool Pool>,
}

// SAFETY: see the type's comment.
unsafe impl Send for Lease<'_> {}
unsafe impl Sync for Lease<'_> {}

impl Pool {
    /// Waits up to `timeout` (`None`: as long as it takes; zero: asks once) for a lease from
    /// the pool's service. A timeout is `Ok(None)`, not an error: nothing was granted and the
    /// caller may ask again. Errors: GF_ERR_STATE for an embedded pool, GF_ERR_INFEASIBLE for
    /// more than the node has (or above a cap), GF_ERR_INVALID_ARGUMENT for a bad field,
    /// GF_ERR_SYSTEM when the service went away.
    pub fn lease(
        &self,
        request: &LeaseRequest,
        timeout: Option<Duration>,
    ) -> Result<Option<Lease<'_>>> {
        let name = match &request.name {
            Some(n) => Some(c_string(n, "the lease name")?),
            None => None,
        };
        // SAFETY: all zeroes is GF_LEASE_REQUEST_INIT but for struct_size, set next.
        let mut r: sys::gf_lease_request = unsafe { MaybeUninit::zeroed().assume_init() };
        r.struct_size = size_of::<sys::gf_lease_request>() as u32;
        r.gpus = request.gpus;
        r.gpu_memory = request.gpu_memory;
        r.cpus = request.cpus;
        r.devices = if request.devices.is_empty() {
            ptr::null()
        } else {
            request.devices.as_ptr()
        };
        r.device_count = u32::try_from(request.devices.len())
            .map_err(|_| Error::invalid("too many devices in the lease request"))?;
        r.priority = request.priority;
        r.name = opt_ptr(&name);
        // Milliseconds, rounded up so that a tiny timeout still waits rather than asking once.
        let timeout_ms = match timeout {
            None => -1,
            Some(d) => i64::try_from((d.as_nanos() + 999_999) / 1_000_000).unwrap_or(i64::MAX),
        };
        let mut raw = ptr::null_mut();
        // SAFETY: the pool is alive; r's pointers live until the call returns (copied).
        let status = unsafe { sys::gf_lease_acquire(&mut raw, self.raw(), &r, timeout_ms) };
        if status == sys::GF_TIMEOUT {
            return Ok(None);
        }
        check(status)?;
        Ok(Some(Lease {
            raw,
            _pool: PhantomData,
        }))
    }
}

impl Lease<'_> {
    fn info(&self) -> Result<(u64, u32, f64)> {
        let (mut id, mut n, mut cpus) = (0, 0, 0.0);
        // SAFETY: the lease is alive while self is.
        check(unsafe { sys::gf_lease_info(&mut id, &mut n, &mut cpus, self.raw) })?;
        Ok((id, n, cpus))
    }

    /// The lease's id, as `gpuflow status` shows it.
    pub fn id(&self) -> Result<u64> {
        Ok(self.info()?.0)
    }

    /// CPUs granted.
    pub fn cpus(&self) -> Result<f64> {
        Ok(self.info()?.2)
    }

    /// The devices granted, in the service's order.
    pub fn devices(&self) -> Result<Vec<LeaseDevice>> {
        let (_, n, _) = self.info()?;
        (0..n)
            .map(|i| {
                // SAFETY: all zeroes then struct_size is GF_LEASE_DEVICE_INIT.
                let mut d: sys::gf_lease_device = unsafe { MaybeUninit::zeroed().assume_init() };
                d.struct_size = size_of::<sys::gf_lease_device>() as u32;
                // SAFETY: the lease is alive; i < its device count.
                check(unsafe { sys::gf_lease_device_info(&mut d, self.raw, i) })?;
                Ok(LeaseDevice {
                    ordinal: d.ordinal,
                    // SAFETY: owned by the lease, alive while self is; copied at once.
                    uuid: unsafe { copy_str(d.uuid) }.unwrap_or_default(),
                    // SAFETY: as for uuid.
                    pci_bus_id: unsafe { copy_str(d.pci_bus_id) }.unwrap_or_default(),
                    share: d.share,
                    memory: d.memory,
                })
            })
            .collect()
    }

    /// What a process running on the lease needs in its environment (CUDA_VISIBLE_DEVICES,
    /// GPUFLOW_LEASE_ID, ...), as (name, value) pairs in gpuflow.h's order: for
    /// `std::process::Command::envs`.
    pub fn environment(&self) -> Result<Vec<(String, String)>> {
        let mut p = ptr::null();
        // SAFETY: the lease is alive; *p is owned by it and copied before self can go.
        check(unsafe { sys::gf_lease_environment(&mut p, self.raw) })?;
        // SAFETY: p is the lease's NUL-terminated text, alive while self is; copied here.
        let text = unsafe { copy_str(p) }.unwrap_or_default();
        Ok(text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    /// True once the service has asked for the lease back (fair share, shutdown) or the
    /// connection is gone for good: finish what runs on it and release it. While the pool
    /// reconnects to a restarted service, false: that service keeps the lease for this process
    /// (gpuflow.h, "Shared pools").
    pub fn revoked(&self) -> Result<bool> {
        let mut r = 0;
        // SAFETY: the lease is alive while self is.
        check(unsafe { sys::gf_lease_revoked(&mut r, self.raw) })?;
        Ok(r != 0)
    }

    /// The processes of `process_group` (this host's, this user's) run on the lease: should
    /// this process end without releasing it, the service ends that group before handing the
    /// devices to anyone else.
    pub fn bind_process_group(&mut self, process_group: i64) -> Result<()> {
        // SAFETY: &mut self: externally synchronized with release as gpuflow.h asks.
        check(unsafe { sys::gf_lease_bind_process_group(self.raw, process_group) })
    }

    /// Hands the lease back. Err(GF_ERR_SYSTEM) when the service is gone (the lease ended with
    /// the connection anyway); while the pool reconnects, Ok: it is handed back once a service
    /// answers. Dropping ignores the status.
    pub fn release(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        // SAFETY: raw is ours and released once; Drop then sees NULL, which is ignored.
        check(unsafe { sys::gf_lease_release(raw) })
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        // SAFETY: &mut self; NULL (already released) is ignored by the library.
        unsafe { sys::gf_lease_release(self.raw) };
    }
}
