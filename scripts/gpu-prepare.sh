#!/usr/bin/env bash
# Run on a Debian 12 machine with apt (no root needed): downloads the Debian packages that
# scripts/gpu-check.sh builds gpucache from on a bare GPU machine (no apt, no network there) into
# .gpu/ (git-ignored), so that one folder travels with the working tree. Safe to run again: a
# package already there at the candidate version is not downloaded twice, and files of packages no
# longer listed are removed. Nothing is installed: `apt-get download` fetches the .deb files only.
#   bash scripts/gpu-prepare.sh [DIR]      # default .gpu
# HDF5 is left out (its dependency tree is about 10 MiB): the GPU build has no HDF5 input, and the
# tests of it skip there. Header-only packages (CLI11, nlohmann-json, doctest) need no library; the
# others bring their runtime library too, and gpu-check.sh reports when the GPU machine's C library
# is older than what those were built against.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/.gpu}
limit_mib=20

# -dev packages of scripts/install-deps.sh that the build needs, with their runtime libraries, and
# pkg-config (pkgconf), which CMake's FindPkgConfig needs and the GPU machine may lack.
packages=(
  libcli11-dev nlohmann-json3-dev doctest-dev
  libfmt-dev libfmt9
  libxxhash-dev libxxhash0
  libzstd-dev libzstd1
  zlib1g-dev zlib1g
  libsnappy-dev libsnappy1v5
  liblz4-dev liblz4-1
  pkgconf pkgconf-bin libpkgconf3
)

command -v apt-get >/dev/null || { echo "gpu-prepare: apt-get not found (run on Debian 12)" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"
wanted=()
for package in "${packages[@]}"; do
  version=$(apt-cache policy "$package" | awk '/Candidate:/ {print $2}')
  if [ -z "$version" ] || [ "$version" = "(none)" ]; then
    echo "gpu-prepare: no candidate version for $package (apt-get update first?)" >&2
    exit 1
  fi
  arch=$(apt-cache show "$package=$version" | awk '/^Architecture:/ {print $2; exit}')
  # .deb names carry the version with ':' written as %3a.
  file="${package}_${version//:/%3a}_${arch}.deb"
  wanted+=("$file")
  if [ ! -f "$file" ]; then
    apt-get download -qq "$package=$version" 2>&1 | grep -v "^W: Download is performed unsandboxed" >&2 || :
    [ -f "$file" ] || { echo "gpu-prepare: downloading $package=$version failed" >&2; exit 1; }
  fi
done
# Keep only what is listed now (a version change leaves the old file behind otherwise).
for file in *.deb; do
  keep=0
  for w in "${wanted[@]}"; do [ "$file" = "$w" ] && keep=1; done
  if [ "$keep" = 0 ]; then
    if [[ "$file" == *_all.deb ]] || [[ "$file" == *_"$(dpkg --print-architecture)".deb ]]; then
      rm -f "$file"
    fi
  fi
done
ls -1 ./*.deb | sed 's|^\./||' >MANIFEST
size_kib=$(du -sk --apparent-size . | cut -f1)
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
  echo "gpu-prepare: $dir holds $((size_kib / 1024)) MiB, over the ${limit_mib} MiB budget" >&2
  exit 1
fi
echo "gpu-prepare: ${#wanted[@]} packages, $((size_kib / 1024)).$(((size_kib % 1024) * 10 / 1024)) MiB in $dir" >&2
