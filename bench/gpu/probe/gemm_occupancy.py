"""Probe on the H100: why the 128x128x64 TMA GEMM (third_party/triton/tests/kernels/matmul.py)
runs about 10% slower with 2 CTAs per SM than with 1 or 3 at M = N = K = 8k,
while 2 CTAs per SM is the fastest at 4k (H100 bench runs of 2026-11-23,
stock and twill alike; NOTES.md, "Configuration by the model", L2).

The occupancy is set through the stage count (shared memory per CTA: s2
64 KB -> 3 CTAs/SM, s3 96 KB -> 2, s4 128 KB -> 1), the L2 footprint of
the concurrently running tiles through GROUP_M (the number of tile rows a
group of consecutive programs walks down: larger groups share B panels
among more concurrent CTAs, smaller ones share A panels), and the tile
count through the size (6k and 7k between 4k and 8k, 12k above).

Hypotheses, and what each predicts:
* L2 capacity: 2 CTAs/SM at 8k thrash the L2 that 1 CTA/SM does not;
  then GROUP_M moves the 8k slowdown (it changes which panels are shared
  by concurrently running CTAs) and the slowdown grows with the size.
* wave quantization / tail: then it follows the tile count per wave
  (grid / (132 * c)) across sizes, not GROUP_M.

    python3 -m bench.gpu.probe.gemm_occupancy [--quick]

Every output is poisoned with NaN and checked against a float32 product;
times are do_bench medians (TFLOPS printed per row, and a table at the end).
"""
import argparse

import torch
import triton
from triton.testing import do_bench
from triton.tools.tensor_descriptor import TensorDescriptor

from third_party.triton.tests.kernels import matmul  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--quick", action="store_true", help="8k and 4k only, GROUP_M 8 and 32")
args = ap.parse_args()
SIZES = [4096, 8192] if args.quick else [4096, 6144, 7168, 8192, 12288]
GROUPS = [8, 32] if args.quick else [1, 4, 8, 16, 64]
STAGES = [2, 3, 4]
print("triton", triton.__version__, torch.cuda.get_device_name(), flush=True)
kernels = {}
for g in GROUPS:
    for ns in STAGES:
        cfg = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=g)
        kernels[(g, ns)] = triton.compile(matmul.make_ast_source(**cfg), options=dict(num_warps=4, num_stages=ns))
table = {}
for S in SIZES:
    a = torch.randn(S, S, device="cuda", dtype=torch.float16)
    b = torch.randn(S, S, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float().T
    scale = ref.abs().max().item()
    c = torch.empty(S, S, device="cuda", dtype=torch.float16)
    ad, bd, cd = (TensorDescriptor.from_tensor(t, blk) for t, blk in ((a, [128, 64]), (b, [128, 64]), (c, [128, 128])))
    grid = ((S // 128) ** 2, 1, 1)
    for (g, ns), kern in kernels.items():
        def fn(kern=kern, g=g):
            kern[grid](ad, bd, cd, S, S, S, 128, 128, 64, g)

        c.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        err = (c.float() - ref).abs().max().item() / scale
        ok = bool(torch.isfinite(c).all()) and err < 1e-2
        ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
        tf = 2.0 * S ** 3 / ms / 1e9
        table[(S, g, ns)] = tf if ok else float("nan")
        print(f"S={S:6d} GROUP_M={g:3d} s{ns} smem={kern.metadata.shared // 1024:4d} KB {ms:8.3f} ms "
              f"{tf:7.1f} TFLOPS ok={ok} err={err:.1e}", flush=True)
    del a, b, ref, c
    torch.cuda.empty_cache()

print("\nTFLOPS by size (rows) and GROUP_M / stages (columns; s2 = 3 CTAs/SM, s3 = 2, s4 = 1)")
cols = [(g, ns) for g in GROUPS for ns in STAGES]
print("size   " + " ".join(f"g{g:<2d}s{ns}" for g, ns in cols))
for S in SIZES:
    print(f"{S:6d} " + " ".join(f"{table.get((S, g, ns), float('nan')):6.0f}" for g, ns in cols))
