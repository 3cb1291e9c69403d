#!/usr/bin/env bash
# Fails, listing what differs, when a tracked C, C++ or CUDA file is not as clang-format (the
# repository's .clang-format) would write it. Run by scripts/test.sh; fix with
#   git ls-files '*.c' '*.h' '*.cpp' '*.hpp' '*.cu' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' '*.cu')
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "check-format: the files above are not clang-formatted (see this script's header)" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
