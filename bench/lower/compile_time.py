"""Compile time twill adds per kernel (cold caches), and the lowering's
share, on the CPU for cuda:90:

    PYTHONPATH=third_party/triton:. python bench/lower/compile_time.py

Per kernel: the median of 3 cold compiles (fresh Triton and twill caches each) of
stock Triton and of Triton with twill (TWILL_LOWER on), and twill's own
seconds by step from the hook's Decision (lowering call, attribute-route
call, final verification)."""

import os
import statistics
import sys
import tempfile
import time

import triton
from triton.backends.compiler import GPUTarget

import twill_triton
from third_party.triton.tests.kernels import fa_fwd, matmul

TARGET = GPUTarget("cuda", 90, 32)


def kernels():
    gemm = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, WARP_SPECIALIZE=True)
    kw, opts = fa_fwd.split_config(fa_fwd.CONFIGS["default"][90])
    sub, sub_opts = fa_fwd.split_config(dict(fa_fwd.CONFIGS["default"][90], SUBTILE=True, num_warps=4))
    causal, causal_opts = fa_fwd.split_config(dict(fa_fwd.CONFIGS["causal_subtile"][90], num_warps=4))
    # (name, source, options, stock's options where stock Triton does not
    # compile the kernel at twill's: the causal sub-tiled forward at 4 warps
    # fails in Triton 3.6's Hopper warp specialization, so stock is timed at
    # its 8 warps).
    return [("GEMM 128x256 w8 ws", lambda: matmul.make_ast_source(**gemm), dict(num_warps=8, num_stages=3), None),
            ("FA forward hd128 w8", lambda: fa_fwd.make_ast_source(**kw), opts, None),
            ("FA forward hd128 sub-tiled w4", lambda: fa_fwd.make_ast_source(**sub), sub_opts, None),
            ("FA forward hd128 causal sub-tiled w4", lambda: fa_fwd.make_ast_source(**causal), causal_opts,
             dict(causal_opts, num_warps=8))]


def cold(make, opts, twill):
    # Fresh caches: Triton's, and twill's schedule and verifier cache.
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="ct-")
    os.environ["TWILL_CACHE_DIR"] = tempfile.mkdtemp(prefix="ct-twill-")
    if twill:
        twill_triton.enable(lower=True, strict=True)
    t0 = time.monotonic()
    try:
        triton.compile(make(), target=TARGET, options=opts)
    finally:
        if twill:
            twill_triton.disable()
    return time.monotonic() - t0, (twill_triton.decisions()[-1] if twill else None)


def main(rounds=3):
    print(f"triton {triton.__version__}, {os.cpu_count()} CPUs", flush=True)
    for name, make, opts, stock_opts in kernels():
        stock = statistics.median(cold(make, stock_opts or opts, False)[0] for _ in range(rounds))
        at = f" (at {stock_opts})" if stock_opts else ""
        runs = [cold(make, opts, True) for _ in range(rounds)]
        total = statistics.median(t for t, _ in runs)
        d = runs[-1][1]
        print(f"{name}: stock{at} {stock:.2f} s, with twill {total:.2f} s (+{total - stock:.2f} s); twill's steps: "
              f"lowering {d.lowering_seconds:.2f} s, attribute route {d.schedule_seconds:.2f} s, "
              f"verification {d.verify_seconds:.2f} s; lowered {d.lowered()}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
