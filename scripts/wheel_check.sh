#!/usr/bin/env bash
# Checks a wheel built by scripts/wheel.sh as a user without Rust, MLIR or Z3
# would meet it (docs/wheel.md):
#
#   bash scripts/wheel_check.sh WHEEL
#
# Installs WHEEL into a fresh virtual environment (target/wheel-venv) with
# triton==3.6.0 (from target/pip-wheels, downloaded there once), then, in a
# mount namespace (unshare -rm) where the MLIR, LLVM and Z3 shared libraries
# are deleted from the loader's directories (an overlay over the system
# library directory, a tmpfs over /usr/lib/llvm-22) and ~/.cargo, ~/.rustup
# are empty, checks that
#   * the wheel is under 40 MB,
#   * the loader cannot load libMLIR, libLLVM or libz3 (they are hidden),
#   * the bundled twill-opt resolves every library it needs inside the wheel,
#   * it runs, and
#   * with TRITON_TWILL=1 TWILL_STRICT=1 twill schedules a pointer matmul
#     fixture for cuda:90 with it (scripts/wheel_smoke.py).
# Prints `wheel: N passed, N failed`; exits non-zero on a failure.
set -uo pipefail
wheel=$(realpath "${1:?usage: wheel_check.sh WHEEL}")
cd "$(dirname "$0")/.."

repo=$PWD
kernel="$repo/third_party/triton/tests/kernels/pointer_matmul.py"
venv="$repo/target/wheel-venv"
wheels="$repo/target/pip-wheels"
log=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$log" "$work"' EXIT

install() {
  if ! ls "$wheels"/triton-3.6.0-*.whl >/dev/null 2>&1; then
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$wheels" triton==3.6.0 || return 1
  fi
  rm -rf "$venv"
  python3 -m venv "$venv" \
    && "$venv/bin/python" -m pip install -q --no-index --find-links "$wheels" triton==3.6.0 \
    && "$venv/bin/python" -m pip install -q --no-deps "$wheel"
}

# Small enough to travel with the tree to a GPU machine (issue 28: well
# under 40 MB).
size=$(stat -c %s "$wheel")
if [ "$size" -lt 40000000 ]; then
  echo "ok: $(basename "$wheel") is $size bytes (< 40 MB)" | tee "$log"
else
  echo "FAIL: $(basename "$wheel") is $size bytes (>= 40 MB)" | tee "$log"
fi

if install; then
  echo "ok: fresh venv with triton 3.6.0 and $(basename "$wheel")" | tee -a "$log"
else
  echo "FAIL: could not install triton 3.6.0 and $(basename "$wheel") into $venv" | tee -a "$log"
fi

# What runs inside the namespace: hide the libraries, then check.
hidden() {
  set -u
  local sys=/usr/lib/x86_64-linux-gnu
  mount -t tmpfs tmpfs "$work" && mkdir "$work/upper" "$work/scratch" \
    && mount -t overlay overlay -o "lowerdir=$sys,upperdir=$work/upper,workdir=$work/scratch" "$sys" \
    && rm -f "$sys"/libz3.so* "$sys"/libLLVM* "$sys"/libMLIR* "$sys"/libmlir* \
    && mount -t tmpfs tmpfs /usr/lib/llvm-22 \
    || { echo "FAIL: could not hide the MLIR, LLVM and Z3 libraries"; return; }
  for d in "$HOME/.cargo" "$HOME/.rustup"; do
    [ -d "$d" ] && mount -t tmpfs tmpfs "$d"
  done
  local py="$venv/bin/python"
  local bin
  bin=$("$py" -c 'from twill_triton import _binary; print(_binary.BIN_DIR)')
  for so in libz3.so.4 libMLIR.so.22.1 libLLVM.so.22.1; do
    if "$py" -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$so" 2>/dev/null; then
      echo "FAIL: the loader still finds $so"
    else
      echo "ok: the loader cannot load $so"
    fi
  done
  echo "ldd $bin/twill-opt:"
  ldd "$bin/twill-opt" | sed 's/^/  /'
  if ldd "$bin/twill-opt" | grep -q "not found"; then
    echo "FAIL: the bundled twill-opt misses a library"
  elif ldd "$bin/twill-opt" | grep -q "libz3.so.4 => $bin/libz3.so.4"; then
    echo "ok: the bundled twill-opt loads libz3 from $bin"
  else
    echo "FAIL: the bundled twill-opt does not load the vendored libz3"
  fi
  if "$bin/twill-opt" --help >/dev/null; then
    echo "ok: the bundled twill-opt runs"
  else
    echo "FAIL: the bundled twill-opt does not run"
  fi
  # From outside the checkout, with a Triton cache of its own and a PATH
  # without twill-opt; a configuration whose schedule twill keeps under its
  # defaults (at 128x64x64 s4 a tie keeps Triton's deeper schedule,
  # ties=deeper, and strict mode would refuse it).
  (cd "$work" && env -u TWILL_OPT PATH=/usr/bin:/bin TRITON_CACHE_DIR="$work/triton-cache" \
    TRITON_TWILL=1 TWILL_STRICT=1 TWILL_SCOPE=all "$py" "$repo/scripts/wheel_smoke.py" "$kernel" 128x128x32_w4_s2) \
    || echo "FAIL: scripts/wheel_smoke.py"
}

if [ -x "$venv/bin/python" ]; then
  export -f hidden
  export work venv repo kernel
  unshare -rm bash -c hidden 2>&1 | tee -a "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || echo "FAIL: unshare -rm (a mount namespace) is not available" | tee -a "$log"
fi

passed=$(grep -c "^ok:" "$log")
failed=$(grep -c "^FAIL:" "$log")
echo "wheel: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
