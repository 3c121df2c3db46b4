#!/usr/bin/env bash
# Installs a gpucache build into a temporary prefix and uses it as a user would: checks what was
# installed, packs a dataset with the installed `gpucache`, then builds tests/install/ (C++ and C)
# with find_package(gpucache) and both programs again with `pkg-config gpucache`, and runs all
# four against the dataset. CTest runs it as install_consumer (tests/CMakeLists.txt).
#
#   tests/install/run.sh BUILD_DIR
#
# Environment (CTest sets them from the build; by hand the defaults are the tools on PATH):
#   CMAKE, CC, CXX, PKG_CONFIG, CMAKE_GENERATOR
#   GPUCACHE_CONSUMER_FLAGS  compile and link flags for the consumers; a sanitized build installs a
#                            sanitized library, so its consumers must link the same sanitizers
#   GPUCACHE_KEEP_INSTALL_TEST=1 keeps the temporary directory (its path is printed)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build_dir=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
cmake=${CMAKE:-cmake}
cc=${CC:-cc}
cxx=${CXX:-c++}
pkg_config=${PKG_CONFIG:-pkg-config}
read -r -a flags <<<"${GPUCACHE_CONSUMER_FLAGS:-}"

work=$(mktemp -d "${TMPDIR:-/tmp}/gpucache-install-test.XXXXXX")
if [ "${GPUCACHE_KEEP_INSTALL_TEST:-0}" = 1 ]; then
  echo "install test: keeping $work"
else
  trap 'rm -rf "$work"' EXIT
fi
prefix=$work/prefix
fail() {
  echo "install test: FAILED: $*" >&2
  exit 1
}

# 1. Install, and check that exactly the public surface was installed.
"$cmake" --install "$build_dir" --prefix "$prefix" >"$work/install.log" ||
  fail "cmake --install $build_dir (log: $work/install.log)"
[ -x "$prefix/bin/gpucache" ] || fail "bin/gpucache was not installed"
headers=$(cd "$prefix/include" && find . -type f | sort | tr '\n' ' ')
expected_headers="./gpucache/api.hpp ./gpucache/batch_order.hpp ./gpucache/batch_stream.hpp ./gpucache/column.hpp ./gpucache/dtype.hpp ./gpucache/error.hpp ./gpucache/gpucache.h ./gpucache/runtime.hpp "
[ "$headers" = "$expected_headers" ] ||
  fail "installed headers are [$headers], expected [$expected_headers]"
library=$(find "$prefix" -name 'libgpucache_runtime.so' | head -n 1)
[ -n "$library" ] || fail "libgpucache_runtime.so was not installed"
libdir=$(dirname "$library")
for file in cmake/gpucache/gpucache-config.cmake cmake/gpucache/gpucache-config-version.cmake \
  cmake/gpucache/gpucache-targets.cmake pkgconfig/gpucache.pc; do
  [ -f "$libdir/$file" ] || fail "$libdir/$file was not installed"
done
if find "$prefix" -name '*.a' | grep -q .; then
  fail "static module libraries were installed: $(find "$prefix" -name '*.a' | tr '\n' ' ')"
fi

# 2. A dataset packed by the installed CLI, in several shards so readers walk pieces.
source_npy=$root/examples/data/embeddings-part-0.npy
"$prefix/bin/gpucache" pack "$source_npy" -o "$work/dataset" --shard-rows 256 --quiet >/dev/null ||
  fail "the installed gpucache could not pack $source_npy"

# 3. find_package(gpucache) from CMAKE_PREFIX_PATH alone.
consumer_build=$work/consumer-build
generator=()
[ -n "${CMAKE_GENERATOR:-}" ] && generator=(-G "$CMAKE_GENERATOR")
"$cmake" -S "$here" -B "$consumer_build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_C_FLAGS="${flags[*]}" -DCMAKE_CXX_FLAGS="${flags[*]}" \
  -DCMAKE_EXE_LINKER_FLAGS="${flags[*]}" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log" >&2; fail "configuring the consumer with find_package(gpucache)"; }
grep -q "gpucache 0.*from $libdir/cmake/gpucache" "$work/configure.log" ||
  { cat "$work/configure.log" >&2; fail "find_package(gpucache) did not use $prefix"; }
"$cmake" --build "$consumer_build" >"$work/build.log" 2>&1 ||
  { cat "$work/build.log" >&2; fail "building the consumer against gpucache::runtime"; }
"$consumer_build/consumer_cpp" "$work/dataset" "$source_npy" || fail "consumer_cpp (find_package)"
"$consumer_build/consumer_c" "$work/dataset" "$source_npy" || fail "consumer_c (find_package)"

# 4. pkg-config, from PKG_CONFIG_PATH alone.
export PKG_CONFIG_PATH=$libdir/pkgconfig
version=$("$pkg_config" --modversion gpucache) || fail "pkg-config does not find gpucache"
cli_version=$("$prefix/bin/gpucache" --version)
[ "$version" = "$cli_version" ] || fail "gpucache.pc says $version, the CLI $cli_version"
read -r -a pc_flags <<<"$("$pkg_config" --cflags --libs gpucache)"
[ "$("$pkg_config" --variable=libdir gpucache)" -ef "$libdir" ] ||
  fail "gpucache.pc's libdir $("$pkg_config" --variable=libdir gpucache) is not $libdir"
"$cc" -std=c99 -Wall -Wextra -pedantic -Werror "${flags[@]}" "$here/consumer.c" "${pc_flags[@]}" \
  -Wl,-rpath,"$libdir" -o "$work/consumer_c_pc" || fail "compiling consumer.c with pkg-config"
"$cxx" -std=c++20 -Wall -Wextra -pedantic -Werror "${flags[@]}" "$here/consumer.cpp" \
  "${pc_flags[@]}" -Wl,-rpath,"$libdir" -o "$work/consumer_cpp_pc" ||
  fail "compiling consumer.cpp with pkg-config"
"$work/consumer_c_pc" "$work/dataset" "$source_npy" || fail "consumer_c (pkg-config)"
"$work/consumer_cpp_pc" "$work/dataset" "$source_npy" || fail "consumer_cpp (pkg-config)"
echo "install test: passed (find_package and pkg-config, C++ and C, prefix $prefix)"
