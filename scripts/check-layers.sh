#!/usr/bin/env bash
# Dependencies point down (issue 10, item 2): a file under src/<layer>/ may include headers of its
# own layer and of the layers its USES line reaches, never of one above or across. Run by ctest
# (layers.check) and usable by hand:
#
#   scripts/check-layers.sh [SRC_DIR]    # default: the src/ next to this script
#   scripts/check-layers.sh --self-test  # shows the check catches what it should
#
# Includes are read as written ("layer/file.hpp", or <layer/file.hpp>); an include whose first
# component is no directory of src/ (gpuflow.h, system and third-party headers) is not a layer's.
# A directory of src/ missing from LAYERS fails the check: every part of the runtime has a place.
set -euo pipefail
shopt -s nullglob

# The layers and what each may include besides itself: the layers named here and, through them,
# everything those may include (so each line names only the layers right below). Two stacks
# share core/ and meet only in pool/ and service/ (docs/architecture.md draws it):
#   compute: runtime -> scheduler -> graph, devices (commands, kernels, serialize on graph)
#   network: client -> transport, wire
# Top to bottom, so the order of this list is also the order of the map.
LAYERS=(capi dashboard status service pool runtime scheduler commands kernels serialize graph
  devices client transport wire core)
declare -A USES=(
  [capi]="dashboard"                               # the C ABI shims
  [dashboard]="status service"                     # the live page and /metrics (libmicrohttpd)
  [status]="wire"                                  # a StatusReply as text and as the one JSON
  [service]="pool"                                 # the node's shared pool (gpuflow serve)
  [pool]="runtime commands kernels serialize client" # where the two stacks meet
  [runtime]="scheduler"                            # worker threads, task contexts, runs
  [scheduler]="graph devices"                      # placement, dispatch, completion, spilling
  [commands]="graph"                               # the external-command executor
  [kernels]="graph"                                # named kernels and plugins
  [serialize]="graph"                              # graphs as documents
  [graph]="core"                                   # the graph as described
  [devices]="core"                                 # backends: host (emulated) and CUDA
  [client]="transport wire"                        # a connection to a service
  [transport]="core"                               # the UCX data plane
  [wire]="core"                                    # the control messages: schema, framing
  [core]=""                                        # errors, clocks, amounts, names
)

# Layers whose own includes are not checked yet (their untangling is under way). Other layers are
# still kept from including them. To check one, take it off this list.
UNCHECKED=()

usage() {
  echo "usage: $0 [SRC_DIR | --self-test]" >&2
  exit 2
}

# known NAME: whether NAME is a layer.
known() {
  [[ -v "USES[$1]" ]]
}

# reach NAME: the layers NAME may include, itself and everything below it, one per line.
reach() {
  local todo=("$1") seen=" " l u
  while ((${#todo[@]})); do
    l=${todo[0]}
    todo=("${todo[@]:1}")
    [[ "$seen" == *" $l "* ]] && continue
    seen+="$l "
    echo "$l"
    for u in ${USES[$l]}; do todo+=("$u"); done
  done
}

is_unchecked() {
  local l
  for l in "${UNCHECKED[@]}"; do [[ "$l" == "$1" ]] && return 0; done
  return 1
}

# check SRC_DIR: prints each violation; returns 1 when there is any.
check() {
  local src=$1 bad=0 dir layer file line n inc target mine
  [[ -d "$src" ]] || {
    echo "check-layers: no directory $src" >&2
    return 2
  }
  for dir in "$src"/*/; do
    layer=$(basename "$dir")
    if ! known "$layer"; then
      echo "src/$layer/: not a known layer; add it to LAYERS and USES in $0 where it belongs"
      bad=1
    fi
  done
  for layer in "${LAYERS[@]}"; do
    [[ -d "$src/$layer" ]] || continue
    is_unchecked "$layer" && continue
    mine=" $(reach "$layer" | tr '\n' ' ')"
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
        known "$target" || continue  # reported above as an unknown layer
        if [[ "$mine" != *" $target "* ]]; then
          echo "${file#"$src"/}:$n: $layer/ includes \"$inc\" from $target/, not a layer below it"
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
  local want='graph/a.hpp:4: graph/ includes "runtime/worker.hpp" from runtime/, not a layer below it'
  if out=$(check "$tmp/up") || [[ "$out" != *"$want"* ]]; then
    echo "self-test: an include going up was not reported as such:"
    echo "$out"
    status=1
  fi
  # The stacks stay apart: the network side does not reach into the compute side.
  mkdir -p "$tmp/across/client" "$tmp/across/graph"
  printf '#include "graph/a.hpp"\n' >"$tmp/across/client/c.hpp"
  : >"$tmp/across/graph/a.hpp"
  want='client/c.hpp:1: client/ includes "graph/a.hpp" from graph/, not a layer below it'
  if out=$(check "$tmp/across") || [[ "$out" != *"$want"* ]]; then
    echo "self-test: an include across the two stacks was not reported:"
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
      echo "check-layers: includes that go up or across (each layer's USES in $0)"
      exit 1
    fi
    ;;
esac
