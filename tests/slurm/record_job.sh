#!/usr/bin/env bash
# A leased job for ledger_check.py: runs SECONDS and appends one line to LEDGER saying what it
# was given (GPUFLOW_DEVICES, as `gpuflow lease` sets it) and when it ran.
#   record_job.sh LEDGER NAME SHARE SECONDS
set -eu
start=$(date +%s.%N)
sleep "$4"
end=$(date +%s.%N)
echo "$2 $3 ${GPUFLOW_DEVICES:?not run by gpuflow lease} $start $end" >> "$1"
