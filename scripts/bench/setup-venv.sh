#!/usr/bin/env bash
# Prepares the benchmark venv and prints its path. It is made from Debian's /usr/bin/python3 with
# --system-site-packages (torch and numpy come from python3-torch / python3-numpy), adds
# safetensors and matplotlib from PyPI pinned to the system numpy (a newer numpy would break the
# system torch), and installs this repository's Python package when it has a pyproject.toml.
# Re-running is cheap: each step is skipped when already done.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${GPUCACHE_BENCH_VENV:-$root/.venv-bench}
python=${GPUCACHE_BENCH_PYTHON:-/usr/bin/python3}
log() { echo "bench: $*" >&2; }

if [ ! -x "$venv/bin/python" ]; then
  log "creating $venv from $python"
  "$python" -m venv --system-site-packages "$venv" >&2
fi
py="$venv/bin/python"
if ! "$py" -c "import torch, numpy" 2>/dev/null; then
  log "warning: $py cannot import torch and numpy (install python3-torch python3-numpy)"
fi
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
"$py" -c "import numpy; print('numpy==' + numpy.__version__)" >"$constraints" 2>/dev/null || :
if ! "$py" -c "import safetensors, matplotlib" 2>/dev/null; then
  log "installing safetensors and matplotlib into $venv"
  "$py" -m pip install -q --disable-pip-version-check -c "$constraints" safetensors matplotlib >&2
fi

# This repository's package (gpucache.load, GPUBatches), rebuilt when its sources change.
if [ -f "$root/pyproject.toml" ]; then
  stamp="$venv/.gpucache-source"
  # Only what the package is built from: committed trees plus uncommitted changes to them.
  sources=(pyproject.toml CMakeLists.txt cmake include src formats kernels)
  state=$(cd "$root" && { git rev-parse "${sources[@]/#/HEAD:}"; git diff HEAD -- "${sources[@]}"; } \
    2>/dev/null | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$state" ]; then
    log "installing the gpucache Python package into $venv (pip install .)"
    mkdir -p "$root/bench-out"
    if "$py" -m pip install -q --disable-pip-version-check -c "$constraints" "$root" >"$root/bench-out/pip-install.log" 2>&1; then
      echo "$state" >"$stamp"
    else
      log "warning: pip install . failed (bench-out/pip-install.log); gpucache.load will be reported as not available"
    fi
  fi
fi
echo "$venv"
