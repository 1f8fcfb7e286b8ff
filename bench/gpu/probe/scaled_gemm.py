"""Probe on the H100: a second loop that mixes descriptor (TMA) and pointer
(cp.async) loads, to test the rotation rule that bwd_loads.py's hybrids
suggest.

bwd_loads.py found (H100, 2026-11-24) that only the hd64 backward's dK/dV
loop runs faster with every load last in the body and one stage deeper
(Triton's rotation) than with twill's loads first; it is the only loop of the
benchmark that streams tiles by TMA and vectors by cp.async. Candidate rule:
a loop that mixes the two kinds wants every load last. This probe times
both rotations on another such loop: a block-scaled GEMM (the pattern of
blockwise-quantized FP8 GEMMs, here in fp16), C = sum over K blocks k of
(A_k @ B_k^T) * sa_k[:, None] * sb_k[None, :], with A and B tiles through
descriptors and the per-row scales sa_k (BLOCK_M floats) and per-column
scales sb_k (BLOCK_N floats) through plain `tl.load`s.

    python -m bench.gpu.probe.scaled_gemm --record       # here (twill-opt): schedules into the cache (probe/replay.py)
    python3 -m bench.gpu.probe.scaled_gemm [--out DIR]   # on the GPU machine (carry bench/gpu/plans): replay, check, time
"""
import argparse
import os
from pathlib import Path

import triton
import triton.language as tl

REPO = Path(__file__).resolve().parents[3]

from bench.gpu.probe import bwd_loads  # noqa: E402
from bench.gpu import run  # noqa: E402
from bench.gpu.probe import replay  # noqa: E402

REPLAY = replay.root("scaled-gemm-loads")
CX = dict(BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, GROUP_M=8)
OPTS = dict(num_warps=4, num_stages=2)
# Besides the two rotations: the loop solved for two CTAs per SM (`ctas=2`:
# within half the SM's shared memory, loads as deep as an iteration takes
# with the SM shared; the default load placement, here every load last one
# stage deeper). At `ctas=3` the register model finds no schedule within
# 168 registers (2026-11-24: the register model keeps the wgmma result, the
# scale product and the accumulator live at once, 192; ptxas fuses the
# multiply and fits Triton's s3 in 168).
TWILL = dict(bwd_loads.TWILL_ROTATION, **{"twill ctas 2": "ctas=2"})
STOCK = {"triton s2": 2, "triton s3": 3, "triton s4": 4}


@triton.jit
def scaled_gemm_kernel(a_desc, b_desc, c_desc, a_scale, b_scale, M, N, K,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
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
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # Scales stored K-block major: a_scale[k, m], b_scale[k, n].
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([off_n, k * BLOCK_K])
        sa = tl.load(a_scale + k * M + offs_m)
        sb = tl.load(b_scale + k * N + offs_n)
        acc += tl.dot(a, b.T) * (sa[:, None] * sb[None, :])
    c_desc.store([off_m, off_n], acc.to(tl.float16))


def ast_source():
    from triton.compiler import ASTSource
    bm, bn, bk = CX["BLOCK_M"], CX["BLOCK_N"], CX["BLOCK_K"]
    signature = {"a_desc": f"tensordesc<fp16[{bm}, {bk}]>", "b_desc": f"tensordesc<fp16[{bn}, {bk}]>",
                 "c_desc": f"tensordesc<fp16[{bm}, {bn}]>", "a_scale": "*fp32", "b_scale": "*fp32",
                 "M": "i32", "N": "i32", "K": "i32", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
                 "BLOCK_K": "constexpr", "GROUP_M": "constexpr"}
    names = list(signature)
    attrs = {(names.index(n), ): [["tt.divisibility", 16]] for n in ("a_scale", "b_scale", "M", "N", "K")}
    return ASTSource(fn=scaled_gemm_kernel, signature=signature, constexprs=dict(CX), attrs=attrs)


KIND = "scaled_gemm"  # run.twill_compile: not FA, so twill schedules every loop (scope=all)


def compile_kernel(kind, cx, opts):
    """For run.twill_compile and bwd_loads.compile_all (`compile`)."""
    return triton.compile(ast_source(), target=run.TARGET, options=opts)


def record():
    bwd_loads.record_variants(KIND, REPLAY, CX, TWILL, compile_kernel)


def bench(out, sizes, rounds):
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    torch.manual_seed(0)
    kernels = bwd_loads.compile_all(KIND, REPLAY, CX, STOCK, TWILL, compile_kernel)
    results = bwd_loads.header()
    BM, BN, BK = CX["BLOCK_M"], CX["BLOCK_N"], CX["BLOCK_K"]
    for S in sizes:
        kb = S // BK
        a = torch.randn(S, S, device="cuda", dtype=torch.float16)
        b = torch.randn(S, S, device="cuda", dtype=torch.float16)
        sa = torch.rand(kb, S, device="cuda", dtype=torch.float32) + 0.5
        sb = torch.rand(kb, S, device="cuda", dtype=torch.float32) + 0.5
        # sum_k (A_k * sa_k) @ (B_k * sb_k)^T, in float32.
        ref = (a.float() * sa.repeat_interleave(BK, 0).T) @ (b.float() * sb.repeat_interleave(BK, 0).T).T
        ad, bd = TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(b, [BN, BK])
        def launch(kern):
            c = torch.full((S, S), float("nan"), device="cuda", dtype=torch.float16)
            cd = TensorDescriptor.from_tensor(c, [BM, BN])
            return (lambda: kern[((S // BM) * (S // BN), 1, 1)](ad, bd, cd, sa, sb, S, S, S, BM, BN, BK,
                                                                CX["GROUP_M"])), c

        fns, outs = bwd_loads.launch_all(kernels, launch)
        ok = {label: bwd_loads.gemm_correct(c, ref) for label, c in outs.items()}
        bwd_loads.measure(results, S, fns, ok, "correct", "triton s3", rounds, flops=2.0 * S ** 3)
        del a, b, sa, sb, ref, fns, outs
        torch.cuda.empty_cache()
    bwd_loads.save(out, "scaled_gemm_loads.json", results)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT"))
    ap.add_argument("--sizes", type=int, nargs="*")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    if a.record:
        record()
    else:
        bench(a.out, a.sizes or [4096, 8192], a.rounds)


if __name__ == "__main__":
    main()
