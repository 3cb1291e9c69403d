//! Finds libgpuflow: GPUFLOW_LIB_DIR first (a directory holding libgpuflow.so, e.g. a build
//! tree's `build/src`), then `pkg-config gpuflow` (an installed gpuflow). Tells dependents the
//! directory as DEP_GPUFLOW_LIB_DIR, so their tests and examples can find the library at run time.
use std::env;
use std::path::Path;
use std::process::Command;

fn from_env() -> Option<String> {
    let dir = env::var("GPUFLOW_LIB_DIR").ok().filter(|d| !d.is_empty())?;
    if !Path::new(&dir).join("libgpuflow.so").exists() {
        panic!(
            "gpuflow-sys: GPUFLOW_LIB_DIR is {dir}, which has no libgpuflow.so \
             (it should name the directory holding it, e.g. build/src of a gpuflow build tree)"
        );
    }
    Some(dir)
}

fn from_pkg_config() -> Option<String> {
    let out = Command::new("pkg-config")
        .args(["--variable=libdir", "gpuflow"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = String::from_utf8(out.stdout).ok()?.trim().to_string();
    if dir.is_empty() {
        None
    } else {
        Some(dir)
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=GPUFLOW_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    let dir = from_env().or_else(from_pkg_config).unwrap_or_else(|| {
        panic!(
            "gpuflow-sys: cannot find libgpuflow. Either set GPUFLOW_LIB_DIR to the directory \
             holding libgpuflow.so (a build tree's build/src), or install gpuflow \
             (cmake --install build --prefix PREFIX) so that `pkg-config gpuflow` finds it \
             (PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a non-system prefix)."
        )
    });
    println!("cargo:rustc-link-search=native={dir}");
    println!("cargo:rustc-link-lib=dylib=gpuflow");
    println!("cargo:lib_dir={dir}");
    // This crate's own tests find the library there at run time.
    println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{dir}");
}
