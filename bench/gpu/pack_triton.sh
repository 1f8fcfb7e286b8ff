#!/usr/bin/env bash
# Packs a pip Triton for the H100 machine, under the device tool's 64 MiB
# carry limit: the CPython 3.12 wheel (the H100 machine's Python) without
# what an sm90 compile and launch never load (the AMD backend, proton,
# CUPTI, the instrumentation and plugin test libraries, the C++ headers,
# FileCheck, cuobjdump, nvdisasm) and without its two ptxas binaries (the
# H100 machine's own Triton 3.6 ships ptxas 12.8, and Triton picks the PTX
# version from the ptxas it is given), with libtriton.so stripped of its
# debug information, as one tar.xz.
#
#   bash bench/gpu/pack_triton.sh [VERSION]   # default 3.9.0
#
# writes target/carry/triton-VERSION.tar.xz (39 MB for 3.9.0; the twill_triton
# wheel, 19 MB, and the tracked tree travel with it). On the GPU machine
# (carry target/carry, target/wheels and bench/gpu/plans; bench/gpu/h100.sh
# does this):
#
#   mkdir -p /tmp/t && tar -xJf target/carry/triton-VERSION.tar.xz -C /tmp/t
#   export TRITON_PTXAS_PATH=$(python3 -c 'import triton, os; print(os.path.dirname(triton.__file__))')/backends/nvidia/bin/ptxas
#   export TRITON_PTXAS_BLACKWELL_PATH=$TRITON_PTXAS_PATH   # Triton >= 3.8 compiles sm90 with this one
#   PYTHONPATH=/tmp/t python3 -m bench.gpu.run --out $OUT/bench
#
# Triton launches kernels through a small C stub it compiles at run time with
# the machine's C compiler, and finds libcuda through the driver; neither is
# in the wheel, both are on the H100 machine (its own Triton 3.6 uses them).
set -euo pipefail
VER=${1:-3.9.0}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$ROOT/target/carry/triton-$VER.tar.xz
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_28_x86_64 "triton==$VER" -d "$WORK/whl"
mkdir -p "$WORK/tree"
unzip -q "$WORK"/whl/triton-*.whl 'triton/*' -d "$WORK/tree"
T=$WORK/tree/triton
rm -rf "$T/backends/amd" "$T/_C/libproton.so" "$T/instrumentation" \
  "$T/backends/nvidia/lib/cupti" "$T/backends/nvidia/lib/cupti-blackwell" \
  "$T/backends/nvidia/bin" "$T/include" "$T/FileCheck"
rm -f "$T"/plugins/*.so*
strip --strip-unneeded "$T/_C/libtriton.so"
mkdir -p "$(dirname "$OUT")"
tar -C "$WORK/tree" -cf - triton | xz -T2 -9 > "$OUT.part"
mv "$OUT.part" "$OUT"
ls -l "$OUT"
size=$(stat -c %s "$OUT")
if [ "$size" -gt $((44 * 1024 * 1024)) ]; then
  echo "pack_triton: $OUT is $size bytes, too close to the 64 MiB carry limit" >&2
  exit 1
fi
