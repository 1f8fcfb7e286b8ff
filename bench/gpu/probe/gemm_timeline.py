"""Probe on the H100: a per-CTA timeline of the 128x128x64 TMA GEMM
(third_party/triton/tests/kernels/matmul.py) at 1, 2 and 3 CTAs per SM, to find out why 2 CTAs
per SM run 5-30% slower than 1 or 3 from 6k up while they are the fastest at
4k (gemm_occupancy.py; NOTES.md, "Configuration by the model", L2).

The kernel below is matmul_tma_kernel with five numbers written per program:
the SM it ran on (%smid), %globaltimer (ns) and %clock64 (SM cycles) at its
start and at its end. The occupancy is set through the stage count, as in
gemm_occupancy.py (shared memory: s2 64 KB -> 3 CTAs/SM, s3 96 KB -> 2,
s4 128 KB -> 1).

What each explanation predicts:
* contention inside the SM (the two CTAs' wgmmas, TMA or barriers
  interfere): every CTA of the 2-CTA run is slower, uniformly, over the
  whole run;
* residency (fewer than 2 CTAs on some SMs, or SMs idle at the end): a
  mean concurrency below 2 or a long tail;
* memory-system drift (co-running CTAs that share A or B panels drift
  apart in K, so the L2 stops serving them once and for all): CTAs
  started later in the run are slower than the first wave, and the
  slowdown grows with K.

    python3 -m bench.gpu.probe.gemm_timeline [--out DIR]

Prints a summary per size and stage count; with --out also writes the raw
timelines (npz: smid, t0, t1, c0, c1 per program, in program order).
"""
import argparse
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl
from triton.testing import do_bench
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def _globaltimer(x):
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [x], dtype=tl.int64, is_pure=False,
                                     pack=1)


@triton.jit
def _clock64(x):
    return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [x], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _smid(x):
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def matmul_timed_kernel(a_desc, b_desc, c_desc, prof, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    t0 = _globaltimer(pid)
    c0 = _clock64(pid)
    sm = _smid(pid)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_per_group = GROUP_M * tiles_n
    group = pid // tiles_per_group
    first_m = group * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % tiles_per_group) % group_rows)
    pid_n = (pid % tiles_per_group) // group_rows
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        off_k = k * BLOCK_K
        a = a_desc.load([off_m, off_k])
        b = b_desc.load([off_n, off_k])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([off_m, off_n], acc.to(tl.float16))
    t1 = _globaltimer(pid)
    c1 = _clock64(pid)
    base = prof + pid * 5
    tl.store(base, sm.to(tl.int64))
    tl.store(base + 1, t0)
    tl.store(base + 2, t1)
    tl.store(base + 3, c0)
    tl.store(base + 4, c1)


def summarize(S, ns, prof, ms_clean, ms_timed):
    sm, t0, t1, c0, c1 = (prof[:, i] for i in range(5))
    base = t0.min()
    t0, t1 = t0 - base, t1 - base
    cyc = (c1 - c0).astype(np.float64)
    span = t1.max() - t0.min()
    n = len(sm)
    # Concurrency: CTAs resident per SM, time-averaged over each SM's busy span.
    conc, tail = [], []
    for s in np.unique(sm):
        m = sm == s
        busy = (t1[m] - t0[m]).sum()
        conc.append(busy / max(1, t1[m].max() - t0[m].min()))
        tail.append(span - t1[m].max())
    order = np.argsort(t0)
    q = max(1, n // 8)
    first, last = cyc[order[:q]].mean(), cyc[order[-q:]].mean()
    print(f"S={S:6d} s{ns}: {ms_clean:.3f} ms clean, {ms_timed:.3f} ms timed; span {span / 1e3:.1f} us; "
          f"SMs {len(np.unique(sm))}, CTAs/SM {np.bincount(sm).max()}-{np.bincount(sm)[np.bincount(sm) > 0].min()}; "
          f"mean resident {np.mean(conc):.2f} (min {np.min(conc):.2f}); idle tail mean {np.mean(tail) / 1e3:.1f} us "
          f"max {np.max(tail) / 1e3:.1f} us", flush=True)
    print(f"    CTA cycles: mean {cyc.mean():.0f} p10 {np.percentile(cyc, 10):.0f} p50 {np.median(cyc):.0f} "
          f"p90 {np.percentile(cyc, 90):.0f}; first eighth started {first:.0f}, last eighth {last:.0f} "
          f"({last / first:.3f}x); per K step {cyc.mean() / (S / 64):.0f} cycles x resident "
          f"{np.mean(conc):.2f} = {cyc.mean() / (S / 64) / np.mean(conc):.0f} cycles per K step per SM",
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--sizes", default="4096,8192")
    args = ap.parse_args()
    print("triton", triton.__version__, torch.cuda.get_device_name(), flush=True)
    raw = {}
    for S in [int(s) for s in args.sizes.split(",")]:
        a = torch.randn(S, S, device="cuda", dtype=torch.float16)
        b = torch.randn(S, S, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float().T
        scale = ref.abs().max().item()
        c = torch.empty(S, S, device="cuda", dtype=torch.float16)
        ad, bd, cd = (TensorDescriptor.from_tensor(t, blk) for t, blk in ((a, [128, 64]), (b, [128, 64]),
                                                                          (c, [128, 128])))
        grid = ((S // 128) ** 2, )
        prof = torch.zeros(grid[0] * 5, device="cuda", dtype=torch.int64)
        from third_party.triton.tests.kernels import matmul  # noqa: E402
        for ns in (2, 3, 4):
            def timed():
                matmul_timed_kernel[grid](ad, bd, cd, prof, S, S, S, 128, 128, 64, 8, num_warps=4, num_stages=ns)

            def clean():
                matmul.matmul_tma_kernel[grid](ad, bd, cd, S, S, S, 128, 128, 64, 8, num_warps=4, num_stages=ns)

            c.fill_(float("nan"))
            timed()
            torch.cuda.synchronize()
            err = (c.float() - ref).abs().max().item() / scale
            ok = bool(torch.isfinite(c).all()) and err < 1e-2
            ms_timed = do_bench(timed, warmup=25, rep=100, return_mode="median")
            ms_clean = do_bench(clean, warmup=25, rep=100, return_mode="median")
            timed()
            torch.cuda.synchronize()
            p = prof.view(-1, 5).cpu().numpy()
            raw[f"S{S}_s{ns}"] = p
            if not ok:
                print(f"S={S} s{ns}: WRONG RESULT err={err:.2e}", flush=True)
            summarize(S, ns, p, ms_clean, ms_timed)
        del a, b, ref, c
        torch.cuda.empty_cache()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(args.out / "gemm_timeline.npz", **raw)


if __name__ == "__main__":
    main()
