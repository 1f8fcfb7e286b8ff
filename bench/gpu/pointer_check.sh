#!/usr/bin/env bash
# One device call: the pointer-load (cp.async) correctness sweep,
# bench.gpu.pointer_check, stock Triton against twill (scope=all) with the
# schedules replayed from bench/gpu/pointer-replay (the GPU machine has no
# twill-opt). That directory is generated and not committed (.gitignore);
# rebuild it on a machine with twill-opt (no GPU needed; ~20 s, ~4 MB):
#
#   target/venv-triton-3.6.0/bin/python -m bench.gpu.pointer_check --record bench/gpu/pointer-replay
#
# with the Triton the GPU machine runs (3.6.0: the replay keys are the
# exported TTGIR, per Triton version) and the twill-opt under test.
#
#   bash bench/gpu/pointer_check.sh     # OUT: where results go (the device tool sets it)
#
# Writes $OUT/pointer/results.json, table.md and run.log. Exit status as
# pointer_check.py's: 1 if a row is WRONG or failed, 3 if a twill row did not
# get its recorded schedule, 2 for no GPU / no recorded directory.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/gpu/out}
mkdir -p "$OUT/pointer"
export PYTHONUNBUFFERED=1
# twill_triton of this checkout (the machine has no installed one; ahead of
# any that is), imported by the bench modules (python -m bench...).
export PYTHONPATH=$PWD/third_party/triton${PYTHONPATH:+:$PYTHONPATH}
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv 2>&1; } | tee "$OUT/pointer/gpu.txt"
python3 -m bench.gpu.pointer_check --replay bench/gpu/pointer-replay --out "$OUT/pointer" 2>&1 | tee "$OUT/pointer/run.log"
exit "${PIPESTATUS[0]}"
