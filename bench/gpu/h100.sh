#!/usr/bin/env bash
# One device call on the GPU machine: the whole GPU benchmark (bench.gpu.run)
# with the machine's own Triton 3.6.0 and, when it was packed and carried
# (bash bench/gpu/pack_triton.sh 3.9.0; carry target/carry), with Triton
# 3.9.0. twill schedules live there, from the installed wheel; what needs
# the `twill` solver (the Gluon plans, the model's choice) comes from the
# plans cache. Before the call, on a machine with twill (no GPU needed):
#
#   bash scripts/wheel.sh                         # target/wheels/twill_triton-*.whl
#   bash bench/gpu/plans.sh                       # bench/gpu/plans/<triton>, compared with bench/gpu/expected
#
# then, on the device (carry target/wheels and bench/gpu/plans):
#
#   bash bench/gpu/h100.sh          # OUT: where results go (the device tool sets it)
#   bash bench/gpu/h100.sh 36       # only Triton 3.6.0 (39: only 3.9.0), one per
#                                   # device call when both exceed its 600 s
#   bash bench/gpu/h100.sh 36 --kinds gemm --sweep
#                                   # arguments after the first go to bench.gpu.run:
#                                   # here the GEMM alone and the lowered GEMMs'
#                                   # correctness sweep (no plans cache needed)
#
# Writes $OUT/gpu.txt, and per Triton results.json, results.png and run.log
# under $OUT/bench36 and $OUT/bench39. Every twill compile's schedules are
# compared with bench/gpu/expected/<triton>.json (results.json "schedules").
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/gpu/out}
which=${1:-all}
shift || true
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# A run of some kinds (--kinds) goes on without the plans cache (no Gluon
# rows, no model's choice); the whole run needs it.
if [ ! -d bench/gpu/plans ]; then
  case " $* " in
    *" --kinds"*) echo "no plans cache: no Gluon plans and no model's choice in this run" >&2 ;;
    *) echo "no plans cache: run bash bench/gpu/plans.sh and carry bench/gpu/plans" >&2; exit 2 ;;
  esac
fi
source bench/gpu/install_wheel.sh
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv; } | tee "$OUT/gpu.txt"
status=0
if [ "$which" != 39 ]; then
  mkdir -p "$OUT/bench36"
  python3 -m bench.gpu.run --out "$OUT/bench36" "$@" 2>&1 | tee "$OUT/bench36/run.log" || status=1
fi
if [ "$which" != 36 ] && [ -f target/carry/triton-3.9.0.tar.xz ]; then
  mkdir -p /tmp/t39 "$OUT/bench39" && tar -xJf target/carry/triton-3.9.0.tar.xz -C /tmp/t39
  # Triton 3.9 compiles sm90 with ptxas-blackwell; the machine's 3.6 wheel
  # supplies ptxas 12.8 for both. Backends from the carried tree only.
  TRITON_PTXAS_PATH=$(python3 -c 'import triton, os; print(os.path.dirname(triton.__file__))')/backends/nvidia/bin/ptxas
  export TRITON_PTXAS_PATH TRITON_PTXAS_BLACKWELL_PATH=$TRITON_PTXAS_PATH TRITON_DEFAULT_FP_FUSION=1 \
    TRITON_BACKENDS_IN_TREE=1
  PYTHONPATH=/tmp/t39 python3 -m bench.gpu.run --out "$OUT/bench39" "$@" 2>&1 | tee "$OUT/bench39/run.log" || status=1
fi
exit $status
