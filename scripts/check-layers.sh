#!/usr/bin/env bash
# Dependencies point down (issue 10, item 2): a file under src/<layer>/ may include headers of its
# own layer and of the layers below it, never of a layer above. Run by ctest (layers.check) and
# usable by hand:
#
#   scripts/check-layers.sh [SRC_DIR]    # default: the src/ next to this script
#   scripts/check-layers.sh --self-test  # shows the check catches what it should
#
# Includes are read as written ("layer/file.hpp", or <layer/file.hpp>); an include whose first
# component is no directory of src/ (gpuflow.h, system and third-party headers) is not a layer's.
# A directory of src/ missing from LAYERS fails the check: every part of the runtime has a place.
set -euo pipefail
shopt -s nullglob

# The layers, top to bottom: each may include only itself and the layers listed after it.
LAYERS=(
  capi      # the C ABI shims
  dashboard # the live page and /metrics over HTTP (libmicrohttpd), for pools and the service
  service   # the node's shared pool: server, lease book (gpuflow serve)
  status    # a service's StatusReply rendered: the status table and the one JSON of the book
  pool      # a pool: options, backend, scheduler, workers; connected pools
  runtime   # worker threads, task contexts, runs
  scheduler # placement, dispatch, completion, spilling
  commands  # the external-command executor (public task API only)
  kernels   # named kernels and plugins
  serialize # graphs as documents: binary and JSON (capi; the service and pools send them)
  graph     # the graph as described: tasks, data, requests, body descriptions
  devices   # backends: host (emulated) and CUDA
  client    # a connection to a service: requests, leases, the reader thread
  transport # the UCX data plane: workers, endpoints, progress (libuv, thread), blobs
  wire      # the service's control messages: schema, framing, verification
  core      # errors, clocks, amounts, names
)

# Layers whose own includes are not checked yet (their untangling is under way). Lower layers are
# still kept from including them. To check one, take it off this list.
UNCHECKED=()

usage() {
  echo "usage: $0 [SRC_DIR | --self-test]" >&2
  exit 2
}

# rank NAME: the position of NAME in LAYERS (0 = top), or nothing when it is not a layer.
rank() {
  local i
  for i in "${!LAYERS[@]}"; do
    if [[ "${LAYERS[$i]}" == "$1" ]]; then
      echo "$i"
      return
    fi
  done
}

is_unchecked() {
  local l
  for l in "${UNCHECKED[@]}"; do [[ "$l" == "$1" ]] && return 0; done
  return 1
}

# check SRC_DIR: prints each violation; returns 1 when there is any.
check() {
  local src=$1 bad=0 dir layer file line n inc target mine theirs
  [[ -d "$src" ]] || {
    echo "check-layers: no directory $src" >&2
    return 2
  }
  for dir in "$src"/*/; do
    layer=$(basename "$dir")
    if [[ -z "$(rank "$layer")" ]]; then
      echo "src/$layer/: not a known layer; add it to LAYERS in $0 where it belongs"
      bad=1
    fi
  done
  for layer in "${LAYERS[@]}"; do
    [[ -d "$src/$layer" ]] || continue
    is_unchecked "$layer" && continue
    mine=$(rank "$layer")
    while IFS= read -r -d '' file; do
      n=0
      while IFS= read -r line; do
        n=$((n + 1))
        [[ "$line" =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"\<]([^\"\>]+)[\"\>] ]] ||
          continue
        inc=${BASH_REMATCH[1]}
        if [[ "$inc" == ../* || "$inc" == */../* ]]; then
          echo "${file#"$src"/}:$n: includes \"$inc\": name headers from src/, not relative paths"
          bad=1
          continue
        fi
        [[ "$inc" == */* ]] || continue  # gpuflow.h, <vector>, ...: not a layer's
        target=${inc%%/*}
        if [[ ! -d "$src/$target" ]]; then
          continue  # <cuda_runtime.h>-like or third party (flatbuffers/..., sys/...)
        fi
        theirs=$(rank "$target")
        [[ -n "$theirs" ]] || continue  # reported above as an unknown layer
        if ((theirs < mine)); then
          echo "${file#"$src"/}:$n: $layer/ includes \"$inc\" from $target/, a higher layer"
          bad=1
        fi
      done <"$file"
    done < <(find "$src/$layer" -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o \
      -name '*.cu' -o -name '*.cuh' -o -name '*.inc' \) -print0 | sort -z)
  done
  return $bad
}

self_test() {
  local tmp status=0
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp/good/graph" "$tmp/good/core" "$tmp/good/runtime"
  printf '#include "core/error.hpp"\n#include "graph/graph.hpp"\n#include <vector>\n' \
    >"$tmp/good/graph/a.hpp"
  printf '#include "graph/a.hpp"\n#include "gpuflow.h"\n' >"$tmp/good/runtime/b.cpp"
  : >"$tmp/good/core/error.hpp"
  if ! out=$(check "$tmp/good"); then
    echo "self-test: a tree that keeps the order was refused:"
    echo "$out"
    status=1
  fi
  cp -r "$tmp/good" "$tmp/up"
  printf '#include "runtime/worker.hpp"\n' >>"$tmp/up/graph/a.hpp"
  local want='graph/a.hpp:4: graph/ includes "runtime/worker.hpp" from runtime/, a higher layer'
  if out=$(check "$tmp/up") || [[ "$out" != *"$want"* ]]; then
    echo "self-test: an include going up was not reported as such:"
    echo "$out"
    status=1
  fi
  cp -r "$tmp/good" "$tmp/unknown"
  mkdir "$tmp/unknown/newpart"
  if out=$(check "$tmp/unknown") || [[ "$out" != *'src/newpart/: not a known layer'* ]]; then
    echo "self-test: a directory missing from LAYERS was not reported:"
    echo "$out"
    status=1
  fi
  cp -r "$tmp/good" "$tmp/relative"
  printf '#include "../runtime/b.cpp"\n' >>"$tmp/relative/core/error.hpp"
  if out=$(check "$tmp/relative") || [[ "$out" != *'relative paths'* ]]; then
    echo "self-test: a relative include was not reported:"
    echo "$out"
    status=1
  fi
  [[ $status -eq 0 ]] && echo "check-layers self-test: ok"
  return $status
}

case "${1:-}" in
  --self-test) self_test ;;
  -h | --help) usage ;;
  -*) usage ;;
  *)
    src=${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/src"}
    if out=$(check "$src"); then
      echo "check-layers: ok (checked: $(for l in "${LAYERS[@]}"; do
        is_unchecked "$l" || printf '%s ' "$l"
      done | sed 's/ $//'))"
    else
      echo "$out"
      echo "check-layers: includes go up a layer (order, top to bottom: ${LAYERS[*]})"
      exit 1
    fi
    ;;
esac
