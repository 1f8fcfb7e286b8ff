#!/usr/bin/env bash
# Builds the twill_triton wheel with twill-opt inside (docs/wheel.md):
#
#   bash scripts/wheel.sh [OUT_DIR]        (default: target/wheels)
#
# twill-opt is built with the `wheel` profile (release, stripped; its own
# target/wheel directory) and MLIR_SYS_LINK_SHARED=0, so MLIR and LLVM are
# linked statically (libmlir-22-dev / llvm-22-dev's archives). The shared
# libraries it still needs, other than the C and C++ runtimes (glibc,
# libstdc++, libgcc_s), are copied next to it; its DT_RPATH is $ORIGIN (set by
# build.rs), so they are found wherever pip puts them. The package is built
# from a copy of third_party/triton, so no build output lands in the tree.
# Prints the wheel's path and size last. Needs what scripts/setup.sh installs
# plus a Python 3 with pip (TWILL_WHEEL_PYTHON, default python3).
set -euo pipefail
out=$(realpath -m "${1:-$(dirname "$0")/../target/wheels}")
cd "$(dirname "$0")/.."

python=${TWILL_WHEEL_PYTHON:-python3}

MLIR_SYS_LINK_SHARED=0 cargo build --profile wheel --locked --bin twill-opt
binary=target/wheel/twill-opt

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/src"
cp "$binary" "$stage/bin/twill-opt"

# The C and C++ runtimes every Linux system with a compiler toolchain's
# runtime has; everything else twill-opt loads travels with it.
is_runtime() {
  case "$1" in
    linux-vdso.so.* | ld-linux-*.so.* | libc.so.* | libm.so.* | libdl.so.* | librt.so.* | libpthread.so.* \
      | libgcc_s.so.* | libstdc++.so.*) return 0 ;;
  esac
  return 1
}

# ldd resolves the whole closure (Z3's own dependencies included).
while read -r soname path; do
  is_runtime "$soname" && continue
  cp -L "$path" "$stage/bin/$soname"
  chmod 0644 "$stage/bin/$soname"
  strip --strip-unneeded "$stage/bin/$soname"
  echo "wheel.sh: vendored $soname (from $path)"
done < <(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')

# The staged binary must resolve every vendored library next to itself and
# need no MLIR or LLVM shared library.
if readelf -d "$stage/bin/twill-opt" | grep -E 'NEEDED.*lib(MLIR|LLVM)'; then
  echo "wheel.sh: twill-opt still needs a shared MLIR/LLVM library (MLIR_SYS_LINK_SHARED=0 ignored?)" >&2
  exit 1
fi
ldd "$stage/bin/twill-opt" | awk -v dir="$stage/bin/" '
  $2 == "=>" && $1 !~ /^(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+)\.so/ && index($3, dir) != 1 {
    print "wheel.sh: " $1 " resolves to " $3 ", not the vendored copy"; bad = 1
  }
  END { exit bad }' >&2

# A copy of the package's sources, without the tests.
cp third_party/triton/setup.py third_party/triton/pyproject.toml third_party/triton/MANIFEST.in \
  third_party/triton/twill_triton.pth "$stage/src/"
mkdir "$stage/src/twill_triton"
cp third_party/triton/twill_triton/*.py "$stage/src/twill_triton/"

mkdir -p "$out"
rm -f "$out"/twill_triton-*.whl
TWILL_WHEEL_BIN="$stage/bin" "$python" -m pip wheel -q --no-deps -w "$out" "$stage/src"
wheel=$(ls "$out"/twill_triton-*.whl)
echo "wheel.sh: $(du -b "$binary" | cut -f1) bytes twill-opt, $(du -sb "$stage/bin" | cut -f1) bytes bin/ unpacked"
echo "wheel.sh: $wheel $(du -b "$wheel" | cut -f1) bytes"
