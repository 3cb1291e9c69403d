//! What a pool has: its devices (gf_device_info), where their list came from, which can copy
//! into which, each worker's whole ledger, and diagnostics (dashboard, data plane).
//!
//! ```
//! use gpuflow::{Pool, PoolConfig};
//! let pool = Pool::new(&PoolConfig::host(1, 2, 64 << 20))?;
//! let device = pool.device_info(1)?;
//! assert!(device.emulated);
//! assert_eq!(device.pool_memory, 64 << 20);
//! let gpu_worker = (0..pool.worker_count()?)
//!     .find(|&w| pool.worker_info(w).map(|i| i.gpu).unwrap_or(false))
//!     .unwrap();
//! let ledger = pool.ledger_entries(gpu_worker)?;
//! assert!(ledger.iter().any(|(name, entry)| name == "GPU" && entry.capacity == 1.0));
//! # Ok::<(), gpuflow::Error>(())
//! ```
use crate::error::{check, Result};
use crate::pool::{take_bytes, LedgerEntry, Pool};
use crate::service::copy_str;
use gpuflow_sys as sys;
use std::mem::size_of;
use std::ptr;

/// A device of the pool (gf_device_info): a real GPU, or an emulated one in host memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The number gpuflow uses for it (`TaskEnv::device`).
    pub ordinal: i32,
    pub emulated: bool,
    /// Bytes the device has, and bytes the pool may use on it (its gpu_memory capacity).
    pub total_memory: u64,
    pub pool_memory: u64,
    /// The compute capability; (0, 0) when emulated.
    pub compute_capability: (i32, i32),
    pub name: String,
    /// "GPU-…" as nvidia-smi prints it; a stable fake one when emulated.
    pub uuid: String,
    /// "0000:3b:00.0"; "" when emulated.
    pub pci_bus_id: String,
}

impl Pool {
    /// Describes device `device` (0 <= device < `device_count`).
    pub fn device_info(&self, device: u32) -> Result<DeviceInfo> {
        let mut d: sys::gf_device_info = unsafe { std::mem::zeroed() };
        d.struct_size = size_of::<sys::gf_device_info>() as u32;
        check(unsafe { sys::gf_pool_device_info(&mut d, self.raw(), device) })?;
        // SAFETY: the strings are owned by the pool, valid while it lives; copied here.
        let text = |p| unsafe { copy_str(p) }.unwrap_or_default();
        Ok(DeviceInfo {
            ordinal: d.ordinal,
            emulated: d.emulated != 0,
            total_memory: d.total_memory,
            pool_memory: d.pool_memory,
            compute_capability: (d.compute_major, d.compute_minor),
            name: text(d.name),
            uuid: text(d.uuid),
            pci_bus_id: text(d.pci_bus_id),
        })
    }

    /// Where the pool's list of devices came from, in words ("CUDA_VISIBLE_DEVICES=1,3",
    /// "all the node shows", "the service's"...).
    pub fn devices_source(&self) -> Result<String> {
        let mut p = ptr::null();
        check(unsafe { sys::gf_pool_devices_source(&mut p, self.raw()) })?;
        Ok(unsafe { copy_str(p) }.unwrap_or_default())
    }

    /// True when device `from` can copy straight into device `to` (peer access); otherwise data
    /// between them is staged through pinned host memory.
    pub fn peer_access(&self, from: u32, to: u32) -> Result<bool> {
        let mut out = 0;
        check(unsafe { sys::gf_pool_peer_access(&mut out, self.raw(), from, to) })?;
        Ok(out != 0)
    }

    /// Every line of worker `worker`'s ledger, as (resource, line), one consistent snapshot per
    /// line.
    pub fn ledger_entries(&self, worker: u32) -> Result<Vec<(String, LedgerEntry)>> {
        let mut n = 0;
        check(unsafe { sys::gf_pool_ledger_size(&mut n, self.raw(), worker) })?;
        (0..n)
            .map(|i| {
                let mut e: sys::gf_ledger_entry = unsafe { std::mem::zeroed() };
                e.struct_size = size_of::<sys::gf_ledger_entry>() as u32;
                check(unsafe { sys::gf_pool_ledger_entry(&mut e, self.raw(), worker, i) })?;
                Ok((
                    unsafe { copy_str(e.resource) }.unwrap_or_default(),
                    LedgerEntry::from_raw(&e),
                ))
            })
            .collect()
    }

    /// The pool's live page ("http://127.0.0.1:PORT/"; `PoolConfig::dashboard`), or None when it
    /// serves none.
    pub fn dashboard_url(&self) -> Result<Option<String>> {
        let mut p = ptr::null();
        match unsafe { sys::gf_pool_dashboard_url(&mut p, self.raw()) } {
            sys::GF_ERR_NOT_FOUND => Ok(None),
            status => check(status).map(|()| unsafe { copy_str(p) }),
        }
    }

    /// For a connected pool: what UCX picked between this process and the service, and the
    /// time of puts and gets of several sizes over about `seconds`, as one JSON object
    /// (gf_data_plane_check documents its fields).
    pub fn data_plane_check(&self, seconds: f64) -> Result<String> {
        let mut out = sys::gf_bytes {
            data: ptr::null_mut(),
            size: 0,
        };
        check(unsafe { sys::gf_data_plane_check(&mut out, self.raw(), seconds) })?;
        Ok(String::from_utf8_lossy(&take_bytes(out)).into_owned())
    }
}
