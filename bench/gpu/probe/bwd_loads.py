"""Probe on the H100: where twill puts the streaming loads of the hd64
FlashAttention backward at 32-row steps and 4 warps
(third_party/triton/tests/kernels/fa_bwd.py, the configuration twill's
model has chosen since 2026-11-24), against Triton's own schedule at 2 and
3 stages.

Bench runs on the H100 (2026-11-24) measured twill's choice (loads first
in the body, one iteration ahead, with and without one extra stage) at
0.965-0.990 of Triton's 3-stage schedule, whose loop bodies differ from twill's only in
where the loads are issued: Triton issues them at the end of the body, two
iterations ahead; twill at the start, one (or two) ahead. This probe times
the four placements twill can emit (loads first / last, prefetch 0 / +1)
beside Triton's s2 and s3 in interleaved rounds, so that the difference is
measured, not inferred.

    python -m bench.gpu.probe.bwd_loads --record   # here (twill-opt): schedules into the cache (probe/replay.py)
    python3 -m bench.gpu.probe.bwd_loads [--out DIR]  # on the GPU machine (carry bench/gpu/plans): replay and time

`--kind gemm` does the same for the 128x128x64 TMA GEMM
(third_party/triton/tests/kernels/matmul.py, 4 warps) against Triton's s2-s5 at 4k and 8k: the rule taken
from the backward (covered loads, then loads last) moved the 8k GEMM from
loads first with an extra stage (paired 0.996 / 1.001 on Triton 3.6 /
3.9, H100, 2026-11-24) to loads last with one (0.975 / 0.988, the same
day).

Since 2026-11-24 11:26 UTC the backward's variants are TWILL_BWD (pointer
loads placed apart from descriptor loads); before, they were the four
placements of TWILL (at commit ff8001e for the backward).

Prints per size the median over rounds of each variant's median time and its
ratio to Triton's s3, and writes the numbers as JSON with --out.
"""
import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

import triton  # noqa: E402

from bench.gpu import run  # noqa: E402
from bench.gpu.probe import replay  # noqa: E402

REPLAY = replay.root("bwd-loads")
GEMM_REPLAY = replay.root("gemm-loads")
# The FA forward at BLOCK_N 64, 4 warps, no warp specialization (twill's and
# the stock grid's configuration at 1k): kind -> head dim.
FWD = {"fa_hd64": 64, "fa": 128}
GEMM_CX = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8)
CX = dict(run.fa_bwd.split_config(run.fa_bwd.CONFIGS["hd64"][90])[0], BLOCK_M1=32, BLOCK_N2=32,
          WARP_SPECIALIZE=False)
OPTS = dict(num_warps=4, num_stages=2)
TWILL = {"twill loads first": "", "twill loads first prefetch+1": "prefetch=1",
         "twill loads last": "loads=last", "twill loads last prefetch+1": "loads=last prefetch=1"}
# The backward's dK/dV loop streams Q and dO through descriptors (TMA) and
# M and Delta through pointer loads (tt.load: cp.async, every thread issues);
# the GEMM and the forward stream through descriptors only. TWILL_BWD places
# the two kinds apart (each "last" with one more stage, so that its lead
# stays the modeled one) to tell which kind's placement makes the backward's
# 1.5-2.5% between loads first and loads last + 1 stage.
TWILL_BWD = {"twill loads first": "", "twill loads last prefetch+1": "loads=last prefetch=1",
             "twill pointer last+1, descriptor first": "pointer-loads=last pointer-prefetch=1",
             "twill descriptor last+1, pointer first": "loads=last prefetch=1 pointer-loads=first pointer-prefetch=0"}
STOCK = {"triton s2": 2, "triton s3": 3}


# Loads first at depth p and loads last at depth p + 1 are one schedule whose
# loop is rotated (loop_sass.py): `--kind fa_hd64|fa` times the rotation on
# the forward. (`loads=first` explicitly: the default, `loads=auto`, rotates
# the loops that mix descriptor and pointer loads, since 2026-11-24.)
TWILL_ROTATION = {"twill loads first": "loads=first", "twill loads last prefetch+1": "loads=last prefetch=1"}


# The backward's two loops in different rotations. The pass places
# the loads of every loop alike, so these schedules are merged from two
# recorded ones (the same module; only the loops' attributes differ): the
# dK/dV loop (the first) from one, the dQ loop from the other. They compile
# with no extra option, under the loads-first schedule's key.
HYBRIDS = {"twill dKdV last+1, dQ first": ("twill loads last prefetch+1", "twill loads first"),
           "twill dKdV first, dQ last+1": ("twill loads first", "twill loads last prefetch+1")}


def recorded(kind):
    """The variants the pass schedules (label -> extra pass options)."""
    if kind in FWD:
        return TWILL_ROTATION
    return TWILL_BWD if kind == "bwd_hd64" else TWILL


def variants(kind):
    """The twill variants compiled and timed (label -> extra pass options)."""
    out = dict(recorded(kind))
    if kind == "bwd_hd64":
        out.update({label: "" for label in HYBRIDS})
    return out


def record_hybrids(root):
    def only(label):
        dirs = list((root / run.slug(label)).iterdir())
        assert len(dirs) == 1, dirs
        return dirs[0]

    key = (only("twill loads first") / "key.txt").read_text()
    for label, (loop1, rest) in HYBRIDS.items():
        a, b = only(loop1), only(rest)
        la = (a / "scheduled.mlir").read_text().splitlines(keepends=True)
        lb = (b / "scheduled.mlir").read_text().splitlines(keepends=True)
        fors = [i for i, line in enumerate(lb) if '"scf.for"' in line]
        assert len(la) == len(lb) and len(fors) == 2, (len(la), len(lb), fors)
        out = root / run.slug(label) / b.name
        out.mkdir(parents=True, exist_ok=True)
        (out / "scheduled.mlir").write_text("".join(la[:fors[1]] + lb[fors[1]:]))
        (out / "key.txt").write_text(key)
        ra = (a / "remarks.txt").read_text().splitlines(keepends=True)
        rb = (b / "remarks.txt").read_text().splitlines(keepends=True)
        (out / "remarks.txt").write_text("".join([r for r in ra if "_loop1:" in r] +
                                                 [r for r in rb if "_loop1:" not in r]))
        (out / "command.txt").write_text(f"merged by bwd_loads.record_hybrids: the lines before the second "
                                         f"scf.for from {a.parent.name}, the rest from {b.parent.name}\n")
        print(label, "merged")


def fwd_cx(kind):
    return dict(HEAD_DIM=FWD[kind], BLOCK_M=128, BLOCK_N=64, WARP_SPECIALIZE=False)


def fwd_replay(kind):
    return replay.root(f"{kind}-loads")


def record_variants(kind, root, cx, twill, compile=None):
    """Records the schedules of the `twill` variants (label -> extra pass
    options) of `kind` at `cx` under `root`, one directory per label."""
    for label, extra in twill.items():
        dump = root / run.slug(label)
        _, d = replay.twill_record(kind, cx, OPTS, extra, str(dump), compile)
        print(label, "scheduled" if d.scheduled else f"NOT scheduled: {d.reason}")
        for r in d.remarks:
            print("  ", r.split("remark: ", 1)[-1][:400])
    replay.prune_recorded(root)


def record(kind):
    if kind in FWD:
        root, cx, k = fwd_replay(kind), fwd_cx(kind), kind
    else:
        root, cx, k = (REPLAY, CX, "bwd_hd64") if kind == "bwd" else (GEMM_REPLAY, GEMM_CX, "gemm")
    record_variants(k, root, cx, recorded(k))
    if k == "bwd_hd64":
        record_hybrids(root)


def compile_all(kind, root, cx, stock, twill=None, compile=None):
    """Triton's own kernel at each of `stock` (label -> num_stages) and
    twill's variants (`twill`, default `variants(kind)`) replayed from
    `root`; `compile` as for run.twill_compile."""
    compile = compile or run.compile_kernel
    kernels = {}
    cache = Path(tempfile.mkdtemp(prefix="loads-cache-"))
    for label, ns in stock.items():
        os.environ["TRITON_CACHE_DIR"] = str(cache / "stock")
        kernels[label] = compile(kind, cx, dict(OPTS, num_stages=ns))
    for label, extra in (variants(kind) if twill is None else twill).items():
        os.environ["TWILL_REPLAY_DIR"] = str(root / run.slug(label))
        os.environ["TRITON_CACHE_DIR"] = str(cache / run.slug(label))
        k, d = run.twill_compile(kind, cx, OPTS, extra, compile)
        print(label, "twill applied" if d.scheduled else f"twill NOT applied: {d.reason[:200]}", flush=True)
        if d.scheduled:
            kernels[label] = k
    return kernels


def interleave(fns, base, rounds):
    """`rounds` rounds of every variant in turn, each a median over at least
    run.PAIRED_CALLS calls of the `base` variant's duration."""
    from triton.testing import do_bench
    ms0 = do_bench(fns[base], warmup=25, rep=100, return_mode="median")
    times = {label: [] for label in fns}
    for _ in range(rounds):
        for label, fn in fns.items():
            times[label].append(run.med_calls(fn, ms0))
    return times


def header():
    """The device, Triton and date of a probe's JSON."""
    import torch
    return dict(device=torch.cuda.get_device_name(), triton=triton.__version__,
                date=time.strftime("%Y-%m-%d %H:%M:%S %Z"), sizes={})


def report(size, rounds, times, base, flags, flag_name, flops=None):
    """Prints each variant's median over the rounds, its range, its ratio
    to `base` and its correctness flag (TFLOPS too, given the flops)."""
    ref = statistics.median(times[base])
    print(f"N = {size} ({rounds} interleaved rounds, medians of >= 20 calls each)", flush=True)
    for label, ts in times.items():
        m = statistics.median(ts)
        rate = f"  {flops / m / 1e9:6.1f} TFLOPS" if flops else ""
        print(f"  {label:32s} {m:9.4f} ms{rate}  [{min(ts):.4f}, {max(ts):.4f}]  {base.split()[-1]} / this = "
              f"{ref / m:.3f}  {flag_name}: {flags[label]}", flush=True)


def launch_all(kernels, launch):
    """(fns, outs): per kernel, `launch(kern)` gives its launch function and
    its (NaN-poisoned) output; each function runs once, so that the outputs
    can be checked before timing."""
    import torch
    fns, outs = {}, {}
    for label, kern in kernels.items():
        fns[label], outs[label] = launch(kern)
        fns[label]()
    torch.cuda.synchronize()
    return fns, outs


def gemm_correct(c, ref):
    """A GEMM output against its float32 reference: finite, max error under
    1% of the reference's largest magnitude."""
    import torch
    return bool(torch.isfinite(c).all().item()) and (c.float() - ref).abs().max().item() < 1e-2 * \
        ref.abs().max().item()


def measure(results, size, fns, flags, flag_name, base, rounds, flops=None):
    """Interleaved rounds of `fns` against `base`, printed and kept in
    `results` with each variant's flag (JSON key: `flag_name`, spaces as _)."""
    times = interleave(fns, base, rounds)
    report(size, rounds, times, base, flags, flag_name, flops)
    results["sizes"][size] = {"times": times, flag_name.replace(" ", "_"): flags}


def save(out, name, results):
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / name).write_text(json.dumps(results, indent=1))


def bench_gemm(out, sizes, rounds):
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    torch.manual_seed(0)
    kernels = compile_all("gemm", GEMM_REPLAY, GEMM_CX, {f"triton s{n}": n for n in (2, 3, 4, 5)})
    results = header()
    for S in sizes:
        a = torch.randn(S, S, device="cuda", dtype=torch.float16)
        b = torch.randn(S, S, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float().T
        BM, BN, BK = GEMM_CX["BLOCK_M"], GEMM_CX["BLOCK_N"], GEMM_CX["BLOCK_K"]
        ad, bd = TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(b, [BN, BK])
        def launch(kern):
            c = torch.full((S, S), float("nan"), device="cuda", dtype=torch.float16)
            cd = TensorDescriptor.from_tensor(c, [BM, BN])
            return (lambda: kern[((S // BM) * (S // BN), 1, 1)](ad, bd, cd, S, S, S, BM, BN, BK,
                                                                GEMM_CX["GROUP_M"])), c

        fns, outs = launch_all(kernels, launch)
        ok = {label: gemm_correct(c, ref) for label, c in outs.items()}
        measure(results, S, fns, ok, "correct", "triton s2", rounds, flops=2.0 * S ** 3)
        del a, b, ref, fns, outs
        torch.cuda.empty_cache()
    save(out, "gemm_loads.json", results)


def bench_fwd(kind, out, sizes, rounds):
    import math

    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    torch.manual_seed(0)
    Z, H, D = 4, 32, FWD[kind]
    cx = fwd_cx(kind)
    kernels = compile_all(kind, fwd_replay(kind), cx, STOCK)
    results = header()
    for N in sizes:
        q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
        sm_scale = 1.0 / math.sqrt(D)
        BM, BN = cx["BLOCK_M"], cx["BLOCK_N"]

        def desc(t, rows):
            return TensorDescriptor.from_tensor(t.view(Z * H * N, D), [rows, D])

        def launch(kern):
            o = torch.full_like(q, float("nan"))
            lse = torch.full((Z * H * N,), float("nan"), device="cuda", dtype=torch.float32)
            args = (sm_scale, lse, Z, H, desc(q, BM), desc(k, BN), desc(v, BN), desc(o, BM), N, D, BM, BN, False)
            return (lambda: kern[(N // BM, Z * H, 1)](*args)), o

        fns, outs = launch_all(kernels, launch)
        s_ = (q[0, 0].float() @ k[0, 0].float().T) * sm_scale
        ref = torch.softmax(s_, dim=-1) @ v[0, 0].float()
        ok = {label: bool(torch.isfinite(o).all().item()) and (o[0, 0].float() - ref).abs().max().item() < 2e-2
              for label, o in outs.items()}
        measure(results, N, fns, ok, "correct", "triton s3", rounds, flops=4.0 * Z * H * N * N * D)
        del q, k, v, outs, fns, s_, ref
        torch.cuda.empty_cache()
    save(out, f"{kind}_loads.json", results)


def bench(out, sizes, rounds):
    import torch

    from bench.kernels import check

    torch.manual_seed(0)
    Z, H = 4, 32
    kernels = compile_all("bwd_hd64", REPLAY, CX, STOCK)
    results = header()
    for N in sizes:
        q, k, v, do, o, lse, delta, sm_scale = run.bwd_inputs("hd64", Z, H, N)
        sig, cst, _ = run.fa_bwd.ast_source_args(**CX)
        def launch(kern):
            dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(3))
            values = check.bwd_values(CX, sm_scale, lse, delta, q, k, v, do, dq, dk, dv)
            return (lambda: check._launch(kern, (N // CX["BLOCK_N1"], Z * H, 1), sig, cst, values)), (dq, dk, dv)

        fns, outs = launch_all(kernels, launch)
        ref = outs["triton s3"]
        same = {label: all(torch.isfinite(t).all().item() and torch.allclose(t, r, atol=2e-2, rtol=2e-2)
                           for t, r in zip(got, ref)) for label, got in outs.items()}
        measure(results, N, fns, same, "matches s3", "triton s3", rounds)
        del q, k, v, do, o, lse, delta, outs, fns
        torch.cuda.empty_cache()
    save(out, "bwd_loads.json", results)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT"))
    ap.add_argument("--kind", choices=("bwd", "gemm") + tuple(FWD), default="bwd")
    ap.add_argument("--sizes", type=int, nargs="*")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    if a.record:
        record(a.kind)
    elif a.kind in FWD:
        bench_fwd(a.kind, a.out, a.sizes or [1024, 4096, 16384], a.rounds)
    elif a.kind == "gemm":
        bench_gemm(a.out, a.sizes or [4096, 8192], a.rounds)
    else:
        bench(a.out, a.sizes or [1024, 4096, 16384], a.rounds)


if __name__ == "__main__":
    main()
