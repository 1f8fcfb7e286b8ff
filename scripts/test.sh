#!/usr/bin/env bash
# Runs every test of the project.
#
# The product's suites run in a copy of this tree without bench/ (the lab),
# target/product-tree, so that a product test that reaches into the lab
# fails: formatting, lints, unit, property, CLI and case-study tests (cargo),
# the MLIR tests of the passes and both hosts (lit, on a release build), and
# the Python package's tests (pytest) for every Triton version we support.
# The copy builds into this tree's target/ (its path is stable, so a rerun
# rebuilds only what changed) and uses the virtual environments there.
#
# The lab's own checks run in this tree: the solver benchmark crate
# (bench/solver: fmt, clippy; run the benchmark itself with
# `cd bench/solver && cargo bench`) and the lab's tests (bench/tests) for
# every Triton version.
#
# Prints one `N passed, N failed` summary line per runner (the lab's are
# named `... bench`) and exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

status=0
export PROPTEST_CASES="${PROPTEST_CASES:-500}"
# Property tests draw from a fixed seed here so that a CI verdict can be
# reproduced; explore new cases with `cargo test` directly (random seed) or
# by setting PROPTEST_RNG_SEED. Failures found that way go into
# tests/*.proptest-regressions and into a named test.
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261122}"

# Prints "NAME: 0 passed, 1 failed" and marks the run failed.
failed_step() {
  echo "$1: 0 passed, 1 failed"
  status=1
}

# The product tree: the files git tracks or would track (untracked ones not
# ignored), bench/ left out. Its target/ (lit's outputs) is kept.
product_tree() {
  local tree=$root/target/product-tree
  mkdir -p "$tree"
  find "$tree" -mindepth 1 -maxdepth 1 ! -name target -exec rm -rf {} +
  # --ignore-failed-read: files deleted in the work tree but still tracked.
  git ls-files -z --cached --others --exclude-standard -- ':(exclude)bench' \
    | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$tree" || return 1
  [ ! -e "$tree/bench" ] || return 1
  echo "$tree"
}

# cargo test's counts: "cargo: N passed, N failed".
cargo_tests() {
  local log rc passed failed
  log=$(mktemp)
  cargo test --locked --lib --bins --tests 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  passed=$(awk '/^test result:/ { for (i = 1; i < NF; i++) if ($(i + 1) ~ /^passed/) s += $i } END { print s + 0 }' "$log")
  failed=$(awk '/^test result:/ { for (i = 1; i < NF; i++) if ($(i + 1) ~ /^failed/) s += $i } END { print s + 0 }' "$log")
  echo "cargo: ${passed:-0} passed, ${failed:-0} failed"
  if [ "$rc" -ne 0 ] || [ "${passed:-0}" -eq 0 ]; then status=1; fi
  rm -f "$log"
}

# MLIR tests: twill-opt, the mlir-opt-22 plugin host, export + solve.
lit_tests() {
  local lit_bin log rc passed failed
  lit_bin=$(command -v lit-22 || command -v lit || true)
  if ! cargo build --release --locked --bins --lib; then
    failed_step lit
    return
  fi
  if [ -z "$lit_bin" ]; then
    echo "lit: not found (install llvm-22-tools)"
    failed_step lit
    return
  fi
  log=$(mktemp)
  TWILL_BIN_DIR="$CARGO_TARGET_DIR/release" "$lit_bin" -v test/ 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  passed=$(awk '/^ *Passed *:/ { s += $2 } END { print s + 0 }' "$log")
  failed=$(awk '/^ *(Failed|Unresolved|Timed Out) *:/ { s += $NF ~ /%/ ? $(NF-1) : $NF } END { print s + 0 }' "$log")
  echo "lit: ${passed:-0} passed, ${failed:-0} failed"
  if [ "$rc" -ne 0 ] || [ "${passed:-0}" -eq 0 ]; then status=1; fi
  rm -f "$log"
}

# The virtual environment of Triton $1 under this tree's target/, created
# from PyPI when missing; prints its python.
triton_venv() {
  local venv=$root/target/venv-triton-$1
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import triton, pytest" 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv" && "$venv/bin/pip" install -q "triton==$1" pytest ./third_party/triton >&2 \
      || return 1
  fi
  echo "$venv/bin/python"
}

# pytest of directory $2 with python $1 (twill_triton installed from the
# current tree first, since its .pth imports it at startup), summarized as
# "$3: N passed, N failed".
pytest_suite() {
  local py=$1 dir=$2 name=$3 log rc summary passed failed
  "$py" -m pip install -q --no-deps --force-reinstall ./third_party/triton || { failed_step "$name"; return; }
  log=$(mktemp)
  TWILL_OPT="$root/target/release/twill-opt" "$py" -m pytest -q -p no:cacheprovider "$dir" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  summary=$(grep -E "[0-9]+ (passed|failed|errors?)( |,|$)" "$log" | tail -1)
  passed=$(echo "$summary" | grep -oE "[0-9]+ passed" | awk '{ s += $1 } END { print s + 0 }')
  failed=$(echo "$summary" | grep -oE "[0-9]+ (failed|errors?)" | awk '{ s += $1 } END { print s + 0 }')
  # Triton 3.9's bindings print a leak report at exit without a final
  # newline: start the summary on a line of its own.
  echo
  echo "$name: ${passed:-0} passed, ${failed:-0} failed"
  if [ "$rc" -ne 0 ] || [ "${passed:-0}" -eq 0 ]; then status=1; fi
  rm -f "$log"
}

versions=${TWILL_TRITON_VERSIONS:-3.6.0 3.9.0}

# The product, without bench/.
if ! tree=$(product_tree); then
  echo "test: could not copy the tree to target/product-tree" >&2
  for step in fmt clippy cargo lit; do failed_step "$step"; done
  for ver in $versions; do failed_step "pytest (triton $ver)"; done
else
  (
    cd "$tree" || exit 1
    export CARGO_TARGET_DIR=$root/target
    cargo fmt --check || failed_step fmt
    cargo clippy --all-targets --locked -- -D warnings || failed_step clippy
    cargo_tests
    lit_tests
    # Triton integration (third_party/triton): compile tests on the CPU.
    for ver in $versions; do
      if py=$(triton_venv "$ver"); then
        pytest_suite "$py" third_party/triton/tests "pytest (triton $ver)"
      else
        failed_step "pytest (triton $ver)"
      fi
    done
    exit $status
  ) || status=1
fi

# The lab, in this tree.
(cd bench/solver && cargo fmt --check) || failed_step "fmt bench"
(cd bench/solver && cargo clippy --all-targets --locked -- -D warnings) || failed_step "clippy bench"
for ver in $versions; do
  if py=$(triton_venv "$ver"); then
    pytest_suite "$py" bench/tests "pytest bench (triton $ver)"
  else
    failed_step "pytest bench (triton $ver)"
  fi
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
