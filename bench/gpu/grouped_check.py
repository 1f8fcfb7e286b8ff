#!/usr/bin/env python3
"""GPU correctness and paired timing of the grouped GEMM fixture
(third_party/triton/tests/kernels/grouped_matmul.py), stock Triton against
twill (scope=all, live: the installed twill_triton and its twill-opt):

    # on the GPU machine, with the twill_triton wheel installed
    source bench/gpu/install_wheel.sh
    PYTHONPATH=. python3 -m bench.gpu.grouped_check [--repeats 5]

Each case is a list of groups (M, N, K), every size a multiple of 16 (the
fixture's contract), among them groups with no tile (M = 0), with no K step
(K = 0: C is zero) and one K step. Variants, each in a fresh Triton cache
directory: "triton" (stock) and "twill". Outputs are poisoned (NaN) before
every launch and checked against a float32 torch reference: max |C - ref| /
max(|ref|, 1) <= TOL per group; NaN never passes. A row launches its kernel
--repeats times and reports the worst. Per case: the verdict of each
variant, what twill decided (kept its schedule, or Triton's with the
reason: the hook's Decision), and the median time of each variant over
alternating rounds with the ratio stock / twill (paired: the same
arguments, the same process, interleaved).
"""

import argparse
import os
import statistics
import sys
import tempfile

import torch
import triton
from triton.testing import do_bench

import twill_triton
from third_party.triton.tests.kernels import grouped_matmul as gm

TOL = 2e-2
CASES = {
    "uniform 8 x 1024^3": [(1024, 1024, 1024)] * 8,
    "moe 16 groups N=4096 K=1024": [(m, 4096, 1024) for m in (128, 256, 384, 512, 640, 768, 896, 1024) * 2],
    "ragged with empty groups": [(256, 384, 128), (0, 128, 64), (128, 128, 16), (1024, 512, 1024), (16, 16, 16),
                                 (512, 256, 0), (48, 80, 32), (2048, 2048, 2048)],
    "one K step": [(512, 512, 32)] * 4,
}


def make(groups, device="cuda"):
    torch.manual_seed(0)
    mats = []
    for m, n, k in groups:
        a = torch.randn(m, k, device=device, dtype=torch.float16)
        b = torch.randn(k, n, device=device, dtype=torch.float16)
        c = torch.empty(m, n, device=device, dtype=torch.float16)
        mats.append((a, b, c))
    addrs = [torch.tensor([x[i].data_ptr() for x in mats], device=device, dtype=torch.int64) for i in range(3)]
    sizes = torch.tensor([v for g in groups for v in g], device=device, dtype=torch.int32)
    lds = torch.tensor([v for m, n, k in groups for v in (k, n, n)], device=device, dtype=torch.int32)
    return mats, addrs, sizes, lds


def launch(kernel, mats, addrs, sizes, lds, cfg):
    const = {k: cfg[k] for k in ("NUM_PROGRAMS", "BLOCK_M", "BLOCK_N", "BLOCK_K")}
    kernel[(cfg["NUM_PROGRAMS"], )](addrs[0], addrs[1], addrs[2], sizes, lds, len(mats), **const,
                                    num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])


def check(mats):
    worst = 0.0
    for a, b, c in mats:
        if c.numel() == 0:
            continue
        ref = a.float() @ b.float()
        err = ((c.float() - ref).abs().max() / ref.abs().max().clamp(min=1.0)).item()
        worst = max(worst, err if err == err else float("inf"))
    return worst


def run_variant(name, groups, cfg, repeats):
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"grouped-{name}-")
    # A JIT function of its own: the JIT keeps compiled kernels in memory,
    # so the other variant's would be launched otherwise.
    kernel = triton.jit(gm.grouped_matmul_kernel.fn)
    if name == "twill":
        twill_triton.enable(scope="all")
    try:
        mats, addrs, sizes, lds = make(groups)
        worst = 0.0
        for _ in range(repeats):
            for _, _, c in mats:
                c.fill_(float("nan"))
            launch(kernel, mats, addrs, sizes, lds, cfg)
            torch.cuda.synchronize()
            worst = max(worst, check(mats))
        decision = twill_triton.decisions()[-1] if name == "twill" and twill_triton.decisions() else None
        timer = lambda: launch(kernel, mats, addrs, sizes, lds, cfg)  # noqa: E731
    finally:
        if name == "twill":
            twill_triton.disable()
    return worst, decision, timer


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    cfg = next(iter(gm.CONFIGS.values()))
    print(f"device {torch.cuda.get_device_name()}, triton {triton.__version__}, config {cfg}")
    print("| case | stock | twill | twill's decision | stock ms | twill ms | stock / twill |")
    print("|---|---|---|---|---|---|---|")
    bad = 0
    for case, groups in CASES.items():
        out = {v: run_variant(v, groups, cfg, args.repeats) for v in ("triton", "twill")}
        verdict = {v: "correct" if out[v][0] <= TOL else f"WRONG ({out[v][0]:.3g})" for v in out}
        bad += sum(1 for v in verdict.values() if v != "correct")
        d = out["twill"][1]
        decided = "none" if d is None else ("kept" if d.scheduled else f"Triton's: {(d.reason or '')[:80]}")
        times = {v: [] for v in out}
        for _ in range(args.rounds):
            for v in out:
                times[v].append(do_bench(out[v][2], warmup=25, rep=100))
        ms = {v: statistics.median(t) for v, t in times.items()}
        print(f"| {case} | {verdict['triton']} | {verdict['twill']} | {decided} | {ms['triton']:.4f} | "
              f"{ms['twill']:.4f} | {ms['triton'] / ms['twill']:.3f} |", flush=True)
    print(f"\n{bad} wrong")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
