#!/usr/bin/env bash
# Rehearses the GPU check on a Debian 12 CPU machine: scripts/gpu-prepare.sh, then
# scripts/gpu-check.sh with the Debian -dev packages the build uses (and pkg-config) hidden, so the
# build can only use what .gpu/ carries. Nothing is removed or installed: inside a private mount
# namespace that only this command sees, an overlay over /usr holds a whiteout for every file
# `dpkg -L` lists for those packages. The GPU tests skip (no GPU); everything else runs.
#   sudo bash scripts/gpu-rehearsal.sh [OUTDIR]    # default gpu-out-rehearsal/; needs root
# Environment: GPUCACHE_GPU_PYTHON, the python3 that plays the GPU machine's (it must import torch,
# numpy, nanobind, scikit-build-core and pytest; default python3); the other GPUCACHE_GPU_* of
# scripts/gpu-check.sh. The build goes to build-gpu-rehearsal/ unless GPUCACHE_GPU_BUILD says.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/gpu-out-rehearsal}
[ "$(id -u)" = 0 ] || { echo "gpu-rehearsal: needs root (unshare --mount, mount -t overlay)" >&2; exit 2; }
hidden=(libcli11-dev libfmt-dev nlohmann-json3-dev libxxhash-dev libzstd-dev zlib1g-dev doctest-dev
  libsnappy-dev liblz4-dev pkg-config pkgconf pkgconf-bin)

bash "$root/scripts/gpu-prepare.sh"

scratch=$(mktemp -d /tmp/gpucache-rehearsal.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/upper" "$scratch/work"
count=0
for package in "${hidden[@]}"; do
  dpkg-query -W "$package" >/dev/null 2>&1 || continue
  while read -r path; do
    case "$path" in
      /usr/*) relative=${path#/usr/} ;;
      /lib/* | /bin/* | /sbin/*) relative=${path#/} ;;  # merged /usr: /lib is /usr/lib
      *) continue ;;
    esac
    [ -f "$path" ] || [ -L "$path" ] || continue
    mkdir -p "$scratch/upper/$(dirname "$relative")"
    mknod "$scratch/upper/$relative" c 0 0  # an overlay whiteout: the file is not there
    count=$((count + 1))
  done < <(dpkg -L "$package")
done
echo "gpu-rehearsal: hiding $count files of ${hidden[*]}" >&2

export GPUCACHE_GPU_BUILD=${GPUCACHE_GPU_BUILD:-$root/build-gpu-rehearsal}
# A CPU machine builds for far longer than the GPU machine's call allows: the check's deadline
# (500 s there) is two hours here unless set.
export GPUCACHE_GPU_DEADLINE_S=${GPUCACHE_GPU_DEADLINE_S:-7200}
unshare --mount --propagation private bash -c '
  set -e
  mount -t overlay overlay -o "lowerdir=/usr,upperdir=$1/upper,workdir=$1/work" /usr
  for file in /usr/include/zstd.h /usr/include/fmt/format.h /usr/bin/pkg-config; do
    [ ! -e "$file" ] || { echo "gpu-rehearsal: $file is still visible" >&2; exit 2; }
  done
  echo "gpu-rehearsal: the -dev packages are hidden in this namespace" >&2
  bash "$2/scripts/gpu-check.sh" "$3"
' rehearsal "$scratch" "$root" "$out"
