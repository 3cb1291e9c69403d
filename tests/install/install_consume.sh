#!/usr/bin/env bash
# install.consume: installs BUILD into a temporary prefix, then uses the installed gpuflow as a
# user would: (a) a CMake project with find_package(gpuflow), (b) the same program compiled with
# `cc $(pkg-config --cflags --libs gpuflow)`, (c) the installed `gpuflow` command running the
# installed seed.json with the installed plugin, with no LD_LIBRARY_PATH, (d) the installed
# service running it for a tcp:// client, through the installed gpuflow-relay, (e) the installed
# C++ header, gpuflow.hpp, compiled with the C++ compiler through pkg-config, when one is given.
# Usage: install_consume.sh BUILD_DIR CONSUMER_SOURCE_DIR LIBDIR DATADIR [C_COMPILER [FLAGS
#        [CXX_COMPILER]]]
# FLAGS (e.g. -fsanitize=address,undefined) are added to the consumer's compile and link: a
# sanitized libgpuflow needs its sanitizer runtime in the program.
# Exits 77 (a skip) when pkg-config is missing.
set -euo pipefail
build=$1 consumer_src=$2 libdir=$3 datadir=$4 cc=${5:-cc} flags=${6:-} cxx=${7:-}
if ! command -v pkg-config >/dev/null; then
  echo "install.consume: SKIPPED: pkg-config is not installed"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuflow-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset LD_LIBRARY_PATH GPUFLOW_LIBRARY GPUFLOW_RELAY
prefix=$tmp/prefix

echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; exit 1; }

echo "== (a) find_package(gpuflow)"
cmake -S "$consumer_src" -B "$tmp/consumer-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" >"$tmp/configure.log" \
  || { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/consumer-build"
# CMake's build tree RUNPATH points at $prefix/$libdir: no LD_LIBRARY_PATH needed.
"$tmp/consumer-build/consumer"

echo "== (b) pkg-config gpuflow"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
pkg-config --modversion gpuflow
# shellcheck disable=SC2046,SC2086
"$cc" -std=c11 $flags -o "$tmp/consumer-pc" "$consumer_src/consumer.c" $(pkg-config --cflags --libs gpuflow)
LD_LIBRARY_PATH=$(pkg-config --variable=libdir gpuflow) "$tmp/consumer-pc"
if [ -n "$cxx" ]; then
  echo "== (e) the installed gpuflow.hpp"
  # shellcheck disable=SC2046,SC2086
  "$cxx" -std=c++20 -Wall -Wextra -Wpedantic -Werror $flags -o "$tmp/consumer-hpp" \
    "$consumer_src/consumer_hpp.cpp" $(pkg-config --cflags --libs gpuflow)
  LD_LIBRARY_PATH=$(pkg-config --variable=libdir gpuflow) "$tmp/consumer-hpp"
fi

echo "== (c) the installed gpuflow command and plugin"
"$prefix/bin/gpuflow" --version
"$prefix/bin/gpuflow" run "$prefix/$datadir/gpuflow/examples/seed.json" \
  --plugin "$prefix/$libdir/gpuflow/plugins/seed_kernels.so" --no-progress
echo "== (d) the installed service finds its installed relay for a remote client"
"$prefix/bin/gpuflow" serve --backend host --emulated-devices 1 --socket "$tmp/s.sock" \
  --listen 127.0.0.1:0 --insecure-listen --token-file "$tmp/token" \
  --plugin "$prefix/$libdir/gpuflow/plugins/seed_kernels.so" >"$tmp/serve.out" 2>"$tmp/serve.err" &
serve_pid=$!
for _ in $(seq 100); do grep -q "remote clients connect to" "$tmp/serve.out" && break; sleep 0.1; done
endpoint=$(grep -o 'tcp+insecure://[0-9.:]*' "$tmp/serve.out" || true)
status=0
"$prefix/bin/gpuflow" run --pool "$endpoint" --token-file "$tmp/token" \
  --no-progress "$prefix/$datadir/gpuflow/examples/seed.json" || status=$?
kill "$serve_pid"; wait "$serve_pid" || true
if [ "$status" != 0 ] || ! grep -q "has a data plane (tcp (relayed))" "$tmp/serve.err"; then
  cat "$tmp/serve.out" "$tmp/serve.err"; exit 1
fi
echo "install.consume: OK"
