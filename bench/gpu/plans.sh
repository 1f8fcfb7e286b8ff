#!/usr/bin/env bash
# Builds the GPU benchmark's plans cache (python -m bench.gpu.run --plans)
# with both Tritons, on a machine with twill (no GPU needed): the Gluon
# plans and the model's choice of configuration under
# bench/gpu/plans/<triton version> (not committed; carry bench/gpu/plans to
# the GPU machine), every twill compile of the bench compared with
# bench/gpu/expected/<triton version>.json. Exits non-zero on a difference.
#
#   bash bench/gpu/plans.sh [run.py options]      # e.g. --bless to accept a difference
#
# Uses the venvs of scripts/test.sh (target/venv-triton-3.6.0 and -3.9.0) and
# a copy of target/release/twill-opt and twill (so that rebuilding meanwhile
# does not change what is made). Triton 3.9 runs with the 3.6 wheel's
# ptxas 12.8 and FP fusion on, as bench/gpu/h100.sh runs it on the GPU
# machine: the registers and spills that twill_triton.configure reads to
# rank candidates must be the ones the GPU gets. Both run at once (about
# 10 min on 2 cores); logs go to target/plans-3.6.0.log and target/plans-3.9.0.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
v36=target/venv-triton-3.6.0/bin/python
v39=target/venv-triton-3.9.0/bin/python
for py in "$v36" "$v39"; do
  [ -x "$py" ] || { echo "plans.sh: $py missing (bash scripts/test.sh creates it)" >&2; exit 1; }
done
bin=$(mktemp -d)
cp target/release/twill-opt target/release/twill "$bin/"
export TWILL_OPT="$bin/twill-opt"
# twill_triton of this checkout, ahead of the virtual environments' installed one.
export PYTHONPATH=$PWD/third_party/triton${PYTHONPATH:+:$PYTHONPATH}
ptxas=$("$v36" -c 'import triton, os; print(os.path.dirname(triton.__file__))')/backends/nvidia/bin/ptxas
"$v36" -m bench.gpu.run --plans "$@" > target/plans-3.6.0.log 2>&1 &
p36=$!
TRITON_PTXAS_PATH=$ptxas TRITON_PTXAS_BLACKWELL_PATH=$ptxas TRITON_DEFAULT_FP_FUSION=1 \
  "$v39" -m bench.gpu.run --plans "$@" > target/plans-3.9.0.log 2>&1 &
p39=$!
status=0
wait $p36 || { echo "plans.sh: Triton 3.6.0 failed or differs, see target/plans-3.6.0.log" >&2; status=1; }
wait $p39 || { echo "plans.sh: Triton 3.9.0 failed or differs, see target/plans-3.9.0.log" >&2; status=1; }
rm -rf "$bin"
tail -n 1 target/plans-3.6.0.log target/plans-3.9.0.log
exit $status
