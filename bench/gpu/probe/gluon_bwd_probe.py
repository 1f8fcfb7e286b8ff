"""Probe on the H100: the FlashAttention backward through Gluon
(bench/kernels/fa_bwd_gluon.py, twill's two-group schedules of the two
loops) against stock Triton's best backward configurations of the bench
grid and twill's Triton-path choice.

    python3 -m bench.gpu.probe.gluon_bwd_probe [--head-dims 128,64] [--sizes 1024,4096,16384] [--rounds 5]

First a correctness sweep: every Gluon variant in a child process with a
time limit (a wrong barrier protocol hangs there, not here) at N = 128, 256,
640, 2048 (Z=1, H=2), every head's dQ, dK, dV against float32 autograd.
Then, per head dim and size (Z=4, H=32, fp16, non-causal): fresh random
inputs, the forward's M and the preprocess's Delta from the stock kernels
(run.bwd_inputs), every variant's outputs poisoned with NaN, run once,
checked against float32 on two heads, timed (do_bench median), then the
correct variants timed again in --rounds interleaved rounds (order rotated).
TFLOPS count the five matmuls (2.5 x the forward's), as run.py does.
"""
import argparse
import math
import statistics
import subprocess
import sys
import time

import triton

from third_party.triton.tests.kernels import fa_bwd  # noqa: E402
from bench.kernels import fa_bwd_gluon  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--head-dims", default="128,64")
ap.add_argument("--sizes", default="1024,4096,16384")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--rep", type=int, default=300, help="do_bench repetition time (ms) per variant and round")
ap.add_argument("--check", help="(child process) correctness sweep of one variant: 'HEAD_DIM:name'")
ap.add_argument("--variants", default="plan,inflight,as_written,s2,rows3",
                help="Gluon variants (keys of gluon_variants: plan, as_written, s2, function, s3early, rows3, dq64, "
                     "inflight; "
                     "comma-separated; function is as_written where twill has that plan)")
args = ap.parse_args()


def recorded(d):
    """run.py's record of twill's backward plans at head dim `d`
    (run.py --record-gluon-only bwd_hd128 / bwd_hd64, this Triton's plans cache):
    the plan (the dQ loop read sub-tiled) and "as_written" (the loops as
    fa_bwd's configuration writes them), each a plan or a refusal."""
    import json

    from bench.gpu import run as bench_run

    return json.loads((bench_run.GLUON / f"bwd_hd{d}" / "plan.json").read_text())


def gluon_variants(d):
    """Gluon variants per head dim (keys for --variants): twill's recorded
    plans where the kernel lowers twill's schedules ("plan": the dQ loop
    read sub-tiled; "as_written": fa_bwd's loops as written), and
    ablations: the forward's ring rule (prefetch + 1 slots), the split by
    rows of both loops, 64-key steps in the plan's dQ loop, S issued one
    block ahead in the function split's dQ loop; and at head dim 64: the
    plan's splits ("fr"), twill's own dK/dV cut lowered by
    SPLIT1 = "elementwise" ("ew"; "ewk": K in registers; "ew16": dP^T -
    Delta crossing in fp16), the function split with its A operands from
    registers ("frr"), the dK/dV loop on one compute group at two CTAs per
    SM ("single", "single_s4": 4-slot rings, "single_np": not
    pipelined)."""
    rec = recorded(d)
    base = dict(fa_bwd_gluon.DEFAULT_CONFIG, HEAD_DIM=d)
    written = dict(base, SPLIT1="function", SPLIT2="function", BLOCK_N2=64, STAGES1=3, STAGES2=3)
    out = {}
    for key, r, label in (("plan", rec, "gluon twill plan (dQ loop read sub-tiled: split by rows)"),
                          ("as_written", rec.get("as_written") or {}, "gluon twill plan of the loops as written "
                                                                       "(split by function)")):
        if r.get("plan"):
            out[key] = (label, dict(base, **r["plan"]))
            if key == "plan":
                # The plan's schedule with other launches (the recorded plan
                # carries its own since 2026-11-26: launch_plan).
                sched = {k: v for k, v in r["plan"].items() if k not in ("PERSIST1", "PERSIST2", "CONCURRENT")}
                out["planp"] = (label + ", dK/dV on a persistent grid", dict(base, **dict(sched, PERSIST1=True)))
                out["planq"] = (label + ", dQ on a persistent grid", dict(base, **dict(sched, PERSIST2=1)))
                out["planpp"] = (label + ", both persistent, 2 buffers", dict(base, **dict(sched, PERSIST1=2,
                                                                             PERSIST2=2)))
                out["planc"] = (label + ", dQ on a concurrent stream", dict(base, **dict(sched, CONCURRENT=True)))
                out["planpc"] = (label + ", dK/dV persistent (2 buffers), dQ on a concurrent stream",
                                 dict(base, **dict(sched, PERSIST1=2, CONCURRENT=True)))
                out["planppc"] = (label + ", both persistent (2 buffers), dQ on a concurrent stream",
                                  dict(base, **dict(sched, PERSIST1=2, PERSIST2=2, CONCURRENT=True)))
                # Ablations of the plan's launch.
                out["plan_seq"] = (label + ", the two kernels one after the other",
                                   dict(base, **dict(r["plan"], CONCURRENT=False)))
                out["plan_dqgrid"] = (label + ", dQ on its per-tile grid",
                                      dict(base, **dict(r["plan"], PERSIST2=False)))
                out["plan_s2"] = (label + ", 2-slot dQ rings", dict(base, **dict(r["plan"], STAGES2=2)))
        elif not args.check:
            print(f"hd{d}: no Gluon plan ({key}): {r.get('refused')}", flush=True)
    tag = "" if rec.get("plan") else " (not twill's plan)"
    out.update({
        "s2": ("gluon split by function, 2-slot rings" + tag, dict(written, STAGES1=2, STAGES2=2)),
        "function": ("gluon split by function, 3-slot rings" + tag, written),
        "s3early": ("gluon split by function, S one block ahead in dQ" + tag, dict(written, EARLY_S=True)),
        "rows3": ("gluon split by rows (both loops), 3-slot rings" + tag, dict(written, SPLIT="rows")),
        "dq64": ("gluon plan's splits, dQ loop at 64-key steps" + tag, dict(base, BLOCK_N2=64, STAGES2=3)),
        "inflight": ("gluon plan, dQ kept in flight across iterations (ptxas serializes)" + tag,
                     dict(base, DQ_INFLIGHT=True)),
        "fr": ("gluon split by function (dK/dV), by rows (dQ, 128-key steps)" + tag, base),
        "ew": ("gluon split elementwise (dK/dV), by rows (dQ, 128-key steps)" + tag,
               dict(base, SPLIT1="elementwise")),
        "ewk": ("gluon split elementwise, K in registers (dK/dV), by rows (dQ, 128-key steps)" + tag,
                dict(base, SPLIT1="elementwise", K_REGS=True)),
        "ew16": ("gluon split elementwise, dP^T - Delta crossing in fp16 (dK/dV), by rows (dQ, 128-key steps)" + tag,
                 dict(base, SPLIT1="elementwise", DPD_F16=True)),
        "single": ("gluon one compute group, 2 CTAs/SM, 32-row steps, pipelined (dK/dV), by rows (dQ, 128-key "
                   "steps)" + tag, dict(base, SPLIT1="single", BLOCK_M1=32, MAXNREG1=128)),
        "single_s4": ("gluon one compute group, 2 CTAs/SM, 32-row steps, pipelined, 4-slot rings (dK/dV), by rows "
                      "(dQ, 128-key steps)" + tag, dict(base, SPLIT1="single", BLOCK_M1=32, MAXNREG1=128, STAGES1=4)),
        "single_np": ("gluon one compute group, 2 CTAs/SM, 32-row steps, as written (dK/dV), by rows (dQ, 128-key "
                      "steps)" + tag, dict(base, SPLIT1="single", BLOCK_M1=32, MAXNREG1=128, PIPE=False)),
        "frp": ("gluon split by function on a persistent grid (dK/dV), by rows (dQ, 128-key steps)" + tag,
                dict(base, PERSIST1=True)),
        "frp2": ("gluon split by function on a persistent grid, 2 K/V buffers (dK/dV), by rows (dQ, 128-key steps)"
                 + tag, dict(base, PERSIST1=2)),
        "frpp": ("gluon split by function, persistent, 2 K/V buffers (dK/dV), by rows, persistent, 2 Q/dO buffers "
                 "(dQ, 128-key steps)" + tag, dict(base, PERSIST1=2, PERSIST2=2)),
        "frr": ("gluon split by function, A operands from registers (dK/dV), by rows (dQ, "
                "128-key steps)" + tag, dict(base, REG_A=True)),
    })
    # A child process (--check) looks its variant up among all of them.
    keys = list(out) if args.check or not args.variants else [k for k in args.variants.split(",") if k in out]
    return dict(out[k] for k in keys)


import torch  # noqa: E402
from triton.testing import do_bench  # noqa: E402

triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))


def reference(q, k, v, do, sm_scale, heads):
    ref = {}
    for z, h in heads:
        qr, kr, vr = (t[z, h].detach().float().requires_grad_() for t in (q, k, v))
        (torch.softmax((qr @ kr.T) * sm_scale, dim=-1) @ vr).backward(do[z, h].float())
        ref[(z, h)] = (qr.grad, kr.grad, vr.grad)
    return ref


def grads_error(got, ref):
    """Largest error of dQ, dK, dV over the reference heads, relative to
    each reference's largest magnitude; NaN where an output is not finite."""
    if not all(torch.isfinite(t).all() for t in got):
        return float("nan")
    return max((g[z, h].float() - w).abs().max().item() / w.abs().max().item()
               for (z, h), want in ref.items() for g, w in zip(got, want))


def torch_stats(q, k, v, do, sm_scale):
    """The forward's log2-sum-exp M and the preprocess's Delta, in float32
    by torch (the correctness sweep's own, independent of the kernels)."""
    s_ = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    lse = (torch.logsumexp(s_, dim=-1) / math.log(2)).reshape(-1).contiguous()
    o = torch.softmax(s_, dim=-1) @ v.float()
    delta = (o * do.float()).sum(-1).reshape(-1).contiguous()
    return lse, delta


def run_check(d, name):
    """The correctness sweep of one variant (a child process)."""
    cfg = gluon_variants(d)[name]
    kernels = fa_bwd_gluon.compile_for(None, **cfg)
    worst = 0.0
    for n in (128, 256, 640, 2048):
        torch.manual_seed(n)
        q, k, v, do = (torch.empty(1, 2, n, d, device="cuda", dtype=torch.float16).normal_(0, 0.5) for _ in range(4))
        sm_scale = 1.0 / math.sqrt(d)
        lse, delta = torch_stats(q, k, v, do, sm_scale)
        dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(3))
        fa_bwd_gluon.launcher(kernels, q, k, v, do, lse, delta, dq, dk, dv, sm_scale, **cfg)()
        torch.cuda.synchronize()
        err = grads_error((dq, dk, dv), reference(q, k, v, do, sm_scale, [(0, 0), (0, 1)]))
        ok = err < 1e-2
        print(f"check {name} hd{d} N={n}: max rel err {err:.2e} {'ok' if ok else 'WRONG'}", flush=True)
        worst = max(worst, err) if ok else float("nan")
    print(f"CHECK {'PASS' if worst == worst else 'FAIL'} {name} hd{d}", flush=True)
    sys.exit(0 if worst == worst else 1)


if args.check:
    d_, name_ = args.check.split(":", 1)
    run_check(int(d_), name_)

from bench.gpu import run as bench_run  # noqa: E402
from bench.kernels import check as kcheck  # noqa: E402

print("triton", triton.__version__, "torch", torch.__version__, torch.cuda.get_device_name(),
      time.strftime("%Y-%m-%d %H:%M:%S %Z"), flush=True)

# Stock Triton: the best configurations of the bench grid (H100, Triton 3.6
# and 3.9, 2026-11-25: hd128 w8 s3 and w8 s3 ws; hd64 b32 w4 s3, s4, s5)
# and twill's Triton-path choice (fa_bwd's CONFIGS: hd128 w8 s2 ws, hd64 w8
# s3 ws; the bench's "twill" rows add the pass, whose schedule there is
# Triton's own).
STOCK = {
    128: {"triton w8 s3": (dict(BLOCK_M1=64, BLOCK_N2=64, WARP_SPECIALIZE=False), 8, 3),
          "triton w8 s3 ws": (dict(BLOCK_M1=64, BLOCK_N2=64, WARP_SPECIALIZE=True), 8, 3),
          "triton w8 s2 ws": (dict(BLOCK_M1=64, BLOCK_N2=64, WARP_SPECIALIZE=True), 8, 2)},
    64: {"triton b32 w4 s3": (dict(BLOCK_M1=32, BLOCK_N2=32, WARP_SPECIALIZE=False), 4, 3),
         "triton b32 w4 s5": (dict(BLOCK_M1=32, BLOCK_N2=32, WARP_SPECIALIZE=False), 4, 5),
         "triton w8 s3 ws": (dict(BLOCK_M1=64, BLOCK_N2=64, WARP_SPECIALIZE=True), 8, 3)},
}
CFG_NAME = {128: "hd128", 64: "hd64"}
Z, H = 4, 32
summary = []
for d in [int(x) for x in args.head_dims.split(",")]:
    variants = {}
    for name, cfg in gluon_variants(d).items():
        t0 = time.time()
        try:
            r = subprocess.run([sys.executable, __file__, "--check", f"{d}:{name}"], timeout=120,
                               capture_output=True, text=True)
            print(r.stdout.strip()[-1500:], flush=True)
            if r.returncode != 0:
                print(r.stderr.strip()[-600:], flush=True)
                print(f"correctness sweep failed: {name} hd{d}: exit {r.returncode}", flush=True)
                continue
        except subprocess.TimeoutExpired:
            print(f"correctness sweep HUNG (killed after 120 s): {name} hd{d}", flush=True)
            continue
        variants[name] = ("gluon", cfg, fa_bwd_gluon.compile_for(None, **cfg))
        print(f"compiled {name} hd{d} in {time.time() - t0:.1f} s (with its sweep)", flush=True)
    for name, (over, nw, ns) in STOCK[d].items():
        cx, _ = fa_bwd.split_config(dict(fa_bwd.CONFIGS[CFG_NAME[d]][90], **over))
        variants[name] = ("triton", cx, triton.compile(fa_bwd.make_ast_source(**cx), target=bench_run.TARGET,
                                                       options=dict(num_warps=nw, num_stages=ns)))
    for n in [int(x) for x in args.sizes.split(",")]:
        torch.manual_seed(n)
        q, k, v, do, o, lse, delta, sm_scale = bench_run.bwd_inputs(CFG_NAME[d], Z, H, n)
        flops = 2.5 * 4.0 * Z * H * n * n * d
        heads = [(0, 0), (Z - 1, H - 1)]
        ref = reference(q, k, v, do, sm_scale, heads)
        fns, first = {}, {}
        for name, (how, cfg, kern) in variants.items():
            dq, dk, dv = (torch.empty_like(q) for _ in range(3))
            if how == "gluon":
                fn = fa_bwd_gluon.launcher(kern, q, k, v, do, lse, delta, dq, dk, dv, sm_scale, **cfg)
            else:
                values = kcheck.bwd_values(cfg, sm_scale, lse, delta, q, k, v, do, dq, dk, dv)
                sig, cst, _ = fa_bwd.ast_source_args(**cfg)

                def fn(kern=kern, sig=sig, cst=cst, values=values, n1=cfg["BLOCK_N1"], n=n):
                    kcheck._launch(kern, (n // n1, Z * H, 1), sig, cst, values)
            try:
                for t in (dq, dk, dv):
                    t.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                err = grads_error((dq, dk, dv), ref)
                ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
            except Exception as e:
                print(f"hd{d} N={n} {name}: launch failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            ok = err < 1e-2
            print(f"hd{d} N={n} {name}: {ms:.4f} ms {flops / ms / 1e9:.1f} TFLOPS err {err:.2e} "
                  f"{'ok' if ok else 'WRONG'}", flush=True)
            if ok:
                fns[name] = fn
                first[name] = ms
                for part, pfn in getattr(fn, "parts", {}).items():
                    pms = do_bench(pfn, warmup=25, rep=100, return_mode="median")
                    print(f"  {part}: {pms:.4f} ms ({pms / ms:.2f} of the pair)", flush=True)
        times = {name: [] for name in fns}
        names = list(fns)
        for r_ in range(args.rounds):
            for name in names[r_ % len(names):] + names[:r_ % len(names)]:
                times[name].append(do_bench(fns[name], warmup=10, rep=args.rep, return_mode="median"))
        if args.rounds:
            med = {name: statistics.median(t) for name, t in times.items()}
            best_stock = min((x for x in med if x.startswith("triton")), key=med.get, default=None)
            for name in names:
                line = (f"ROUNDS hd{d} N={n} {name}: median {med[name]:.4f} ms {flops / med[name] / 1e9:.1f} TFLOPS"
                        + (f", best stock ({best_stock}) / this = {med[best_stock] / med[name]:.3f}"
                           if best_stock else ""))
                print(line, flush=True)
                summary.append(line)
        del q, k, v, do, o, lse, delta, ref
        torch.cuda.empty_cache()
print("\n".join(["SUMMARY"] + summary), flush=True)
