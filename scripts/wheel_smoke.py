"""Compiles one kernel for cuda:90 with the installed twill_triton wheel and
checks that twill scheduled it with the wheel's own twill-opt.

    TRITON_TWILL=1 TWILL_STRICT=1 TWILL_SCOPE=all python wheel_smoke.py KERNEL_FILE [CONFIG]

KERNEL_FILE is a kernel fixture with `ast_source(kernel, **config)` and
`CONFIGS` (third_party/triton/tests/kernels/pointer_matmul.py); CONFIG names
one of its CONFIGS (default: the first). twill is enabled by the wheel's .pth
at interpreter startup (TRITON_TWILL=1), as for a user. Run by
scripts/wheel_check.sh where MLIR, LLVM and Z3 are hidden from the loader and
from outside the checkout, so only the bundled binary can have run. Prints
one line per check (`ok: ...` or `FAIL: ...`) and exits non-zero on a failure.
"""

import importlib.util
import os
import shutil
import sys
from pathlib import Path


def _load(path):
    spec = importlib.util.spec_from_file_location("twill_wheel_smoke_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check(ok, what):
    print(f"{'ok' if ok else 'FAIL'}: {what}", flush=True)
    return bool(ok)


def _locates_bundled(twill_triton):
    """The hook's search order (docs/wheel.md) reaches the bundled binary:
    it exists inside the installed package, and nothing comes before it."""
    from twill_triton import _binary

    bundled = _binary.bundled_twill_opt()
    package = Path(twill_triton.__file__).resolve().parent
    results = [
        _check(bundled and Path(bundled).parent == package / "bin", f"bundled twill-opt {bundled} in {package}/bin"),
        _check("TWILL_OPT" not in os.environ, "TWILL_OPT is not set"),
        _check(shutil.which("twill-opt") is None, "no twill-opt on PATH"),
    ]
    return all(results)


def _schedules(twill_triton, kernel_file, config):
    import triton
    from triton.backends.compiler import GPUTarget

    fixture = _load(kernel_file)
    name = config or next(iter(fixture.CONFIGS))
    src, options = fixture.ast_source("matmul", **fixture.CONFIGS[name])
    try:
        triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
    except Exception as e:  # TwillError in strict mode, or Triton's own
        return _check(False, f"compile {Path(kernel_file).name} {name} for cuda:90: {type(e).__name__}: {e}")
    decisions = twill_triton.decisions()
    for d in decisions:
        print(f"decision: {d.kernel} cuda:{d.capability} scheduled={d.scheduled} {d.reason}".rstrip())
        for remark in d.remarks:
            print(f"  remark: {remark}")
    return _check(decisions and all(d.scheduled and d.capability == 90 for d in decisions),
                  f"twill scheduled {Path(kernel_file).name} {name} for cuda:90 (TWILL_STRICT=1)")


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    import twill_triton

    ok = _check(twill_triton.is_enabled(), "TRITON_TWILL=1 enabled twill at startup (the wheel's .pth)")
    ok = _locates_bundled(twill_triton) and ok
    ok = _schedules(twill_triton, argv[1], argv[2] if len(argv) == 3 else None) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
