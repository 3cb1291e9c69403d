#!/bin/sh
# `gpuflow info` inside an allocation: it drives the devices handed down and says where the list
# came from; a list naming a device the node lacks is refused with exit status 2, naming it.
# usage: handed_down_test.sh GPUFLOW
gpuflow=$1
fail() { echo "FAIL: $*"; exit 1; }
clean() { env -u CUDA_VISIBLE_DEVICES -u SLURM_STEP_GPUS -u SLURM_JOB_GPUS \
  -u NVIDIA_VISIBLE_DEVICES GPUFLOW_EMULATED_DEVICES=4 "$@"; }
info() { clean "$@" "$gpuflow" info --backend host; }
emul() { printf 'GPU-00000000-gpuf-emul-0000-%012d' "$1"; }

out=$(info) || fail "info on the whole node: $out"
echo "$out" | grep -q '^devices: 4 (all the node shows)$' || fail "whole node: $out"

out=$(info CUDA_VISIBLE_DEVICES=1,3) || fail "info with CUDA_VISIBLE_DEVICES: $out"
echo "$out" | grep -q '^devices: 2 (CUDA_VISIBLE_DEVICES=1,3)$' || fail "CUDA_VISIBLE_DEVICES: $out"
echo "$out" | grep -q "^  0 .*$(emul 1)\$" || fail "device 0 is not the node's 1: $out"
echo "$out" | grep -q "^  1 .*$(emul 3)\$" || fail "device 1 is not the node's 3: $out"
echo "$out" | grep -q "$(emul 0)\|$(emul 2)" && fail "a device not handed down shows: $out"

out=$(info SLURM_JOB_GPUS=0,1,2 SLURM_STEP_GPUS=2) || fail "info with SLURM_STEP_GPUS: $out"
echo "$out" | grep -q '^devices: 1 (SLURM_STEP_GPUS=2)$' || fail "SLURM_STEP_GPUS: $out"
echo "$out" | grep -q "$(emul 2)\$" || fail "SLURM_STEP_GPUS device: $out"

out=$(info NVIDIA_VISIBLE_DEVICES=none) || fail "info with NVIDIA_VISIBLE_DEVICES: $out"
echo "$out" | grep -q '^devices: 0 (NVIDIA_VISIBLE_DEVICES=none)$' || fail "none: $out"

out=$(info CUDA_VISIBLE_DEVICES=1,7 2>&1)
rc=$?
[ "$rc" -eq 2 ] || fail "a missing device: exit status $rc, wanted 2: $out"
echo "$out" | grep -q "CUDA_VISIBLE_DEVICES='1,7' names device '7', which does not exist" ||
  fail "a missing device is not named: $out"

out=$(info SLURM_JOB_GPUS=gpu:2 2>&1)
rc=$?
[ "$rc" -eq 2 ] || fail "garbage: exit status $rc, wanted 2: $out"
echo "$out" | grep -q "SLURM_JOB_GPUS='gpu:2': entry 'gpu:2'" || fail "garbage not named: $out"
echo "PASS"
