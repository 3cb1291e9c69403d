#!/usr/bin/env bash
# Installs the Debian 12 packages gpuflow needs to build and test, when they are missing.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config libgtest-dev libgmock-dev
  libflatbuffers-dev flatbuffers-compiler libuv1-dev clang libclang-rt-14-dev
  cargo rustc rust-clippy rustfmt bindgen abigail-tools iproute2 libmicrohttpd-dev chromium
  nlohmann-json3-dev libcli11-dev libucx-dev ucx-utils zlib1g-dev libssl-dev clang-format
  libtomlplusplus-dev libsystemd-dev systemd help2man dpkg-dev
  munge slurmctld slurmd slurm-client)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
