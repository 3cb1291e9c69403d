//! The tests and examples of this crate run against the libgpuflow that gpuflow-sys found: its
//! directory goes into their RUNPATH, so no LD_LIBRARY_PATH is needed.
fn main() {
    if let Ok(dir) = std::env::var("DEP_GPUFLOW_LIB_DIR") {
        println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{dir}");
        println!("cargo:rustc-link-arg-examples=-Wl,-rpath,{dir}");
    }
}
