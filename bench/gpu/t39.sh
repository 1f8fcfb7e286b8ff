#!/usr/bin/env bash
# Runs a command with the carried Triton 3.9.0 (bash bench/gpu/pack_triton.sh
# 3.9.0; carry target/carry) on the GPU machine, set up as h100.sh does:
#
#   bash bench/gpu/t39.sh python3 -m bench.gpu.probe.bwd_loads --out "$OUT/t39"
set -euo pipefail
cd "$(dirname "$0")/../.."
# twill_triton from the carried wheel (carry target/wheels), scheduling live.
source bench/gpu/install_wheel.sh
mkdir -p /tmp/t39
[ -d /tmp/t39/triton ] || tar -xJf target/carry/triton-3.9.0.tar.xz -C /tmp/t39
TRITON_PTXAS_PATH=$(python3 -c 'import triton, os; print(os.path.dirname(triton.__file__))')/backends/nvidia/bin/ptxas
export TRITON_PTXAS_PATH TRITON_PTXAS_BLACKWELL_PATH=$TRITON_PTXAS_PATH TRITON_DEFAULT_FP_FUSION=1 \
  TRITON_BACKENDS_IN_TREE=1 PYTHONPATH=/tmp/t39
exec "$@"
