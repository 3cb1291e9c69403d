#!/usr/bin/env bash
# Creates the Python virtual environment .venv at the repository root from the pinned
# requirements (bindings/python/requirements.txt) and installs the gpuflow package into it
# (editable). Idempotent: when .venv already matches the requirements it returns at once.
#   scripts/setup-python.sh            # PYTHON=python3.x to choose the interpreter
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/.venv
req=$root/bindings/python/requirements.txt
stamp=$venv/.gpuflow-setup
want=$(cat "$req" "$root/bindings/python/pyproject.toml" "$root/plugins/snakemake/pyproject.toml" |
       sha256sum | cut -d' ' -f1)

if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] &&
   "$venv/bin/python" -c 'import importlib.util as u; assert u.find_spec("gpuflow")' 2>/dev/null
then
  exit 0  # up to date
fi

py=${PYTHON:-python3}
command -v "$py" >/dev/null || { echo "setup-python: $py not found" >&2; exit 1; }
if ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
  # Debian's python3 needs python3-venv for `python3 -m venv`.
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup-python: installing python3-venv (apt)" >&2
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "setup-python: creating $venv" >&2
  rm -rf "$venv"
  "$py" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
echo "setup-python: installing pinned requirements" >&2
"${pip[@]}" install -r "$req"
"${pip[@]}" install --no-deps --no-build-isolation -e "$root/bindings/python"
"${pip[@]}" install --no-deps --no-build-isolation -e "$root/plugins/snakemake"
echo "$want" > "$stamp"
echo "setup-python: $venv ready" >&2
