#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test: the C++ suites through CTest (GPU-labelled
# tests skip on machines without a GPU), then the Python package's tests on the CPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${GPUCACHE_BUILD_DIR:-$root/build}

"$root/scripts/install-deps.sh"

# The Python package, in a venv that sees Debian's torch and numpy (PEP 668 forbids installing
# into the system interpreter). The build backend (scikit-build-core, nanobind) comes from PyPI
# once; building without isolation then keeps the extension's build directory incremental. The
# venv comes first: the CMake build below builds the extension too (with nanobind from it), so a
# broken binding fails the build and CTest before pip runs.
venv=${GPUCACHE_VENV:-$root/.venv}
if [ ! -x "$venv/bin/python" ]; then
  "${GPUCACHE_PYTHON:-/usr/bin/python3}" -m venv --system-site-packages "$venv"
fi
pip=("$venv/bin/python" -m pip --quiet --disable-pip-version-check)
"$venv/bin/python" -c "import scikit_build_core, nanobind" 2>/dev/null ||
  "${pip[@]}" install "scikit-build-core>=0.10" "nanobind>=2.0"

# In CI every warning is an error and the extension must be built.
ci_args=()
if [ "${CI:-}" = "true" ]; then
  ci_args=(-DGPUCACHE_WERROR=ON -DGPUCACHE_PYTHON=ON)
fi
"$root/scripts/build.sh" "-DPython_EXECUTABLE=$venv/bin/python" "${ci_args[@]}" "$@"
ctest --test-dir "$build_dir" --output-on-failure --parallel "$(nproc)"

# huggingface's safetensors (one small wheel, no dependencies) reads back what `gpucache export
# --to safetensors` writes in src/python/tests/test_export.py.
"$venv/bin/python" -c "import safetensors" 2>/dev/null || "${pip[@]}" install "safetensors>=0.4"
# pyarrow (one 42 MB wheel, no required dependencies) for the Arrow and Parquet inputs
# (src/python/tests/inputs/test_arrow.py). Below 20 while Debian's numpy is 1.24: later releases need
# NumPy 2.
"$venv/bin/python" -c "import pyarrow" 2>/dev/null || "${pip[@]}" install "pyarrow>=14,<20"
# pandas and Hugging Face `datasets`, the data-frame and dataset inputs of the round-trip suite
# (src/python/tests/inputs/: test_round_trip.py, test_arrow.py, test_ingest.py,
# test_time_columns.py). About 24 MB of wheels (pandas 12 MB; datasets with aiohttp, hf-xet and
# huggingface_hub the rest), 140 MB installed, under a minute. numpy is pinned to the version the
# venv already sees (Debian's 1.24, which Debian's torch is built against) and pyarrow stays below
# 20: unpinned, pip would pull numpy 2, pandas 3 and pyarrow 26 into the venv over them.
"$venv/bin/python" -c "import pandas, datasets" 2>/dev/null || {
  numpy_pin=()
  numpy_version=$("$venv/bin/python" -c "import numpy; print(numpy.__version__)" 2>/dev/null) &&
    numpy_pin=("numpy==$numpy_version")
  "${pip[@]}" install "pandas>=2,<3" "datasets>=2.14" "pyarrow>=14,<20" "${numpy_pin[@]}"
}
# psycopg with its binary libpq (about 5 MB of wheels) reads the PostgreSQL server that
# src/python/tests/inputs/test_postgres.py starts; the test skips without it.
"$venv/bin/python" -c "import psycopg" 2>/dev/null || "${pip[@]}" install "psycopg[binary]>=3.1,<4"
# moto's S3 server (moto[s3] with flask: about 25 MB of wheels) runs on 127.0.0.1 for the remote
# dataset tests (src/python/tests/test_remote.py), which skip its cases when it is missing.
"$venv/bin/python" -c "import moto.server, flask_cors" 2>/dev/null ||
  "${pip[@]}" install "moto[s3]>=5,<6" flask flask-cors
# `pip install .` builds the whole tool again (the CLI into $venv/bin, the extension with pack
# and the tools) in build-python/, incrementally and through ccache when
# CMAKE_CXX_COMPILER_LAUNCHER says so. Its CUDA kernels are built for the architectures
# scripts/build.sh picks, not the wheel's default list of five.
if [ -z "${CUDAARCHS:-}" ]; then
  if [ -n "${GPUCACHE_CUDA_ARCHITECTURES:-}" ]; then
    export CUDAARCHS=$GPUCACHE_CUDA_ARCHITECTURES
  elif [ "${CI:-}" = "true" ]; then
    export CUDAARCHS=90-real
  elif nvidia-smi -L >/dev/null 2>&1; then
    export CUDAARCHS=native
  else
    export CUDAARCHS=80-virtual
  fi
fi
"${pip[@]}" install --no-build-isolation "$root"
status=0
# The wheel is built and tried below, once; test_install.py's own wheel test would build it again.
GPUCACHE_SKIP_WHEEL_TEST=1 GPUCACHE_BUILD_DIR="$build_dir" "$venv/bin/python" -m pytest -q \
  -p no:cacheprovider "$root/src/python/tests" || status=$?
if [ "$status" -eq 5 ]; then
  echo "gpucache: pytest collected no Python tests" >&2
  exit 1
fi
[ "$status" -eq 0 ] || exit "$status"

# The wheel as users get it: built once (incrementally, in the build-python/ folder `pip install`
# used above), installed into a fresh venv that sees only Debian's packages, and every example
# under examples/ run from another directory with the venv's bin off PATH, so the examples find
# the command through the package (python -m gpucache), never through the source tree.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"${pip[@]}" wheel --no-deps --no-build-isolation -w "$scratch/dist" "$root"
"${GPUCACHE_PYTHON:-/usr/bin/python3}" -m venv --system-site-packages "$scratch/venv"
"$scratch/venv/bin/python" -m pip --quiet --disable-pip-version-check install --no-deps \
  "$scratch"/dist/gpucache-*.whl
# The same wheel in a plain venv as users make one, with PyPI's numpy 2, pyarrow and pandas and
# no Debian package (no torch: gpucache then hands numpy arrays back), running every Python test
# file that does not need torch (about 100 tests, 30 s with the downloads).
"${GPUCACHE_PYTHON:-/usr/bin/python3}" -m venv "$scratch/numpy2"
"$scratch/numpy2/bin/python" -m pip --quiet --disable-pip-version-check install \
  "numpy>=2" pyarrow pandas pytest "$scratch"/dist/gpucache-*.whl
mapfile -t torch_free_tests < <(grep -L -E '^(import|from) torch' \
  "$root"/src/python/tests/test_*.py "$root"/src/python/tests/inputs/test_*.py)
echo "numpy 2 venv: $("$scratch/numpy2/bin/python" -c 'import numpy; print(numpy.__version__)'), \
${#torch_free_tests[@]} test files"
(cd "$scratch" && GPUCACHE_SKIP_WHEEL_TEST=1 GPUCACHE_BUILD_DIR="$build_dir" \
  "$scratch/numpy2/bin/python" -m pytest -q -p no:cacheprovider "${torch_free_tests[@]}")

for example in "$root"/examples/*.py; do
  echo "example from the wheel: ${example#"$root"/}"
  (cd "$scratch" && env -u GPUCACHE_CLI PATH=/usr/bin:/bin CUDA_VISIBLE_DEVICES="" \
    timeout 300 "$scratch/venv/bin/python" "$example" >/dev/null)
done
