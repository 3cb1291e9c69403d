#!/usr/bin/env bash
# The Rust binding against a build tree: the generated bindings are current, then
# `cargo test --offline` (bindgen's layout tests, the layout tests against the library, the safe
# API's tests, doc tests) and both examples, checked as the C ones are.
# Usage: scripts/test-rust.sh [BUILD_DIR]   (default build; it must have built libgpuflow)
# Uses Debian's toolchain (rustc 1.63, the oldest the crates support) when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
scripts/regen-rust-sys.sh --check
if [ -x /usr/bin/cargo ] && [ -x /usr/bin/rustc ]; then
  export CARGO=/usr/bin/cargo RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
fi
cargo=${CARGO:-cargo}
export GPUFLOW_LIB_DIR=$build/src CARGO_TARGET_DIR=$build/rust-target
cd bindings/rust
"$cargo" test --offline --locked -q
"$cargo" run --offline --locked -q --example hello | grep -qx '10 + 1 = 11'
out=$("$cargo" run --offline --locked -q --example seed -- 1001 300)
echo "$out"
grep -qx 'seed: OK' <<<"$out"
echo "test-rust: OK"
