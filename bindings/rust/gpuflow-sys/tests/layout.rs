//! The Rust structs against the C library itself (bindgen's own layout tests, in bindings.rs,
//! check them against the header as clang saw it at generation): each gf_*_init function, given
//! room for a larger struct than it knows, writes exactly the library's sizeof into struct_size,
//! and a struct of the Rust size is accepted by the functions that take it.
use gpuflow_sys::*;
use std::mem::size_of;

/// The library's sizeof(T), as its init function reports it given 4 KiB of room.
fn library_size<T>(init: unsafe extern "C" fn(*mut T, u32)) -> usize {
    let mut room = [0u64; 512];
    unsafe { init(room.as_mut_ptr() as *mut T, 4096) };
    (room[0] & 0xffff_ffff) as usize
}

#[test]
fn init_functions_agree_with_rust_sizes() {
    assert_eq!(
        library_size(gf_pool_config_init),
        size_of::<gf_pool_config>()
    );
    assert_eq!(
        library_size(gf_buffer_desc_init),
        size_of::<gf_buffer_desc>()
    );
    assert_eq!(library_size(gf_task_desc_init), size_of::<gf_task_desc>());
    assert_eq!(
        library_size(gf_submit_options_init),
        size_of::<gf_submit_options>()
    );
    assert_eq!(
        library_size(gf_kernel_desc_init),
        size_of::<gf_kernel_desc>()
    );
    assert_eq!(
        library_size(gf_command_desc_init),
        size_of::<gf_command_desc>()
    );
}

#[test]
fn init_writes_defaults_at_rust_offsets() {
    let mut c: gf_pool_config = unsafe { std::mem::zeroed() };
    c.spill_threshold = 42.0;
    c.cpu_workers = 7;
    unsafe { gf_pool_config_init(&mut c, size_of::<gf_pool_config>() as u32) };
    assert_eq!(c.struct_size as usize, size_of::<gf_pool_config>());
    assert_eq!(c.backend, GF_BACKEND_AUTO);
    assert_eq!(c.cpu_workers, 0);
    assert_eq!(c.spill_threshold, 0.0);
}

#[test]
fn output_structs_of_rust_size_are_accepted() {
    unsafe {
        let mut config: gf_pool_config = std::mem::zeroed();
        gf_pool_config_init(&mut config, size_of::<gf_pool_config>() as u32);
        config.backend = GF_BACKEND_HOST;
        config.cpu_workers = 1;
        config.emulated_devices = 1;
        config.emulated_device_memory = 1 << 20;
        let mut pool = std::ptr::null_mut();
        assert_eq!(
            gf_pool_create_versioned(&mut pool, &config, GF_VERSION_MAJOR),
            GF_OK
        );

        let mut w: gf_worker_info = std::mem::zeroed();
        w.struct_size = size_of::<gf_worker_info>() as u32;
        assert_eq!(gf_pool_worker_info(&mut w, pool, 1), GF_OK);
        assert_eq!(w.kind, GF_WORKER_GPU);
        assert_eq!(w.device, 0);

        let mut e: gf_ledger_entry = std::mem::zeroed();
        e.struct_size = size_of::<gf_ledger_entry>() as u32;
        assert_eq!(
            gf_pool_ledger_lookup(&mut e, pool, 1, b"gpu_memory\0".as_ptr() as _),
            GF_OK
        );
        assert_eq!(e.capacity, (1u64 << 20) as f64);

        let mut d: gf_device_info = std::mem::zeroed();
        d.struct_size = size_of::<gf_device_info>() as u32;
        assert_eq!(gf_pool_device_info(&mut d, pool, 0), GF_OK);
        assert_eq!(d.pool_memory, 1 << 20);

        let mut m: gf_device_memory = std::mem::zeroed();
        m.struct_size = size_of::<gf_device_memory>() as u32;
        assert_eq!(gf_pool_device_memory(&mut m, pool, 0), GF_OK);
        assert_eq!(m.capacity, 1 << 20);
        gf_pool_destroy(pool);
    }
}
