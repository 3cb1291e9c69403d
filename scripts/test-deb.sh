#!/usr/bin/env bash
# The Debian package, as a site installs it: builds it from BUILD_DIR (configured with
# -DCMAKE_INSTALL_PREFIX=/usr), installs it with apt-get, uses it as a user and an administrator
# would, then removes and purges it and checks that nothing is left behind.
#
#   scripts/test-deb.sh BUILD_DIR
#
# It changes the machine (a package, a group, files under /usr and /etc), so it runs only as root,
# only where no gpuflow package is installed already, and exits 77 saying why otherwise.
set -euo pipefail
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)

skip() {
  echo "test-deb: SKIPPED: $*"
  exit 77
}
[[ $(id -u) -eq 0 ]] || skip "installing a package needs root"
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || skip "no apt-get/dpkg-deb here"
if dpkg-query -W -f='${Status}' gpuflow 2>/dev/null | grep -q "install ok installed"; then
  skip "a gpuflow package is installed on this machine already; not touching it"
fi
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
[[ "$prefix" == /usr ]] || {
  echo "test-deb: $build is configured with CMAKE_INSTALL_PREFIX=$prefix; a package needs /usr" >&2
  exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuflow-deb.XXXXXX")
installed=0
cleanup() {
  if ((installed)); then apt-get remove --purge -y -qq gpuflow >/dev/null 2>&1 || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "test-deb: FAILED: $*" >&2
  exit 1
}

echo "== cpack -G DEB"
(cd "$build" && cpack -G DEB -B "$tmp/out" >"$tmp/cpack.log" 2>&1) || {
  cat "$tmp/cpack.log"
  fail "cpack"
}
deb=$(ls "$tmp"/out/gpuflow_*.deb)
dpkg-deb -I "$deb" | grep -E '^ (Package|Version|Depends):'
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's#^\./#/#' | grep -v '/$' | sort >"$tmp/files"

echo "== apt-get install ./$(basename "$deb")"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$deb" \
  >"$tmp/apt.log" 2>&1 || {
  cat "$tmp/apt.log"
  fail "apt-get install"
}
installed=1

unset LD_LIBRARY_PATH GPUFLOW_LIBRARY GPUFLOW_RELAY GPUFLOW_POOL
echo "== the library by its SONAME, the command, the units"
ldconfig -p | grep -q 'libgpuflow.so.0 ' || fail "ldconfig does not know libgpuflow.so.0"
gpuflow --version
gpuflow info --backend host --emulated-devices 1 | grep -q "gpu:0" || fail "gpuflow info"
getent group gpuflow >/dev/null || fail "the package made no group gpuflow"
systemd-analyze verify --man=no /usr/lib/systemd/system/gpuflow.socket \
  /usr/lib/systemd/system/gpuflow.service || fail "systemd-analyze verify"
[[ -f /etc/gpuflow/serve.toml ]] || fail "no /etc/gpuflow/serve.toml"
man -w gpuflow >/dev/null 2>&1 || [[ -f /usr/share/man/man1/gpuflow.1 ]] || fail "no man page"

echo "== find_package(gpuflow) and pkg-config, from the system's own paths"
cmake -S "$here/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_BUILD_TYPE=Release \
  >"$tmp/consumer.log" 2>&1 || {
  cat "$tmp/consumer.log"
  fail "find_package(gpuflow)"
}
cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 || {
  cat "$tmp/consumer.log"
  fail "building against the package"
}
pkg-config --exists gpuflow || fail "pkg-config gpuflow"
# shellcheck disable=SC2046
cc -o "$tmp/pc_consumer" "$here/tests/install/consumer/consumer.c" $(pkg-config --cflags --libs gpuflow) ||
  fail "cc \$(pkg-config --cflags --libs gpuflow)"
"$tmp/pc_consumer" >/dev/null || fail "a program linked through pkg-config"

echo "== the installed seed example on the installed plugin"
plugin=$(grep '/plugins/seed_kernels.so$' "$tmp/files")
gpuflow run /usr/share/gpuflow/examples/seed.json --plugin "$plugin" --backend host \
  --emulated-devices 2 --no-progress --quiet || fail "gpuflow run seed.json"

echo "== apt-get remove --purge"
apt-get remove --purge -y -qq gpuflow >"$tmp/remove.log" 2>&1 || {
  cat "$tmp/remove.log"
  fail "apt-get remove --purge"
}
installed=0
left=()
while IFS= read -r f; do [[ -e "$f" ]] && left+=("$f"); done <"$tmp/files"
[[ -e /etc/gpuflow ]] && left+=(/etc/gpuflow)
((${#left[@]} == 0)) || fail "left behind after purge: ${left[*]}"
getent group gpuflow >/dev/null && fail "the group gpuflow is still there after purge"
echo "test-deb: PASS"
