"""Probe on the H100: twill's Hopper FA forward schedule lowered to Gluon
(bench/kernels/fa_fwd_gluon.py), each choice of the plan on and off: the
plans of twill's two objectives (`twill solve --objective slack|length`)
and each with the turns enforced or 3 stages (runs before commit ef4faf9,
2026-11-24 18:50 UTC, named "twill plan" what is now objective length, and
"FA3 intra-warpgroup order" what is now objective slack; the first run,
2026-11-24 04:41 UTC, named the plan with the turns enforced "twill plan
(pingpong ...)"), next to stock Triton's two best FA forward
configurations of the bench grid and cuDNN, at N = 1k, 4k, 16k (Z=4, H=32, head dim 128, fp16, non-causal); with
`--head-dim 64`, twill's plan of the head-dim-64 loop and its variants (HD64)
next to Triton's best head-dim-64 configurations and twill's Triton-path
choice; the plan at one CTA per SM (Triton's own register split) and at two
(fa_fwd_gluon.register_split(2): 80 registers per thread at launch), the
occupancy twill's model records for it (run.py --plans);
with `--causal`, twill's plan of the causal sub-tiled kernel's loops
(bench/gpu/plans/<triton>/gluon/causal/plan.json) next to stock Triton's best
causal configuration and cuDNN (causal FLOPs: half of the non-causal).

    python3 -m bench.gpu.probe.fa_gluon_probe [--sizes 1024,16384]

Every output (O and the log2-sum-exp) is poisoned with NaN before the run
and checked against float32 on two heads, on fresh random inputs per size;
times are do_bench medians. A variant that fails to compile or launch is
reported and skipped.
"""
import argparse
import math
import subprocess
import sys
import time
from pathlib import Path

import triton

from third_party.triton.tests.kernels import fa_fwd  # noqa: E402
from bench.kernels import fa_fwd_gluon  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--sizes", default="1024,4096,16384")
ap.add_argument("--smoke", help="run one Gluon variant once on a small problem (used in a child process)")
ap.add_argument("--rounds", type=int, default=0,
                help="then time every correct variant again in this many interleaved rounds per size "
                     "(do_bench median over --rep ms each, the variants' order rotated per round)")
ap.add_argument("--rep", type=int, default=500, help="do_bench repetition time (ms) per variant and round")
ap.add_argument("--head-dim", type=int, default=128, choices=(64, 128),
                help="64: twill's Gluon plan of the head-dim-64 loop (HD64 below) against Triton's best "
                     "head-dim-64 configurations and twill's Triton-path choice")
ap.add_argument("--candidates", default="",
                help="with --head-dim 64: also these candidates of twill's configuration choice (labels of "
                     "run.choice_candidates, comma-separated), scheduled live")
ap.add_argument("--no-gluon", action="store_true", help="leave out the Gluon variants")
ap.add_argument("--causal", action="store_true",
                help="causal attention: twill's recorded causal plan against Triton's causal configurations")
args = ap.parse_args()
if args.candidates and args.head_dim != 64:
    ap.error("--candidates needs --head-dim 64 (they are the hd64 forward's)")
from bench.gpu import run as bench_run  # noqa: E402

# The candidates (--candidates), scheduled live like the bench's choice.
_known = {c["label"]: c for c in bench_run.choice_candidates("fa_hd64")}
_unknown = [x for x in filter(None, args.candidates.split(",")) if x not in _known]
if _unknown:
    ap.error(f"--candidates: not candidates of fa_hd64: {_unknown} (known: {sorted(_known)})")
CANDIDATES = [_known[x] for x in filter(None, args.candidates.split(","))]

import torch  # noqa: E402
from triton.testing import do_bench  # noqa: E402

SIZES = [int(s) for s in args.sizes.split(",")]
Z, H, D = 4, 32, args.head_dim
triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
print("triton", triton.__version__, "torch", torch.__version__, torch.cuda.get_device_name(),
      time.strftime("%Y-%m-%d %H:%M:%S %Z"), flush=True)

# Every flag explicit (the kernel's DEFAULT_CONFIG changed with the plan:
# since ef4faf9, 2026-11-24, twill's plan is the schedule of largest latency
# slack).
SLACK = dict(PINGPONG=False, QK_FIRST=True, INTRA=True)  # twill --objective slack: FA3's intra-warpgroup order
LENGTH = dict(PINGPONG=False, QK_FIRST=False, INTRA=False)  # twill --objective length: turns of PV, then QK^T
GLUON = {
    "gluon twill plan, objective slack (intra-warpgroup order)": SLACK,
    "gluon twill plan, objective length (turn order)": LENGTH,
    "gluon objective length, turns enforced": dict(LENGTH, PINGPONG=True),
    "gluon objective slack, turns enforced": dict(SLACK, PINGPONG=True),
    "gluon objective slack, 3 stages": dict(SLACK, STAGES=3),
    "gluon objective length, 3 stages": dict(LENGTH, STAGES=3),
}
# Head dim 64 (--head-dim 64): twill's plan of the sub-tiled loop at
# BLOCK_N 64 (bench/gpu/plans/<triton>/gluon/hd64/plan.json, both Tritons: PV
# before QK^T in a group's turn, the softmax not under its own PV, one
# iteration of prefetch; LENGTH's flags), next to the other orders and
# BLOCK_N 128 (the Gluon kernel allows BLOCK_N > HEAD_DIM; the Triton kernel
# whose loop twill reads does not).
HD64 = dict(HEAD_DIM=64, BLOCK_N=64)
if D == 64:
    import json

    # The recorded plan (run.py --plans, this Triton's plans cache).
    PLAN64 = json.loads((bench_run.GLUON / "hd64" / "plan.json").read_text())["plan"]
    ORDER64 = ("intra-warpgroup order" if PLAN64["INTRA"] else "QK^T first" if PLAN64["QK_FIRST"]
               else "turn order") + (f", {PLAN64['STAGES']} stages" if PLAN64["STAGES"] != 2 else "")
    # Two CTAs per SM (measured on the H100, 2026-11-24): registers capped at launch so that two
    # 12-warp CTAs fit (fa_fwd_gluon.register_split: 80 per thread at
    # launch, 104 / 112 for the consumer groups); BN64's buffers (48 KB)
    # fit twice. BN128 does not: its scores alone take 64 registers.
    TWO, _ = fa_fwd_gluon.register_split(2)
    GLUON = {
        f"gluon hd64 twill plan (BN{PLAN64['BLOCK_N']}, {ORDER64})": PLAN64,
        f"gluon hd64 twill plan (BN{PLAN64['BLOCK_N']}, {ORDER64}), 2 CTAs/SM": dict(PLAN64, **TWO),
        "gluon hd64 BN64 intra-warpgroup order, 2 CTAs/SM": dict(HD64, **SLACK, **TWO),
        "gluon hd64 BN64 turn order, 3 stages, 2 CTAs/SM": dict(HD64, STAGES=3, **LENGTH, **TWO),
        "gluon hd64 BN128 turn order": dict(HD64, BLOCK_N=128, **LENGTH),
    }
CAUSAL = args.causal
if CAUSAL:
    import json

    if D != 128:
        ap.error("--causal is head dim 128 (the recorded causal plan's)")
    PLANC = json.loads((bench_run.GLUON / "causal" / "plan.json").read_text())["plan"]
    # BLOCK_N 64 as well: two diagonal blocks per CTA, the second masked
    # whole for the first sub-tile's rows (a check of the mask there; not
    # a plan of twill's).
    GLUON = {"gluon causal twill plan": PLANC, "gluon causal BN64 (mask check)": dict(PLANC, BLOCK_N=64)}


def causal_mask(s_):
    """Scores of keys after their query set to -inf (in place), with --causal."""
    if CAUSAL:
        n = s_.shape[-1]
        s_.masked_fill_(torch.ones(n, n, device=s_.device, dtype=torch.bool).triu(1), float("-inf"))
    return s_


if args.smoke:
    # One launch on a small problem: a wrong barrier protocol hangs here, in
    # a child process the parent kills, instead of hanging the whole probe.
    cfg = GLUON[args.smoke]
    kern = fa_fwd_gluon.compile_for(None, **cfg)
    q, k, v = (torch.randn(1, 2, 512, D, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    lse = torch.empty(2 * 512, device="cuda", dtype=torch.float32)
    fa_fwd_gluon.launcher(kern, q, k, v, o, lse, 1 / math.sqrt(D), **cfg)()
    torch.cuda.synchronize()
    ref = torch.softmax(causal_mask((q.float() @ k.float().transpose(-1, -2)) / math.sqrt(D)), -1) @ v.float()
    print("smoke", args.smoke, "max err", (o.float() - ref).abs().max().item(), flush=True)
    sys.exit(0)

kernels = {}
if args.no_gluon:
    GLUON = {}
for name, cfg in GLUON.items():
    t0 = time.time()
    try:
        r = subprocess.run([sys.executable, __file__, "--smoke", name, "--head-dim", str(D)]
                           + (["--causal"] if CAUSAL else []), timeout=90,
                           capture_output=True, text=True)
        print(r.stdout.strip()[-300:], flush=True)
        if r.returncode != 0:
            print(r.stderr.strip()[-400:], flush=True)
            print(f"smoke test failed: {name}: exit {r.returncode}", flush=True)
            continue
    except subprocess.TimeoutExpired:
        print(f"smoke test HUNG (killed after 90 s): {name}", flush=True)
        continue
    try:
        kernels[name] = ("gluon", cfg, fa_fwd_gluon.compile_for(None, **cfg))
        print(f"compiled {name} in {time.time() - t0:.1f} s (with its smoke test)", flush=True)
    except Exception as e:
        print(f"compile failed: {name}: {type(e).__name__}: {str(e)[-300:]}", flush=True)
# Stock Triton: the best configurations of the bench grid at 1k / 4k and 16k.
STOCK = {"triton BN64 w4 s2": (dict(HEAD_DIM=D, BLOCK_M=128, BLOCK_N=64, WARP_SPECIALIZE=False), 4, 2),
         "triton BN128 w4 s2 ws devdesc (Hopper WS)": (dict(HEAD_DIM=D, BLOCK_M=128, BLOCK_N=128,
                                                            WARP_SPECIALIZE=True, DEVICE_DESC=True), 4, 2)}
if D == 64:
    # The hd64 grid's best (H100 bench runs of 2026-11-24: BN64 w8 s3 with
    # or without warp_specialize, w4 s3) and w4 s2, the configuration twill chooses.
    STOCK = {f"triton BN64 w{nw} s{ns}{' ws' if ws else ''}":
             (dict(HEAD_DIM=D, BLOCK_M=128, BLOCK_N=64, WARP_SPECIALIZE=ws), nw, ns)
             for nw, ns, ws in ((4, 2, False), (4, 3, False), (8, 3, False), (8, 3, True))}
if CAUSAL:
    # The causal grid's best in every run so far (BN64 w4 s2), and the
    # sub-tiled causal kernel whose loops twill reads.
    STOCK = {"triton causal BN64 w4 s2": (dict(HEAD_DIM=D, BLOCK_M=128, BLOCK_N=64, WARP_SPECIALIZE=False,
                                                CAUSAL=True, SUBTILE=False), 4, 2),
             "triton causal BN64 w4 s3": (dict(HEAD_DIM=D, BLOCK_M=128, BLOCK_N=64, WARP_SPECIALIZE=False,
                                                CAUSAL=True, SUBTILE=False), 4, 3),
             "triton causal sub-tiled BN128 w8 s3": (dict(HEAD_DIM=D, BLOCK_M=128, BLOCK_N=128,
                                                          WARP_SPECIALIZE=False, CAUSAL=True, SUBTILE=True), 8, 3)}
for name, (cx, nw, ns) in STOCK.items():
    try:
        kernels[name] = ("triton", cx, triton.compile(fa_fwd.make_ast_source(**cx),
                                                      options=dict(num_warps=nw, num_stages=ns)))
    except Exception as e:
        print(f"compile failed: {name}: {str(e)[-300:]}", flush=True)
if D == 64:
    def scheduled(name, c):
        """Candidate `c` of the hd64 forward compiled with twill (scheduled
        live, as bench/gpu/run.py does), as `name`."""
        k_, d_ = bench_run.twill_fresh("fa_hd64", c["cx"], c["opts"], c["extra"])
        print(name, "applied" if d_.scheduled else f"NOT applied: {d_.reason[:200]}", flush=True)
        if d_.scheduled:
            kernels[name] = ("triton", c["cx"], k_)

    # twill's Triton-path choice for the hd64 forward (BN64 w4 s2 at every
    # size), then the candidates the model ties with it (--candidates).
    ch = bench_run.load_choice().get("fa_hd64", {}).get("1024")
    if ch:
        scheduled(f"twill choice {ch['label']}", ch)
    for c in CANDIDATES:
        scheduled(f"twill candidate {c['label']}", c)

table = {}
rounds = {}  # (name, N) -> TFLOPS per round
for N in SIZES:
    fns = {}
    q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    sm = 1 / math.sqrt(D)
    heads = ((0, 0), (Z - 1, H - 1))
    refs = {}
    for z, h in heads:
        s_ = causal_mask((q[z, h].float() @ k[z, h].float().T) * sm)
        lse2 = torch.logsumexp(s_, -1) / math.log(2)  # log2-sum-exp of the scaled scores
        refs[(z, h)] = (torch.softmax(s_, -1) @ v[z, h].float(), lse2)
        del s_
    flops = 4.0 * Z * H * N * N * D * (0.5 if CAUSAL else 1.0)
    for name, (kind, cfg, kern) in kernels.items():
        o = torch.empty_like(q)
        lse = torch.empty(Z * H * N, device="cuda", dtype=torch.float32)
        if kind == "gluon":
            fn = fa_fwd_gluon.launcher(kern, q, k, v, o, lse, sm, **cfg)
        else:
            from triton.tools.tensor_descriptor import TensorDescriptor
            if cfg.get("DEVICE_DESC"):
                args_ = (q, k, v, o)
            else:
                qr = 64 if cfg.get("SUBTILE") else 128
                args_ = tuple(TensorDescriptor.from_tensor(t.view(Z * H * N, D), [rows, D])
                              for t, rows in ((q, qr), (k, cfg["BLOCK_N"]), (v, cfg["BLOCK_N"]), (o, qr)))
            general = (cfg["CAUSAL"], cfg["SUBTILE"]) if "CAUSAL" in cfg else ()

            def fn(kern=kern, cfg=cfg, args_=args_, o=o, lse=lse, general=general):
                kern[(N // 128, Z * H, 1)](sm, lse, Z, H, *args_, N, D, 128, cfg["BLOCK_N"], *general,
                                           cfg["WARP_SPECIALIZE"])
        try:
            o.fill_(float("nan"))
            lse.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            lse4 = lse.view(Z, H, N)
            err = max((o[z, h].float() - r).abs().max().item() for (z, h), (r, _) in refs.items())
            lerr = max((lse4[z, h] - l2).abs().max().item() for (z, h), (_, l2) in refs.items())
            ok = bool(torch.isfinite(o).all()) and err < 2e-2 and (kind != "gluon" or lerr < 1e-2)
            ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
            tf = flops / ms / 1e9
            table[(name, N)] = tf if ok else float("nan")
            if ok:
                fns[name] = fn
            print(f"N={N:6d} {name:52s} {ms:8.3f} ms {tf:7.1f} TFLOPS ok={ok} err={err:.2e} lse_err={lerr:.2e}",
                  flush=True)
        except Exception as e:
            print(f"N={N:6d} {name:52s} FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        import torch.nn.functional as F

        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            f = lambda: F.scaled_dot_product_attention(q, k, v, scale=sm, is_causal=CAUSAL)  # noqa: E731
            ms = do_bench(f, warmup=25, rep=100, return_mode="median")
            table[("cudnn", N)] = flops / ms / 1e9
            print(f"N={N:6d} {'cudnn (torch sdpa)':52s} {ms:8.3f} ms {flops / ms / 1e9:7.1f} TFLOPS", flush=True)

            def cudnn():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    F.scaled_dot_product_attention(q, k, v, scale=sm, is_causal=CAUSAL)

            fns["cudnn"] = cudnn
    except Exception as e:
        print("cudnn failed", e)
    # Interleaved rounds: every variant once per round, the order rotated,
    # so that drift of the machine (clocks, temperature) spreads over all.
    names = list(fns)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            ms = do_bench(fns[name], warmup=25, rep=args.rep, return_mode="median")
            rounds.setdefault((name, N), []).append(flops / ms / 1e9)
        print(f"N={N:6d} round {r + 1}/{args.rounds} done", flush=True)
    del q, k, v, refs
    torch.cuda.empty_cache()

if rounds:
    import statistics

    print(f"\nTFLOPS over {args.rounds} interleaved rounds (do_bench median over {args.rep} ms each): "
          f"median [min, max] per size")
    for name in list(kernels) + ["cudnn"]:
        cells = []
        for N in SIZES:
            xs = rounds.get((name, N))
            cells.append(f"{statistics.median(xs):6.1f} [{min(xs):6.1f}, {max(xs):6.1f}]" if xs else " " * 24)
        print(f"{name:52s} " + " ".join(cells))
print("\nTFLOPS (NaN: wrong result)")
for name in list(kernels) + ["cudnn"]:
    print(f"{name:52s} " + " ".join(f"{table.get((name, N), float('nan')):7.1f}" for N in SIZES))
