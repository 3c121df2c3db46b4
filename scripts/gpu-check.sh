#!/usr/bin/env bash
# The GPU path checked in one command, from a bare GPU machine (no apt, no network): run from the
# repository root after scripts/gpu-prepare.sh filled .gpu/ on a Debian machine.
#   bash scripts/gpu-check.sh [OUTDIR]        # OUTDIR defaults to $OUT, else gpu-out/
# Phases, each timed, logged and recorded even when an earlier one failed (a phase that needs a
# failed one is recorded as skipped):
#   machine   what the machine has: GPU, driver, nvcc, cmake, ninja, python3, torch, C library
#   deps      .gpu/*.deb unpacked into a private prefix (dpkg-deb -x, else ar/tar, else Python),
#             never over /; CMake, pkg-config and the loader pointed at it; the carried libraries'
#             needs of the C library and libstdc++ compared with this machine's
#   configure CMake, Ninja, Release, the CUDA backend ON for the GPU found (native; sm_90 when no
#             GPU answers), HDF5 off (not carried)
#   build     every target on every core
#   ctest_gpu the tests labelled gpu (CUDA kernels bit-identical to their CPU references, device
#             load, pinned staging, the stream's copies, pack from device memory)
#   ctest     the rest of the C++ suite
#   pip       a venv over this machine's python3 (sees its torch, numpy, nanobind,
#             scikit-build-core), `pip install --no-build-isolation --no-index .`; built while the
#             C++ tests run
#   linkage   the installed extension holds no CUDA runtime of its own (tests/cuda_linkage.sh)
#   pytest    the Python tests, the CUDA ones included
#   bench     scripts/bench.sh --offline --only gpu (installs nothing) at sizes that fit
# OUTDIR receives summary.json, summary.txt, bench-results.json (when the bench ran) and
# logs.tar.gz (every log). Environment: GPUCACHE_GPU_PREFIX (unpack folder, default
# /tmp/gpucache-gpu-deps), GPUCACHE_GPU_BUILD (build folder, default build-gpu),
# GPUCACHE_GPU_PYTHON (default python3), GPUCACHE_GPU_BENCH_ARGS (bench sizes),
# GPUCACHE_GPU_SKIP (comma-separated phases to skip, e.g. bench).
# Exit status: 0 when no phase failed, 1 otherwise.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
started=$(date +%s.%N)
out=${1:-${OUT:-$root/gpu-out}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/gpucache-check.XXXXXX)
logs=$work/logs
mkdir -p "$logs"
results=$work/phases.tsv
: >"$results"
prefix=${GPUCACHE_GPU_PREFIX:-/tmp/gpucache-gpu-deps}
build=${GPUCACHE_GPU_BUILD:-$root/build-gpu}
python=${GPUCACHE_GPU_PYTHON:-python3}
jobs=$(nproc)
skip=",${GPUCACHE_GPU_SKIP:-},"
declare -A status_of

say() { echo "gpu-check: $*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# record NAME STATUS SECONDS NOTE
record() {
  status_of[$1]=$2
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4//$'\t'/ }" >>"$results"
  printf 'gpu-check: %-9s %-7s %6.1f s  %s\n' "$1" "$2" "$3" "$4" >&2
}
# phase NAME NEEDS NOTE-FUNCTION COMMAND...: runs COMMAND with its output in logs/NAME.log, unless
# a phase named in NEEDS (comma-separated) did not pass or NAME is in GPUCACHE_GPU_SKIP. The note
# function (or -) prints a one-line summary from the log.
phase() {
  local name=$1 needs=$2 note_fn=$3
  shift 3
  local need
  for need in ${needs//,/ }; do
    if [ "${status_of[$need]:-}" != passed ]; then
      record "$name" skipped 0 "needs $need (${status_of[$need]:-not run})"
      return
    fi
  done
  if [[ "$skip" == *",$name,"* ]]; then
    record "$name" skipped 0 "GPUCACHE_GPU_SKIP"
    return
  fi
  say "$name ..."
  local begin code note=""
  begin=$(now)
  "$@" >"$logs/$name.log" 2>&1
  code=$?
  local seconds
  seconds=$(since "$begin")
  [ "$note_fn" != - ] && note=$("$note_fn" "$logs/$name.log" 2>/dev/null)
  if [ "$code" = 0 ]; then
    record "$name" passed "$seconds" "$note"
  else
    record "$name" failed "$seconds" "exit $code${note:+; $note}; last line: $(grep -v '^\s*$' "$logs/$name.log" | tail -1 | cut -c1-200)"
  fi
}

# --- machine -------------------------------------------------------------------------------------
machine() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "kernel: $(uname -srm)"
  echo "cores: $jobs"
  echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null)"
  echo "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo "nvcc: $(nvcc_path && "$(nvcc_path)" --version | tail -1)"
  echo "cmake: $(cmake --version 2>/dev/null | head -1)"
  echo "ninja: $(ninja --version 2>/dev/null)"
  echo "c++: $(c++ --version 2>/dev/null | head -1)"
  echo "pkg-config: $(command -v pkg-config || echo none)"
  echo "dpkg-deb: $(command -v dpkg-deb || echo none)"
  echo "python3: $("$python" -c 'import sys; print(sys.version.split()[0], sys.executable)' 2>&1)"
  "$python" - <<'EOF' 2>&1
import importlib
for name in ("torch", "numpy", "nanobind", "scikit_build_core", "safetensors", "pyarrow", "h5py",
             "pytest"):
    try:
        module = importlib.import_module(name)
        print(f"{name}: {getattr(module, '__version__', '?')}")
    except Exception as error:
        print(f"{name}: missing ({error})")
try:
    import torch
    print("torch.cuda:", torch.version.cuda, "available:", torch.cuda.is_available(),
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
except Exception:
    pass
EOF
}
nvcc_path() {
  command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; }
}
machine_note() { sed -n 's/^gpu: //p' "$1" | head -1; }

# --- deps ----------------------------------------------------------------------------------------
# Unpacks one .deb into $prefix: dpkg-deb, else ar and tar, else Python (ar and tarfile).
unpack_deb() {
  local deb=$1
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$deb" "$prefix" && return
  fi
  if command -v ar >/dev/null && command -v tar >/dev/null; then
    local scratch
    scratch=$(mktemp -d)
    (cd "$scratch" && ar x "$deb" && tar -xf data.tar.* -C "$prefix") && rm -rf "$scratch" && return
    rm -rf "$scratch"
  fi
  "$python" - "$deb" "$prefix" <<'EOF'
import io, sys, tarfile
deb, prefix = sys.argv[1], sys.argv[2]
data = open(deb, "rb").read()
assert data[:8] == b"!<arch>\n", f"{deb} is not an ar archive"
offset = 8
while offset < len(data):
    name = data[offset:offset + 16].decode().strip().rstrip("/")
    size = int(data[offset + 48:offset + 58].decode().strip())
    body = data[offset + 60:offset + 60 + size]
    if name.startswith("data.tar"):
        with tarfile.open(fileobj=io.BytesIO(body)) as archive:
            archive.extractall(prefix, filter="tar") if hasattr(tarfile, "data_filter") \
                else archive.extractall(prefix)
        break
    offset += 60 + size + (size & 1)
else:
    sys.exit(f"{deb}: no data.tar member")
EOF
}
multiarch=x86_64-linux-gnu
deps() {
  local debs=("$root"/.gpu/*.deb)
  if [ ! -f "${debs[0]}" ]; then
    echo "no .gpu/*.deb: run scripts/gpu-prepare.sh on a Debian 12 machine and carry .gpu"
    return 1
  fi
  case "$prefix" in /|/usr|/usr/*|/lib*|/bin*|/etc*) echo "refusing to unpack into $prefix"; return 1 ;; esac
  rm -rf "$prefix"
  mkdir -p "$prefix"
  local deb
  for deb in "${debs[@]}"; do
    echo "unpack $(basename "$deb")"
    unpack_deb "$deb" || { echo "could not unpack $deb"; return 1; }
  done
  # Some -dev packages link with absolute targets (zlib1g-dev: usr/lib/.../libz.so ->
  # /lib/.../libz.so.1.2.13): on this machine those dangle or reach its own copy, and FindZLIB
  # then took libz.a, which cannot go into a shared object. Pointed into the prefix instead.
  local link target
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    if [[ "$target" == /* ]] && [ -e "$prefix$target" ]; then
      ln -sfn "$prefix$target" "$link"
      echo "relinked ${link#"$prefix"} -> $prefix$target"
    fi
  done < <(find "$prefix" -type l -print0)
  # Debian's .pc files say prefix=/usr: pkg-config reads only ours, relocated by the sysroot.
  # Some Debian CMake package files name /usr literally (Snappy's targets list /usr/lib/...;
  # doctest's set _IMPORT_PREFIX to "/usr", which CMake then drops as an implicit include
  # folder): relocated.
  local relocated file
  relocated=$(grep -rlE '"/usr(/|")' "$prefix/usr" --include='*.cmake' 2>/dev/null)
  for file in $relocated; do
    sed -i -e "s#\"/usr/#\"$prefix/usr/#g" -e "s#\"/usr\"#\"$prefix/usr\"#g" "$file"
    echo "relocated $file"
  done
  # Runtime libraries this machine lacks (by soname) are reached through runtime-libs/, on
  # LD_LIBRARY_PATH; those it has stay its own, so no program here loads Debian's copy instead.
  mkdir -p "$prefix/runtime-libs"
  local library soname
  for library in "$prefix"/usr/lib/"$multiarch"/*.so.*; do
    soname=$(basename "$library")
    [[ "$soname" =~ \.so\.[0-9]+$ ]] || continue
    if command -v ldconfig >/dev/null && ldconfig -p 2>/dev/null | grep -q "^\s*$soname "; then
      echo "$soname: this machine's"
    else
      ln -sf "$library" "$prefix/runtime-libs/$soname"
      echo "$soname: carried"
    fi
  done
  # The carried shared libraries against this machine's C and C++ libraries: a newer symbol
  # version than the machine has means they cannot load here.
  local have_glibc need_glibc have_cxx need_cxx file mismatch=0
  have_glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
  have_cxx=$(objdump -T "$(c++ -print-file-name=libstdc++.so.6 2>/dev/null)" 2>/dev/null |
    sed -n 's/.*GLIBCXX_\([0-9.]*\).*/\1/p' | sort -V | tail -1)
  command -v objdump >/dev/null || echo "no objdump: the carried libraries' needs are not checked"
  for file in "$prefix"/usr/lib/"$multiarch"/*.so.* "$prefix"/usr/bin/pkgconf; do
    [ -f "$file" ] && [ ! -L "$file" ] || continue
    need_glibc=$(objdump -T "$file" 2>/dev/null | sed -n 's/.*GLIBC_\([0-9.]*\).*/\1/p' | sort -V | tail -1)
    need_cxx=$(objdump -T "$file" 2>/dev/null | sed -n 's/.*GLIBCXX_\([0-9.]*\).*/\1/p' | sort -V | tail -1)
    echo "$(basename "$file"): needs glibc ${need_glibc:-none}, libstdc++ ${need_cxx:-none}"
    if [ -n "$need_glibc" ] && [ "$(printf '%s\n%s\n' "$need_glibc" "$have_glibc" | sort -V | tail -1)" != "$have_glibc" ]; then
      echo "MISMATCH: $(basename "$file") needs GLIBC_$need_glibc, this machine has glibc $have_glibc"
      mismatch=1
    fi
    if [ -n "$need_cxx" ] && [ -n "$have_cxx" ] && [ "$(printf '%s\n%s\n' "$need_cxx" "$have_cxx" | sort -V | tail -1)" != "$have_cxx" ]; then
      echo "MISMATCH: $(basename "$file") needs GLIBCXX_$need_cxx, this machine's libstdc++ has $have_cxx"
      mismatch=1
    fi
  done
  echo "machine: glibc $have_glibc, libstdc++ GLIBCXX_${have_cxx:-?}"
  [ "$mismatch" = 0 ] || { echo "carried libraries are newer than this machine's C/C++ libraries"; return 1; }
  "$PKG_CONFIG" --exists libxxhash liblz4 || { echo "pkg-config cannot find the carried .pc files"; return 1; }
}
deps_note() {
  if grep -q MISMATCH "$1"; then grep MISMATCH "$1" | head -2 | tr '\n' ' '; else
    echo "$(grep -c '^unpack' "$1") packages into $prefix; $(tail -1 "$1")"; fi
}
export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export PKG_CONFIG_LIBDIR="$prefix/usr/lib/$multiarch/pkgconfig:$prefix/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR=$prefix
export LD_LIBRARY_PATH="$prefix/runtime-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# ccache, where the machine has it and no launcher was chosen: the Python package's build then
# reuses the C++ build's objects (both build folders sit at the same depth under CCACHE_BASEDIR).
if command -v ccache >/dev/null && [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ]; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache \
    CMAKE_CUDA_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
fi
if command -v pkg-config >/dev/null; then
  export PKG_CONFIG=${PKG_CONFIG:-$(command -v pkg-config)}
else
  export PKG_CONFIG=$prefix/usr/bin/pkgconf
fi

# The CUDA runtime must be found by its soname (gpucache loads it at run time, as PyTorch's
# would be): when the loader's cache lacks it, the toolkit's folder goes on LD_LIBRARY_PATH.
cudart_dir() {
  local nvcc dir
  nvcc=$(nvcc_path) || return 1
  for dir in "$(dirname "$nvcc")/../lib64" "$(dirname "$nvcc")/../targets/x86_64-linux/lib"; do
    ls "$dir"/libcudart.so.* >/dev/null 2>&1 && { (cd "$dir" && pwd); return 0; }
  done
  return 1
}
if ! ldconfig -p 2>/dev/null | grep -q "libcudart\.so\." && dir=$(cudart_dir); then
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$dir"
fi

# --- configure and build -------------------------------------------------------------------------
cuda_architectures() {
  if nvidia-smi -L >/dev/null 2>&1; then echo native; else echo 90-real; fi
}
configure() {
  local nvcc
  nvcc=$(nvcc_path)
  local args=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_PREFIX_PATH=$prefix/usr" "-DPKG_CONFIG_EXECUTABLE=$PKG_CONFIG"
    -DGPUCACHE_HDF5=OFF "-DCMAKE_CUDA_ARCHITECTURES=$(cuda_architectures)")
  if [ -n "$nvcc" ]; then
    args+=(-DGPUCACHE_CUDA=ON "-DCMAKE_CUDA_COMPILER=$nvcc")
  else
    echo "no nvcc: building without the CUDA backend"
    args+=(-DGPUCACHE_CUDA=OFF)
  fi
  cmake "${args[@]}"
}
configure_note() { grep -E "gpucache: CUDA backend|no CUDA compiler" "$1" | head -1 | sed 's/^-- //'; }
build_note() { grep -cE '^\[[0-9]+/[0-9]+\]' "$1" | sed 's/$/ steps/'; }

# --- tests ---------------------------------------------------------------------------------------
ctest_note() {
  local summary
  summary=$(grep -E "tests passed|tests failed" "$1" | tail -1)
  echo "$summary; skipped $(grep -c 'Not Run\|Skipped' "$1")"
  grep -E '\*\*\*Failed|\(Failed\)|\(Timeout\)|Exception' "$1" | sed 's/.* - //' | head -5 | tr '\n' ' '
}
ctest_gpu() {
  ctest --test-dir "$build" -L gpu --output-on-failure --parallel 4 --timeout 300 \
    --output-junit "$logs/ctest_gpu.xml"
  local code=$?
  # On a machine with a GPU, a GPU test that skipped is a failure of the check, not a pass.
  if nvidia-smi -L >/dev/null 2>&1 && grep -qE "Not Run|Skipped" "$logs/ctest_gpu.log"; then
    echo "a GPU answers (nvidia-smi) but GPU tests skipped: see 'skipping GPU tests' above"
    return 1
  fi
  return "$code"
}
ctest_rest() {
  ctest --test-dir "$build" -LE gpu --output-on-failure --parallel "$jobs" --timeout 300 \
    --output-junit "$logs/ctest.xml"
}

venv=$build-venv
pip_install() {
  rm -rf "$venv"
  # Without pip of its own (ensurepip may be missing): the machine's pip is reached like its torch.
  "$python" -m venv --system-site-packages --without-pip "$venv" || return 1
  # The machine's python3 may itself be a venv (/opt/torch/.venv), whose packages a venv made with
  # --system-site-packages would not see: its site-packages go on the path through a .pth file.
  local site
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$python" -c 'import site, sys; print("\n".join(p for p in site.getsitepackages() + [site.getusersitepackages()] if p))' \
    >"$site/machine-site-packages.pth"
  cat "$site/machine-site-packages.pth"
  "$venv/bin/python" -c "import torch, numpy, nanobind, scikit_build_core; print('torch', torch.__version__)" || return 1
  CUDAARCHS=$(cuda_architectures) CMAKE_BUILD_PARALLEL_LEVEL=$jobs \
    CMAKE_ARGS="-DGPUCACHE_HDF5=OFF -DPKG_CONFIG_EXECUTABLE=$PKG_CONFIG" \
    "$venv/bin/python" -m pip install --no-build-isolation --no-index --no-deps \
    --disable-pip-version-check -v --config-settings="build-dir=$build-python" "$root"
}
pip_note() { grep -oE "Successfully installed [^ ]+" "$1" | tail -1; }
linkage() {
  local extension
  extension=$("$venv/bin/python" -c 'import gpucache._gpucache as m; print(m.__file__)') || return 1
  bash "$root/tests/cuda_linkage.sh" "$(dirname "$extension")/libgpucache_cuda_kernels.so" \
    "$extension" "$venv/bin/gpucache"
}
linkage_note() { tail -1 "$1"; }
pytest_run() {
  GPUCACHE_BUILD_DIR=$build "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs \
    --junitxml="$logs/pytest.xml" "$root/src/python/tests"
}
pytest_note() { grep -E "passed|failed|error" "$1" | tail -1; }

# --- bench ---------------------------------------------------------------------------------------
bench() {
  # shellcheck disable=SC2086
  GPUCACHE_BUILD_DIR=$build GPUCACHE_BENCH_PYTHON=$venv/bin/python \
    bash "$root/scripts/bench.sh" --offline --only gpu --out "$work/bench" \
    ${GPUCACHE_GPU_BENCH_ARGS:---size 512M --reps 3 --slow-reps 1 --dialogue-rows 20000 --llm-rows 10000}
}
bench_note() { grep -E "^bench: GPU|done in" "$1" | tail -1; }

# --- run -----------------------------------------------------------------------------------------
phase machine "" machine_note machine
phase deps "" deps_note deps
phase configure deps configure_note configure
# -k 0: one target that fails to compile (a newer compiler here than Debian's) must not hide the
# rest; the tests and the package still run, and ctest reports what did not build as "Not Run".
phase build configure build_note cmake --build "$build" --parallel "$jobs" -- -k 0
# The Python package builds while the C++ tests run (they are mostly waiting on the disk).
pip_pid=""
pip_begin=$(now)
if [ "${status_of[configure]}" = passed ] && [[ "$skip" != *",pip,"* ]]; then
  say "pip (in the background) ..."
  pip_install >"$logs/pip.log" 2>&1 &
  pip_pid=$!
fi
phase ctest_gpu configure ctest_note ctest_gpu
phase ctest configure ctest_note ctest_rest
if [ -n "$pip_pid" ]; then
  wait "$pip_pid"
  code=$?
  seconds=$(since "$pip_begin")
  if [ "$code" = 0 ]; then
    record pip passed "$seconds" "$(pip_note "$logs/pip.log") (beside the C++ tests)"
  else
    record pip failed "$seconds" "exit $code; last line: $(tail -1 "$logs/pip.log" | cut -c1-200)"
  fi
else
  phase pip build pip_note pip_install
fi
phase linkage pip linkage_note linkage
phase pytest pip pytest_note pytest_run
phase bench pip bench_note bench

# --- summary -------------------------------------------------------------------------------------
total=$(since "$started")
[ -f "$work/bench/results.json" ] && cp "$work/bench/results.json" "$out/bench-results.json"
[ -f "$work/bench/results.md" ] && cp "$work/bench/results.md" "$logs/bench-results.md"
"$python" - "$results" "$out" "$total" "$logs" <<'EOF'
import json, sys, xml.etree.ElementTree as ET
from pathlib import Path
results, out, total, logs = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), Path(sys.argv[4])
phases = []
for line in results.read_text().splitlines():
    name, status, seconds, note = (line.split("\t") + [""] * 4)[:4]
    phases.append({"phase": name, "status": status, "seconds": round(float(seconds or 0), 1),
                   "note": note})
def junit(name):
    path = logs / name
    if not path.exists():
        return None
    cases = []
    for case in ET.parse(path).iter("testcase"):
        status = case.get("status") or "passed"
        if case.find("failure") is not None or case.find("error") is not None:
            status = "failed"
        elif case.find("skipped") is not None or status in ("notrun", "disabled"):
            status = "skipped"
        elif status == "run":
            status = "passed"
        cases.append({"name": f"{case.get('classname', '')}::{case.get('name')}".strip(":"),
                      "status": status, "seconds": float(case.get("time") or 0)})
    counts = {}
    for case in cases:
        counts[case["status"]] = counts.get(case["status"], 0) + 1
    return {"counts": counts, "not_passed": [c for c in cases if c["status"] != "passed"]}
machine = {}
machine_log = logs / "machine.log"
if machine_log.exists():
    for line in machine_log.read_text().splitlines():
        if ": " in line:
            key, value = line.split(": ", 1)
            machine.setdefault(key, value)
bench = {}
bench_path = out / "bench-results.json"
if bench_path.exists():
    data = json.loads(bench_path.read_text())
    bench = {"device": data.get("gpu", {}).get("device"),
             "comparisons": [{k: c.get(k) for k in ("id", "title", "status", "ratio", "reason",
                                                     "subject", "peer")}
                             for c in data.get("comparisons", [])],
             "errors": data.get("errors", [])}
summary = {"total_seconds": round(total, 1), "ok": all(p["status"] != "failed" for p in phases),
           "machine": machine, "phases": phases,
           "tests": {"ctest_gpu": junit("ctest_gpu.xml"), "ctest": junit("ctest.xml"),
                     "pytest": junit("pytest.xml")},
           "bench": bench}
(out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
lines = [f"gpucache gpu-check, {machine.get('date', '')}: {machine.get('gpu') or 'no GPU'}",
         f"{'phase':<10} {'status':<8} {'seconds':>8}  note"]
for p in phases:
    lines.append(f"{p['phase']:<10} {p['status']:<8} {p['seconds']:>8.1f}  {p['note'][:150]}")
lines.append(f"{'total':<10} {'ok' if summary['ok'] else 'FAILED':<8} {total:>8.1f}")
for comparison in bench.get("comparisons", []):
    lines.append(f"bench {comparison['id']}: {comparison['status']} "
                 f"{comparison.get('ratio') if comparison.get('ratio') is not None else ''} "
                 f"{comparison.get('reason') or ''}"[:200])
(out / "summary.txt").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
tar -czf "$out/logs.tar.gz" -C "$work" logs
say "wrote $out/summary.json, summary.txt, logs.tar.gz"
grep -q "	failed	" "$results" && exit 1
exit 0
