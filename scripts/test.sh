#!/usr/bin/env bash
# Runs every test of the project: formatting, lints (which also compile the
# benchmark), unit, property, CLI and case-study tests (cargo), then the MLIR
# tests of the passes and both hosts (lit, on a release build). The solver
# benchmark itself is not a test: run it with `cargo bench --bench solver`.
# Prints one `N passed, N failed` summary line per runner and exits non-zero
# if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

status=0
export PROPTEST_CASES="${PROPTEST_CASES:-500}"
# Property tests draw from a fixed seed here so that a CI verdict can be
# reproduced; explore new cases with `cargo test` directly (random seed) or
# by setting PROPTEST_RNG_SEED. Failures found that way go into
# tests/*.proptest-regressions and into a named test.
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261122}"

cargo fmt --check || { echo "fmt: 0 passed, 1 failed"; status=1; }
cargo clippy --all-targets --locked -- -D warnings || { echo "clippy: 0 passed, 1 failed"; status=1; }

log=$(mktemp)
cargo test --locked --lib --bins --tests 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
passed=$(awk '/^test result:/ { for (i = 1; i < NF; i++) if ($(i + 1) ~ /^passed/) s += $i } END { print s + 0 }' "$log")
failed=$(awk '/^test result:/ { for (i = 1; i < NF; i++) if ($(i + 1) ~ /^failed/) s += $i } END { print s + 0 }' "$log")
echo "cargo: ${passed:-0} passed, ${failed:-0} failed"
if [ "$rc" -ne 0 ] || [ "${passed:-0}" -eq 0 ]; then status=1; fi
rm -f "$log"

# MLIR tests: twill-opt, the mlir-opt-22 plugin host, export + solve.
lit_bin=$(command -v lit-22 || command -v lit || true)
if ! cargo build --release --locked --bins --lib; then
  echo "lit: 0 passed, 1 failed"
  status=1
elif [ -z "$lit_bin" ]; then
  echo "lit: not found (install llvm-22-tools)"
  echo "lit: 0 passed, 1 failed"
  status=1
else
  log=$(mktemp)
  "$lit_bin" -v test/ 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  passed=$(awk '/^ *Passed *:/ { s += $2 } END { print s + 0 }' "$log")
  failed=$(awk '/^ *(Failed|Unresolved|Timed Out) *:/ { s += $NF ~ /%/ ? $(NF-1) : $NF } END { print s + 0 }' "$log")
  echo "lit: ${passed:-0} passed, ${failed:-0} failed"
  if [ "$rc" -ne 0 ] || [ "${passed:-0}" -eq 0 ]; then status=1; fi
  rm -f "$log"
fi

# Triton integration (third_party/triton): compile tests on the CPU for every
# Triton version we support, each in its own virtual environment under
# target/ (rebuilt from PyPI when missing).
for ver in ${TWILL_TRITON_VERSIONS:-3.6.0 3.9.0}; do
  venv="target/venv-triton-$ver"
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import triton, pytest" 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv" && "$venv/bin/pip" install -q "triton==$ver" pytest ./third_party/triton \
      || { echo "pytest (triton $ver): 0 passed, 1 failed"; status=1; continue; }
  fi
  # The installed twill_triton (imported at startup by its .pth) must be
  # this checkout's.
  "$venv/bin/pip" install -q --no-deps --force-reinstall ./third_party/triton \
    || { echo "pytest (triton $ver): 0 passed, 1 failed"; status=1; continue; }
  log=$(mktemp)
  TWILL_OPT="$PWD/target/release/twill-opt" "$venv/bin/python" -m pytest -q -p no:cacheprovider third_party/triton/tests 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  summary=$(grep -E "[0-9]+ (passed|failed|errors?)( |,|$)" "$log" | tail -1)
  passed=$(echo "$summary" | grep -oE "[0-9]+ passed" | awk '{ s += $1 } END { print s + 0 }')
  failed=$(echo "$summary" | grep -oE "[0-9]+ (failed|errors?)" | awk '{ s += $1 } END { print s + 0 }')
  # Triton 3.9's bindings print a leak report at exit without a final
  # newline: start the summary on a line of its own.
  echo
  echo "pytest (triton $ver): ${passed:-0} passed, ${failed:-0} failed"
  if [ "$rc" -ne 0 ] || [ "${passed:-0}" -eq 0 ]; then status=1; fi
  rm -f "$log"
done

# The wheel (docs/wheel.md): twill_triton with a twill-opt linked statically
# against MLIR and LLVM, installed into a fresh virtual environment and used
# where the MLIR, LLVM and Z3 shared libraries are hidden from the loader.
wheel_start=$SECONDS
rm -f target/wheels/twill_triton-*.whl
if bash scripts/wheel.sh target/wheels; then
  wheel=$(ls target/wheels/twill_triton-*.whl)
  echo "wheel: built in $((SECONDS - wheel_start)) s: $wheel, $(stat -c %s "$wheel") bytes"
  bash scripts/wheel_check.sh "$wheel" || status=1
else
  echo "wheel: 0 passed, 1 failed"
  status=1
fi
echo "wheel: $((SECONDS - wheel_start)) s in all"
exit $status
