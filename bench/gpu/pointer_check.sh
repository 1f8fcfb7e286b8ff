#!/usr/bin/env bash
# One device call: the pointer-load (cp.async) correctness sweep,
# bench.gpu.pointer_check, stock Triton against twill (scope=all), twill
# scheduling live on the GPU machine from the installed wheel (bash
# scripts/wheel.sh; carry target/wheels): the sweep records its schedules
# into a scratch directory, then runs every kernel from it.
#
#   bash bench/gpu/pointer_check.sh     # OUT: where results go (the device tool sets it)
#
# Writes $OUT/pointer/results.json, table.md and run.log. Exit status as
# pointer_check.py's: 1 if a row is WRONG or failed, 3 if a twill row did not
# get its schedule, 2 for no GPU / no wheel.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/gpu/out}
mkdir -p "$OUT/pointer"
export PYTHONUNBUFFERED=1
source bench/gpu/install_wheel.sh
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv 2>&1; } | tee "$OUT/pointer/gpu.txt"
scratch=$(mktemp -d)
python3 -m bench.gpu.pointer_check --record "$scratch" > "$OUT/pointer/record.log" 2>&1 \
  || { tail -20 "$OUT/pointer/record.log"; exit 1; }
python3 -m bench.gpu.pointer_check --replay "$scratch" --out "$OUT/pointer" 2>&1 | tee "$OUT/pointer/run.log"
exit "${PIPESTATUS[0]}"
