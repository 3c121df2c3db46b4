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
"$py" -c "import torch; print('torch==' + torch.__version__)" >>"$constraints" 2>/dev/null || :
if ! "$py" -c "import safetensors, matplotlib" 2>/dev/null; then
  log "installing safetensors and matplotlib into $venv"
  "$py" -m pip install -q --disable-pip-version-check -c "$constraints" safetensors matplotlib >&2
fi

# The writers section's peers. Their newest releases do not run on Debian's torch 1.13 and numpy
# 1.24, so: pyarrow < 24 (the newest pyarrow requires NumPy 2; 23 imports with 1.24); litdata
# 0.2.30 (later releases require torch >= 2.4 and name torch.uint16 at import); mosaicml-streaming
# and litdata with --no-deps, because their declared dependencies pull torch 2 (litdata) or the
# cloud SDKs and transformers >= 4.21 of every storage backend (streaming); the modules they
# import when writing a local folder are installed by name instead. streaming's package import
# also needs torchvision, which must match the torch build: Debian's python3-torchvision.
writer_peers_import="import datasets, pyarrow, streaming, litdata"
if ! "$py" -c "$writer_peers_import" 2>/dev/null; then
  log "installing the writers' peers into $venv (datasets, pyarrow, streaming, litdata)"
  echo "pyarrow<24" >>"$constraints"
  echo "xxhash<4" >>"$constraints"
  "$py" -m pip install -q --disable-pip-version-check -c "$constraints" datasets "pyarrow<24" \
    "xxhash<4" pillow "transformers<5" brotli zstd python-snappy catalogue lightning-utilities \
    filelock boto3 requests >&2 || log "warning: installing datasets/pyarrow failed"
  "$py" -m pip install -q --disable-pip-version-check --no-deps mosaicml-streaming==0.13.0 \
    litdata==0.2.30 >&2 2>/dev/null || log "warning: installing streaming/litdata failed"
  "$py" -c "import torchvision" 2>/dev/null ||
    log "warning: no torchvision (apt install python3-torchvision): MDSWriter is not available"
  "$py" -c "$writer_peers_import" 2>/dev/null ||
    log "warning: $writer_peers_import fails; the writers section reports those not available"
fi

# The remote section's S3 server (moto's, on 127.0.0.1); its peers are the writers' streaming and
# litdata, reading from it through boto3.
if ! "$py" -c "import moto.server, flask_cors, boto3" 2>/dev/null; then
  log "installing moto's S3 server into $venv (the remote section)"
  "$py" -m pip install -q --disable-pip-version-check -c "$constraints" "moto[s3]>=5,<6" flask \
    flask-cors boto3 >&2 || log "warning: installing moto failed: the remote section is not available"
fi

# This repository's package (gpucache.load, GPUBatches), rebuilt when its sources change.
if [ -f "$root/pyproject.toml" ]; then
  stamp="$venv/.gpucache-source"
  # Only what the package is built from: committed trees plus uncommitted changes to them.
  # (A path HEAD lacks made `git rev-parse` print nothing, so the stamp once missed every change
  # under src/ and the bench measured a stale package; with pipefail a missing path now stops the
  # script instead.)
  sources=(pyproject.toml CMakeLists.txt cmake src)
  state=$(cd "$root" && { git rev-parse "${sources[@]/#/HEAD:}" && git diff HEAD -- "${sources[@]}"; } |
    sha256sum | cut -d' ' -f1)
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
