#!/usr/bin/env python3
"""Capture pipelined TTGIR (what `make_ttgir` hands to `make_llir`) in MLIR
generic form, for the tests of the pipeline-protocol verifier
(`twill-opt --twill-verify-pipeline`, test/twill-verify-pipeline/).

    target/venv-triton-3.6.0/bin/python test/Inputs/pipelined/capture.py    # 3.6 fixtures
    target/venv-triton-3.9.0/bin/python test/Inputs/pipelined/capture.py    # 3.9 fixtures
    # --only NAME (repeatable), --out DIR

Writes NAME.mlir next to this script, NAME = KERNEL_CONFIG_VARIANT_tritonXY:
Triton's own pipeline (`stock`) of a CPU compile for cuda:90, or twill's
(`twill`, TWILL_SCOPE=all, the checkout's target/release/twill-opt).
Absolute paths of this checkout are made relative.

The `*_twill_racy_*` fixtures are frozen: they were captured with the twill
of commit d8effd09 (before the asynchronous-reader fix), whose schedules put
the tutorial-style matmul's cp.async copies ahead of the wgmma wait, into the
slot the in-flight wgmma of the previous iteration still read (issue "never
a wrong kernel"). Rebuild them by checking that commit out and running this
script with `--racy`.
"""

import argparse
import importlib.util
import os
import re
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]


def _module(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pointer(config):
    pm = _module(REPO / "third_party" / "triton" / "tests" / "kernels" / "pointer_matmul.py")
    return lambda cap: pm.ast_source("matmul", **pm.CONFIGS[config])


def _bench(module, config):
    def args(cap):
        m = _module(REPO / "bench" / "kernels" / f"{module}.py")
        if module == "matmul":
            cfg = dict(m.DEFAULT_CONFIG)
            opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages")}
            return m.make_ast_source(**cfg), opts
        kwargs, opts = m.split_config(m.CONFIGS[config][cap])
        return m.make_ast_source(**kwargs), opts

    return args


KERNELS = {
    "ptr_matmul_128x64x64": _pointer("128x64x64_w4_s4"),
    "ptr_matmul_128x256x64": _pointer("128x256x64_w8_s3"),
    "tma_gemm": _bench("matmul", None),
    "fa_fwd_causal": _bench("fa_fwd", "causal"),
    "fa_bwd_hd64": _bench("fa_bwd", "hd64"),
}
# (kernel, variant): the fixtures of the default run.
FIXTURES = [("ptr_matmul_128x64x64", "stock"), ("tma_gemm", "stock"), ("tma_gemm", "twill"),
            ("fa_fwd_causal", "stock"), ("fa_bwd_hd64", "stock"), ("fa_bwd_hd64", "twill")]
RACY = [("ptr_matmul_128x64x64", "twill"), ("ptr_matmul_128x256x64", "twill")]


def generic(ttgir_text):
    """The generic form of a TTGIR module (twill_triton's exporter)."""
    from triton._C.libtriton import ir, nvidia
    from twill_triton import hook

    ctx = ir.context()
    ir.load_dialects(ctx)
    nvidia.load_dialects(ctx)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in.ttgir"
        path.write_text(ttgir_text)
        mod = ir.parse_mlir_module(str(path), ctx)
        mod.context = ctx
        return hook._generic_text(ir, mod, tmp)


def capture(kernel, variant, cap=90):
    import triton
    import twill_triton
    from triton.backends.compiler import GPUTarget

    src, opts = KERNELS[kernel](cap)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TRITON_CACHE_DIR"] = cache
        if variant == "twill":
            twill_triton.enable(scope="all", strict=True)
        try:
            compiled = triton.compile(src, target=GPUTarget("cuda", cap, 32), options=opts)
        finally:
            twill_triton.disable()
    text = generic(compiled.asm["ttgir"])
    # Paths of this checkout and of the exporter's temporary files: relative.
    return re.sub(r"/tmp/tmp[A-Za-z0-9_]+/", "", text.replace(str(REPO) + "/", ""))


def main():
    import triton

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(HERE))
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--racy", action="store_true", help="the frozen racy fixtures (see the module doc)")
    a = ap.parse_args()
    os.environ.setdefault("TWILL_OPT", str(REPO / "target" / "release" / "twill-opt"))
    ver = "".join(triton.__version__.split(".")[:2])
    for kernel, variant in RACY if a.racy else FIXTURES:
        name = f"{kernel}_{'twill_racy' if a.racy else variant}_triton{ver}"
        if a.only and name not in a.only:
            continue
        Path(a.out, f"{name}.mlir").write_text(capture(kernel, variant))
        print("wrote", name)


if __name__ == "__main__":
    main()
