#!/usr/bin/env bash
# The Rust binding against a build tree: the generated bindings are current, the crates
# formatted (cargo fmt) and lint-free (clippy -D warnings), then
# `cargo test --offline` (bindgen's layout tests, the layout tests against the library, the safe
# API's tests, doc tests), both examples, checked as the C ones are, and the sys crate built
# against an installed gpuflow found through pkg-config.
# Usage: scripts/test-rust.sh [BUILD_DIR]   (default build; it must have built libgpuflow)
# Uses Debian's toolchain (rustc 1.63, the oldest the crates support; its rust-clippy and rustfmt)
# when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
scripts/regen-rust-sys.sh --check
if [ -x /usr/bin/cargo ] && [ -x /usr/bin/rustc ]; then
  export CARGO=/usr/bin/cargo RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
  # Its own clippy and rustfmt (Debian's rust-clippy and rustfmt, of the same release), not
  # those of another toolchain that comes first on PATH.
  export PATH=/usr/bin:$PATH
fi
cargo=${CARGO:-cargo}
export GPUFLOW_LIB_DIR=$build/src CARGO_TARGET_DIR=$build/rust-target
# Doc tests run too: their binaries get the library's directory as RUNPATH, as the crate's
# tests and examples do (its build.rs), since a build script cannot give them one. The service
# tests start the build's own `gpuflow serve`.
export RUSTDOCFLAGS="-C link-arg=-Wl,-rpath,$GPUFLOW_LIB_DIR"
export GPUFLOW_TOOL=$build/tools/gpuflow/gpuflow
cd bindings/rust
# Formatting and lints are part of the check, not extras of whichever toolchain is there.
for tool in fmt clippy; do
  if ! "$cargo" "$tool" --version >/dev/null 2>&1; then
    echo "test-rust: '$cargo $tool' is missing: install Debian's rustfmt and rust-clippy" \
      "(scripts/install-deps.sh does) or the toolchain's own" >&2
    exit 1
  fi
done
"$cargo" fmt --check || { echo "test-rust: not formatted: run cargo fmt in bindings/rust" >&2; exit 1; }
"$cargo" test --offline --locked
"$cargo" clippy --offline --locked --all-targets -q -- -D warnings
"$cargo" run --offline --locked -q --example hello | grep -qx '10 + 1 = 11'
out=$("$cargo" run --offline --locked -q --example seed -- 1001 300)
echo "$out"
grep -qx 'seed: OK' <<<"$out"
# An installed gpuflow, found through pkg-config alone: the sys crate's layout tests run against it.
prefix=$(mktemp -d "${TMPDIR:-/tmp}/gpuflow-rust-install.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
pc_dir=$(dirname "$(find "$prefix" -name gpuflow.pc | head -n1)")
env -u GPUFLOW_LIB_DIR PKG_CONFIG_PATH="$pc_dir" CARGO_TARGET_DIR="$build/rust-target-installed" \
  "$cargo" test --offline --locked -q -p gpuflow-sys --test layout
echo "test-rust: OK"
