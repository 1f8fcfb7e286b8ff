"""Probe on the H100: the warp-specialized Gluon GEMM (bench/kernels/matmul_gluon.py): twill's plan and variants of it
against stock Triton's GEMM (third_party/triton/tests/kernels/matmul.py) over the bench grid
(128 x 128 x 64 tiles, num_warps 4 / 8, num_stages 2-5) and at 128 x 256 tiles,
and cuBLAS, at M = N = K = 4k and 8k (fp16 in, fp32 accumulate, fp16 out).

    python3 -m bench.gpu.probe.gemm_gluon_probe [--sizes 4096,8192] [--rounds 5]

Every output is poisoned with NaN before its first run and checked against a
float32 product on fresh random inputs per size (max error relative to the
largest |C| under 1e-2; NaN fails). A variant that fails to compile or launch
is reported and skipped. Times: do_bench medians; with --rounds, every
correct variant again in interleaved rounds (order rotated per round), and
the medians of the rounds.
"""
import argparse
import statistics
import time
from pathlib import Path

import torch
import triton
from triton.testing import do_bench
from triton.tools.tensor_descriptor import TensorDescriptor

from third_party.triton.tests.kernels import matmul  # noqa: E402
from bench.kernels import matmul_gluon  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--sizes", default="4096,8192")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--rep", type=int, default=300)
ap.add_argument("--quick", action="store_true", help="the 128 x 128 stock grid's w4 rows only")
ap.add_argument("--plan", action="store_true",
                help="twill's plan at each size (bench/gpu/plans/<triton>/gluon/gemm/plan.json, this Triton's) "
                     "against the stock rows that were best in the H100 bench runs of 2026-11-25")
args = ap.parse_args()

SMS = torch.cuda.get_device_properties(0).multi_processor_count
print(f"triton {triton.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}, {SMS} SMs",
      flush=True)

STOCK = [(dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8), dict(num_warps=nw, num_stages=ns))
         for nw in (4, 8) for ns in (2, 3, 4, 5)]
STOCK += [(dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8), dict(num_warps=8, num_stages=ns))
          for ns in (3, 4)]
# twill's plan (one consumer group, 6 slots, persistent) and its variants;
# two consumer groups at 128 x 256 tiles (3 slots: what fits).
TWO, _ = matmul_gluon.register_split(1, consumers=2)
GLUON = [dict(CONSUMERS=1, STAGES=s) for s in (4, 5, 6)] + [dict(CONSUMERS=1, STAGES=6, PERSISTENT=False)]
GLUON += [dict(CONSUMERS=2, STAGES=s, **TWO) for s in (5, 6)]
GLUON += [dict(BLOCK_N=256, STAGES=3, CONSUMERS=2, **TWO)]


def stock_name(cx, opts):
    return f"triton {cx['BLOCK_M']}x{cx['BLOCK_N']} w{opts['num_warps']} s{opts['num_stages']}"


def gluon_name(cfg):
    c = dict(matmul_gluon.DEFAULT_CONFIG, **cfg)
    return (f"gluon ws 128x{c['BLOCK_N']} c{c['CONSUMERS']} S{c['STAGES']}"
            f"{' persistent' if c['PERSISTENT'] else ''}")


if args.quick:
    STOCK = [(cx, o) for cx, o in STOCK if cx["BLOCK_N"] == 128 and o["num_warps"] == 4]
PLAN = None
if args.plan:
    import json

    from bench.gpu import run as bench_run

    PLAN = json.loads((bench_run.GLUON / "gemm" / "plan.json").read_text())
    STOCK = [(cx, o) for cx, o in STOCK if (cx["BLOCK_N"], o["num_warps"]) in ((256, 8), (128, 4))
             and (cx["BLOCK_N"] == 256 or o["num_stages"] in (2, 3))]
    GLUON = []
kernels = {}
for cx, opts in STOCK:
    t = time.time()
    try:
        kernels[stock_name(cx, opts)] = ("stock", triton.compile(matmul.make_ast_source(**cx), options=opts), cx)
        print(f"compiled {stock_name(cx, opts)} ({time.time() - t:.1f}s)", flush=True)
    except Exception as e:
        print(f"compile failed {stock_name(cx, opts)}: {str(e)[:200]}", flush=True)
for cfg in GLUON:
    t = time.time()
    try:
        kernels[gluon_name(cfg)] = ("gluon", matmul_gluon.compile_for(**cfg), cfg)
        print(f"compiled {gluon_name(cfg)} ({time.time() - t:.1f}s)", flush=True)
    except Exception as e:
        print(f"compile failed {gluon_name(cfg)}: {str(e)[:200]}", flush=True)

for S in [int(x) for x in args.sizes.split(",")]:
    if PLAN is not None:
        cfg = PLAN["candidates"][str(PLAN["model"][str(S)]["tile"])]["plan"]
        name = "twill plan: " + gluon_name(cfg)
        if name not in kernels:
            kernels[name] = ("gluon", matmul_gluon.compile_for(**cfg), cfg)
    M = N = K = S
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float().T
    scale = ref.abs().max().item()
    flops = 2.0 * M * N * K
    fns = {}
    for name, (kind, kern, cx) in kernels.items():
        c = torch.empty(M, N, device="cuda", dtype=torch.float16)
        if kind == "stock":
            BM, BN, BK = cx["BLOCK_M"], cx["BLOCK_N"], cx["BLOCK_K"]
            ad, bd = TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(b, [BN, BK])
            cd = TensorDescriptor.from_tensor(c, [BM, BN])
            grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN), 1, 1)

            def fn(kern=kern, grid=grid, ad=ad, bd=bd, cd=cd, cx=cx):
                kern[grid](ad, bd, cd, M, N, K, cx["BLOCK_M"], cx["BLOCK_N"], cx["BLOCK_K"], cx["GROUP_M"])
        else:
            fn = matmul_gluon.launcher(kern, a, b, c, SMS, **cx)
        try:
            c.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            ok = bool(torch.isfinite(c).all())
            err = (c.float() - ref).abs().max().item() / scale if ok else float("nan")
            ok = ok and err < 1e-2
            ms = do_bench(fn, rep=args.rep)
            print(f"{S:6d} {name:34s} {ms:.4f} ms {flops / ms * 1e-9:7.1f} TFLOPS correct={ok} err={err:.2e}",
                  flush=True)
            if ok:
                fns[name] = fn
        except Exception as e:
            print(f"{S:6d} {name:34s} failed: {str(e)[:200]}", flush=True)
    f = lambda: a @ b.T  # noqa: E731
    ms = do_bench(f, rep=args.rep)
    print(f"{S:6d} {'cublas (torch)':34s} {ms:.4f} ms {flops / ms * 1e-9:7.1f} TFLOPS", flush=True)
    fns["cublas (torch)"] = f
    if args.rounds:
        names = list(fns)
        times = {n: [] for n in names}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                times[n].append(do_bench(fns[n], rep=args.rep))
        print(f"-- {S}: medians of {args.rounds} interleaved rounds", flush=True)
        for n in sorted(names, key=lambda n: statistics.median(times[n])):
            m = statistics.median(times[n])
            print(f"{S:6d} {n:34s} {m:.4f} ms {flops / m * 1e-9:7.1f} TFLOPS "
                  f"[{', '.join(f'{x:.4f}' for x in times[n])}]", flush=True)
    del a, b, ref
    torch.cuda.empty_cache()
