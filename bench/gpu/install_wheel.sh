# Sourced by the GPU scripts: installs the twill_triton wheel carried in
# target/wheels (bash scripts/wheel.sh builds it; carry target/wheels) into
# the GPU machine's Python, so that `import twill_triton` is the wheel's and
# its bundled twill-opt schedules live (the machine has no Rust, MLIR or Z3).
# Nothing of this checkout is put on PYTHONPATH.
whl=$(ls target/wheels/twill_triton-*.whl 2>/dev/null | tail -1)
if [ -z "$whl" ]; then
  echo "no wheel in target/wheels: run bash scripts/wheel.sh and carry target/wheels" >&2
  exit 2
fi
python3 -m pip install -q --no-deps --force-reinstall --break-system-packages "$whl" 2>/dev/null \
  || python3 -m pip install -q --no-deps --force-reinstall "$whl" || exit 2
# The wheel's twill-opt, named for the scripts that ask for one (the hook
# finds it by itself).
TWILL_OPT=$(python3 -c 'from twill_triton import _binary; print(_binary.bundled_twill_opt() or "")') || exit 2
[ -n "$TWILL_OPT" ] || { echo "the installed wheel has no twill-opt" >&2; exit 2; }
export TWILL_OPT
echo "twill_triton $(python3 -c 'import twill_triton; print(twill_triton.__file__)'), twill-opt $TWILL_OPT"
