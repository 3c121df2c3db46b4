#!/usr/bin/env bash
# Installs gpucache's build and test dependencies from Debian 12 packages. Safe to run again: it
# only calls apt-get when a package is missing. The CUDA toolkit is optional and not installed here.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libcli11-dev libfmt-dev nlohmann-json3-dev libxxhash-dev libzstd-dev zlib1g-dev doctest-dev
  libhdf5-dev  # HDF5 input; optional: a build without it refuses .h5 files
  libsnappy-dev liblz4-dev libbrotli-dev  # Parquet input (snappy, LZ4 and BROTLI pages); optional like libhdf5-dev
  libcurl4-openssl-dev  # remote datasets (s3://, http(s)://; docs/remote.md); optional like libhdf5-dev
  xxhash time
  postgresql  # initdb and pg_ctl for src/python/tests/inputs/test_postgres.py, which skips without them
  python3 python3-dev python3-venv python3-pip python3-numpy python3-torch python3-pytest
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "gpucache: installing ${missing[*]}" >&2
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
"${sudo_cmd[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
