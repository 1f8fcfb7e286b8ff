#!/usr/bin/env python3
"""One GPU benchmark run: correctness and TFLOPS of twill-scheduled Triton
kernels against stock Triton (a config grid) and cuDNN / cuBLAS via torch.

    python -m bench.gpu.run --plans           # on a machine with twill and twill-opt (no GPU needed)
    python -m bench.gpu.run --out DIR         # on the GPU machine, with the twill_triton wheel installed
    python -m bench.gpu.run --out DIR --kinds gemm --sweep
                                              # the GEMM alone, after the lowered GEMMs' sweep
    python -m bench.gpu.run --dry-run --kinds gemm
                                              # compile the lowered variants and the sweep for cuda:90, no GPU

The GPU run schedules live: every twill variant is compiled there with the
hook of the installed wheel and its bundled twill-opt, and each compile's
loop summaries are compared with the bench's expected schedules
(bench/gpu/expected.py; a difference is printed and kept in results.json).

--plans builds what the GPU machine cannot, into a cache that is not
committed (bench/gpu/plans/<triton version>, carried to the GPU machine):
the Gluon plans (twill's joint schedules of the Gluon kernels' loops, which
need the `twill` solver) and the model's choice of configuration
(twill_triton.configure ranks every candidate configuration, compiled with
twill, per problem size: the "twill choice" rows, one configuration with
no autotuning on the GPU). It compares both, and every candidate's
schedules, with the expected file (--bless accepts a difference).

The "twill lowered" rows (lowered_variants) are compiled with the hook's
lowering on (`lower=True`): each records whether its loop was lowered and
proved (results.json "lowered"; the row's note), the fastest lowered GEMM
is paired with the best stock configuration ("paired_lowered") and
compared with cuBLAS ("summary_lowered"). --sweep runs the lowered GEMMs'
correctness sweep first (bench.gpu.sweep; results.json "sweep").

Every variant's output is poisoned (NaN) before it runs and checked against
a float32 reference; NaN never passes. Times are medians of
triton.testing.do_bench. Results: a table on stdout, results.json (and
results.png when matplotlib is there) in --out.
"""

import argparse
import functools
import json
import math
import multiprocessing
import statistics
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.runtime.errors import PTXASError

import twill_triton
from bench.gpu import expected
from bench.kernels import fa_fwd_gluon, fa_fwd_gluon_plan, matmul_gluon, matmul_gluon_plan
from third_party.triton.tests.kernels import fa_bwd, fa_fwd, matmul

REPO = Path(__file__).resolve().parents[2]
TARGET = GPUTarget("cuda", 90, 32)
# The cache of --plans for this Triton (the exported modules, hence the
# plans, differ between versions); TWILL_BENCH_PLANS names another root.
PLANS = Path(os.environ.get("TWILL_BENCH_PLANS") or REPO / "bench" / "gpu" / "plans") / triton.__version__
FA_SIZES = [1024, 4096, 16384]
FA_SHAPE = dict(Z=4, H=32, D=128)
GEMM_SIZES = [4096, 8192]
# twill variants: (label, extra pass options). The first is twill's default;
# the second adds one stage of prefetch to every TMA load (section 5.3's
# tunable), to measure what the uncalibrated latency model leaves on the
# table; the third orders each stage by the modulo schedule's slots instead
# of program order (the default before 2026-11-23).
TWILL_VARIANTS = [("twill", ""), ("twill prefetch+1", "prefetch=1"), ("twill slot order", "order=slot")]
# Only these run by default (the others with --all-variants); the model's
# choice of configuration ("twill choice", see choice_candidates) always runs.
DEFAULT_VARIANTS = ("twill",)


# FlashAttention forward kinds: kernel configuration name in
# third_party/triton/tests/kernels/fa_fwd.py (twill's single configuration is CONFIGS[name][90])
# and head dim. "fa" keeps the first run's grid; the others get a smaller one.
FA_KINDS = {"fa": ("default", 128), "fa_subtile": ("subtile", 128), "fa_causal": ("causal", 128),
            "fa_hd64": ("hd64", 64)}
# Row names of the FA kinds in the table and the JSON.
FA_ROWS = {"fa": "fa_fwd", "fa_subtile": "fa_fwd_subtile", "fa_causal": "fa_fwd_causal", "fa_hd64": "fa_fwd_hd64"}


def fa_configs(kind="fa"):
    """(twill's (constexprs, options), stock grid) for an FA kind."""
    cfg_name, d = FA_KINDS[kind]
    cx, opts = fa_fwd.split_config(fa_fwd.CONFIGS[cfg_name][90])
    twill = (cx, opts)
    extra = {k: cx[k] for k in ("CAUSAL", "SUBTILE") if k in cx}
    stages = (2, 3, 4) if kind == "fa" else (2, 3)
    grid = []
    for bn in (64, 128):
        if bn > d:
            continue
        for nw in (4, 8):
            for ns in stages:
                grid.append((dict(HEAD_DIM=d, BLOCK_M=128, BLOCK_N=bn, WARP_SPECIALIZE=False, **extra),
                             dict(num_warps=nw, num_stages=ns)))
    for ns in stages:
        grid.append((dict(HEAD_DIM=d, BLOCK_M=128, BLOCK_N=cx["BLOCK_N"], WARP_SPECIALIZE=True, **extra),
                     dict(num_warps=8, num_stages=ns)))
    if kind == "fa":
        # Triton's own Hopper warp specialization (num_warps=4: a producer and
        # two consumer warp groups), which compiles only with the descriptors
        # made in the kernel (fa_fwd.attn_fwd_device_desc_kernel); BLOCK_N 128
        # at 3 stages exceeds shared memory.
        for bn, ns in ((128, 2), (64, 2), (64, 3)):
            grid.append((dict(HEAD_DIM=d, BLOCK_M=128, BLOCK_N=bn, WARP_SPECIALIZE=True, DEVICE_DESC=True),
                         dict(num_warps=4, num_stages=ns)))
    return twill, grid


# FlashAttention backward kinds: configuration name in third_party/triton/tests/kernels/fa_bwd.py.
BWD_KINDS = {"bwd_hd128": "hd128", "bwd_hd64": "hd64"}


# Rows per step of the backward loops (BLOCK_M1 of the dK/dV loop and
# BLOCK_N2 of the dQ loop, equal): the kernel configuration's 64 and the
# Triton tutorial's 32. At 4 warps and head dim 64, 64-row steps need more
# registers than a thread has (twill finds no schedule of the dK/dV loop;
# Triton's own spills 160-240 bytes), 32-row steps fit.
BWD_STEPS = (64, 32)
# Stages of the stock grid per step: shorter steps hide a load's latency
# over fewer cycles per stage (the tutorial runs 32-row steps at 5).
BWD_STOCK_STAGES = {64: (2, 3), 32: (2, 3, 4, 5)}


def bwd_configs(kind):
    """twill's (constexprs, options) for a backward kind, and a stock grid of
    the same BLOCK_N1 / BLOCK_M2 over the step (BWD_STEPS), num_warps,
    num_stages and warp_specialize."""
    cx, opts = fa_bwd.split_config(fa_bwd.CONFIGS[BWD_KINDS[kind]][90])
    grid = [(dict(cx, BLOCK_M1=step, BLOCK_N2=step, WARP_SPECIALIZE=ws), dict(num_warps=nw, num_stages=ns))
            for step in BWD_STEPS for ws in (False, True) for nw in (4, 8) for ns in BWD_STOCK_STAGES[step]]
    return (cx, opts), grid


# The GEMM's stock tiles beyond 128 x 128: 128 x 256 at 8 warps (at 4 its
# accumulator alone is 256 registers per thread) and 2-4 stages (at 5 the
# ring exceeds the shared memory).
GEMM_WIDE_STAGES = (2, 3, 4)


def gemm_configs():
    base = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8)
    twill = (base, dict(num_warps=4, num_stages=3))
    grid = [(base, dict(num_warps=nw, num_stages=ns)) for nw in (4, 8) for ns in (2, 3, 4, 5)]
    grid += [(dict(base, BLOCK_N=256), dict(num_warps=8, num_stages=ns)) for ns in GEMM_WIDE_STAGES]
    return twill, grid


def name_of(kind, cx, opts):
    if kind.startswith("bwd"):
        # Steps other than 64 rows (the labels of the first runs) are named.
        m1, n2 = cx["BLOCK_M1"], cx["BLOCK_N2"]
        step = "" if (m1, n2) == (64, 64) else (f"b{m1} " if m1 == n2 else f"m{m1}n{n2} ")
        return f"{step}w{opts['num_warps']} s{opts['num_stages']}{' ws' if cx['WARP_SPECIALIZE'] else ''}"
    if kind.startswith("fa"):
        return (f"BN{cx['BLOCK_N']} w{opts['num_warps']} s{opts['num_stages']}{' ws' if cx['WARP_SPECIALIZE'] else ''}"
                + (" devdesc" if cx.get("DEVICE_DESC") else ""))
    tile = "" if cx.get("BLOCK_N", 128) == 128 else f"BN{cx['BLOCK_N']} "
    return f"{tile}w{opts['num_warps']} s{opts['num_stages']}"


def compile_kernel(kind, cx, opts):
    if kind.startswith("bwd"):
        src = fa_bwd.make_ast_source(**cx)
    elif kind.startswith("fa"):
        src = fa_fwd.make_ast_source(**cx)
    else:
        src = matmul.make_ast_source(**cx)
    return triton.compile(src, target=TARGET, options=opts)


def hopper_ws(cx, opts):
    """Whether Triton's Hopper warp specialization splits this FA
    configuration's loop (device-side descriptors, warp_specialize, 4 warps)."""
    return bool(cx.get("DEVICE_DESC") and cx.get("WARP_SPECIALIZE") and opts.get("num_warps") == 4)


def twill_compile(kind, cx, opts, extra="", compile=None, **enable):
    # `compile(kind, cx, opts)` builds the kernel (default: compile_kernel;
    # a probe passes its own kernel's). `enable`: more of
    # twill_triton.enable's arguments (the Gluon plans take twill's own
    # schedule of a loop, `ties="twill"`, whatever a tie would keep). FA loops marked warp_specialize are twill's default scope; the others
    # (the GEMM, FA at a configuration without warp specialization) need "all",
    # and so do the partition loops Triton's Hopper warp specialization leaves
    # (it runs before twill and splits the loop).
    scope = ("ws" if kind.startswith(("fa", "bwd")) and cx.get("WARP_SPECIALIZE") and not hopper_ws(cx, opts)
             else "all")
    twill_triton.enable(scope=scope, extra_options=extra, **enable)
    try:
        k = (compile or compile_kernel)(kind, cx, opts)
    finally:
        twill_triton.disable()
    d = twill_triton.decisions()[-1]
    return k, d


def twill_fresh(kind, cx, opts, extra="", compile=None):
    """`twill_compile` in a Triton cache of its own, so that the hook runs
    (and twill schedules) instead of Triton loading an earlier compile."""
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="twill-bench-cache-")
    return twill_compile(kind, cx, opts, extra, compile)


def _warm(job):
    """Compiles one stock kernel in a worker process, only to fill Triton's
    cache; errors show again in the main process."""
    kind, cx, opts = job
    try:
        compile_kernel(kind, cx, opts)
    except Exception:
        pass


def twill_variants(kind):
    """The twill variants run for a kind: (label, extra pass options,
    constexprs, options). Besides twill's own configuration (with and without
    one more stage of prefetch), FA kinds are also compiled with twill at the
    configuration that was best in the stock grid of the first runs (BLOCK_N
    64, 4 warps, 2 stages, no warp specialization), to separate twill's
    schedule from the choice of configuration."""
    (cx, opts), _ = dict(kinds_configs())[kind]
    out = [(label, extra, cx, opts) for label, extra in TWILL_VARIANTS
           if ALL_VARIANTS or label in DEFAULT_VARIANTS]
    if not ALL_VARIANTS:
        return out
    if kind.startswith("fa"):
        alt = dict(cx, BLOCK_N=64, WARP_SPECIALIZE=False)
        out.append(("twill at BN64 w4 s2", "", alt, dict(num_warps=4, num_stages=2)))
        # The same with the prefetched loads last in the body: one buffer
        # fewer, which lets two CTAs share an SM at this configuration.
        out.append(("twill at BN64 w4 s2 loads last", "loads=last", alt, dict(num_warps=4, num_stages=2)))
    return out


# twill's lowering (hook `lower=True`, docs/ws-lowering.md 3.7): an sm90
# loop becomes twill's warp-specialized code (a one-warp TMA producer, the
# compute in the default region), proved by the verifier before it is
# emitted; today loops with one compute group (the GEMM; its compute runs in
# the default region on the module's warps). The GEMM's candidates are its
# loop as written and as `tl.range(..., warp_specialize=True)` at 128 x 128
# tiles and 4 warps, and 128 x 256 tiles on 8 warps (two consumer warp
# groups; at 4 warps that accumulator alone needs 256 registers per
# thread). Every other kind is compiled with `lower=True` at its twill
# configuration (the FA forward: 8 warps, one compute group, lowered; the
# sub-tiled and causal kinds and the backward: refused today); its row says
# whether anything was lowered and is timed as the route the compile took.
LOWERED_ROW = "twill lowered"


def lowered_variants(kind):
    """(variant name, constexprs, options) of the lowered variants of `kind`."""
    (cx, opts), _ = dict(kinds_configs())[kind]
    if kind != "gemm":
        return [(f"{LOWERED_ROW} {name_of(kind, cx, opts)}", cx, opts)]
    opts = dict(opts, num_warps=4)
    wide, wide_opts = dict(cx, BLOCK_N=256, WARP_SPECIALIZE=True), dict(opts, num_warps=8)
    return [(f"{LOWERED_ROW} {name_of(kind, cx, opts)}", cx, opts),
            (f"{LOWERED_ROW} ws {name_of(kind, cx, opts)}", dict(cx, WARP_SPECIALIZE=True), opts),
            (f"{LOWERED_ROW} ws {name_of(kind, wide, wide_opts)}", wide, wide_opts)]


def lowered_compile(kind, cx, opts):
    """`twill_compile` with the lowering on: (kernel, decision, record,
    note). `record` (bench.gpu.sweep.lowering_record) says which loops were
    lowered and whether the verifier proved them (`ok`); `note` says it, or
    that nothing was lowered and which route the kernel took."""
    from bench.gpu import sweep

    k, d = twill_compile(kind, cx, opts, lower=True)
    rec = sweep.lowering_record(d)
    if rec["ok"]:
        note = f"twill lowered {', '.join(rec['lowered'])}, proved"
    elif rec["lowered"]:
        note = f"twill lowered {', '.join(rec['lowered'])} but NOT proved: {rec['lowered_verified']} {rec['verification']}"
    else:
        route = "twill's schedule (attribute route)" if d.scheduled else "Triton's own schedule"
        why = "; ".join(rec["refused"]) if d.lowering else "the lowering call emitted nothing"
        note = f"NOT lowered ({why[:160]}); timed as {route}"
    return k, d, rec, note


def slug(label):
    """A variant label as a directory name."""
    return label.replace(" ", "_")


def variant_key(kind, label):
    """The expected-schedules key (bench/gpu/expected.py) of twill variant
    `label` of `kind`."""
    return f"{slug(label)}/{kind}"


def choice_key(kind, label):
    """The expected-schedules key of choice candidate `label` of `kind`."""
    return f"choice/{kind}/{slug(label)}"


def choice_candidates(kind):
    """The configurations twill's model chooses from (twill_triton.configure):
    block sizes, warps, warp specialization, load placement (the pass's
    default, `loads=auto`: first, except in kernels with a loop that mixes descriptor and
    pointer loads, where every loop is rotated; for the backward, whose
    dK/dV loop mixes them, also with only that loop rotated (`rotate=loop`:
    the model ties the two, and configure takes the one with fewer spilled
    bytes); or every load last; among near ties the model takes
    loads that cover their modeled time) and, at 4 warps, the loop solved for one or two CTAs
    per SM (`ctas`: within half the SM's shared memory, loads as deep as an
    iteration takes with the SM shared). num_stages is left at 2: twill decides the stages
    of the loops it schedules. (An extra stage of prefetch was a candidate
    on 2026-11-24: never ahead in the model, and no better on the GPU; see
    NOTES.md.)"""
    (cx, opts), _ = dict(kinds_configs())[kind]
    out = []
    if kind.startswith("fa"):
        d = cx["HEAD_DIM"]
        shapes = [(dict(cx, BLOCK_N=bn, WARP_SPECIALIZE=ws), nw)
                  for bn in (64, 128) if bn <= d for nw, ws in ((4, False), (8, False), (8, True))]
    elif kind.startswith("bwd"):
        shapes = [(dict(cx, BLOCK_M1=step, BLOCK_N2=step, WARP_SPECIALIZE=ws), nw)
                  for step in BWD_STEPS for nw, ws in ((4, False), (8, False), (8, True))]
    else:
        shapes = [(dict(cx), nw) for nw in (4, 8)]
    if kind == "fa":
        # Triton's Hopper warp specialization: twill schedules each
        # partition's loop; the model runs them concurrently.
        shapes += [(dict(cx, BLOCK_N=bn, WARP_SPECIALIZE=True, DEVICE_DESC=True), 4) for bn in (64, 128)]
    for c, nw in shapes:
        # Two CTAs per SM in the objective (`ctas=2`) for the 4-warp shapes
        # without Triton's warp specialization (whose partitions add warps
        # the budget would not see); at 8 warps two CTAs leave 128 registers
        # per thread.
        both = nw == 4 and not c.get("WARP_SPECIALIZE")
        # (label suffix, pass options) of each load placement.
        placements = [("", ""), (" loads last", "loads=last")]
        if kind.startswith("bwd"):
            placements.insert(1, (" rotate loop", "rotate=loop"))
        for suffix, option in placements:
            for ctas in ((1, 2) if both else (1,)):
                o = dict(num_warps=nw, num_stages=2)
                extra = " ".join(x for x in (option, f"ctas={ctas}" if ctas > 1 else "") if x)
                label = name_of(kind, c, o) + suffix + (f" ctas{ctas}" if ctas > 1 else "")
                out.append(dict(label=label, cx=c, opts=o, extra=extra))
    return out


def model_problem(kind, size, cand):
    """(iteration count of each loop of one CTA, CTAs launched) of `kind` at
    `size` for the model (twill_triton.configure.rank)."""
    cx = cand["cx"]
    Z, H = FA_SHAPE["Z"], FA_SHAPE["H"]
    if kind.startswith("fa"):
        bm, bn = cx["BLOCK_M"], cx["BLOCK_N"]
        grid = Z * H * (size // bm)
        if cx.get("CAUSAL"):
            # Off-diagonal blocks (on average half the row), then the diagonal.
            return [((size // bm) - 1) / 2 * bm / bn, bm / bn], grid
        return [size / bn], grid
    if kind.startswith("bwd"):
        return [size / cx["BLOCK_M1"], size / cx["BLOCK_N2"]], (size // cx["BLOCK_N1"]) * Z * H
    return [size / cx["BLOCK_K"]], (size // cx["BLOCK_M"]) * (size // cx["BLOCK_N"])


def _mean_distinct(running, total, key, samples=64):
    """Mean number of distinct key(pid) over windows of `running`
    consecutive program ids (the CTAs resident at once in the steady state:
    the hardware dispatches CTAs in launch order), sampled at `samples`
    window positions."""
    running = max(1, min(running, total))
    starts = sorted({(total - running) * i // max(1, samples - 1) for i in range(samples)})
    return sum(len({key(p) for p in range(s0, s0 + running)}) for s0 in starts) / len(starts)


def panel_bytes(kind, size, cand, running):
    """Bytes of the operand panels that `running` concurrently running CTAs
    of `kind` at `size` share (twill_triton.configure's L2 check): a GEMM's
    A row panels and B column panels of the running tiles (GROUP_M order,
    K = size), an attention kernel's K and V (forward) or Q, dO, K and V
    (backward) of the heads the running CTAs cover (x = the query or key
    block, fastest in launch order)."""
    cx = cand["cx"]
    if kind == "gemm":
        bm, bn, gm = cx["BLOCK_M"], cx["BLOCK_N"], cx["GROUP_M"]
        tm, tn = size // bm, size // bn

        def tile(pid):
            first = (pid // (gm * tn)) * gm
            rows = min(tm - first, gm)
            return first + (pid % (gm * tn)) % rows, (pid % (gm * tn)) // rows

        rows = _mean_distinct(running, tm * tn, lambda p: tile(p)[0])
        cols = _mean_distinct(running, tm * tn, lambda p: tile(p)[1])
        return int((rows * bm + cols * bn) * size * 2)
    d = cx.get("HEAD_DIM", FA_SHAPE["D"])
    per_head = size // (cx["BLOCK_N1"] if kind.startswith("bwd") else cx["BLOCK_M"])
    heads = _mean_distinct(running, per_head * FA_SHAPE["Z"] * FA_SHAPE["H"], lambda p: p // per_head)
    tensors = 4 if kind.startswith("bwd") else 2
    return int(heads * tensors * size * d * 2)


def kind_sizes(kind):
    return GEMM_SIZES if kind == "gemm" else FA_SIZES


def kinds_configs():
    return ([(k, fa_configs(k)) for k in FA_KINDS] + [(k, bwd_configs(k)) for k in BWD_KINDS]
            + [("gemm", gemm_configs())])


# The kinds a run covers (--kinds; None: all).
KINDS_ONLY = None


def selected(kind):
    return KINDS_ONLY is None or kind in KINDS_ONLY


def kinds():
    """(kind, (twill config, stock grid)) of every kernel benchmarked (those
    of --kinds)."""
    return [(k, c) for k, c in kinds_configs() if selected(k)]


def kernel_name(kind):
    """A kind's kernel name in the rows."""
    return FA_ROWS.get(kind) or ("fa_" + kind if kind in BWD_KINDS else "matmul")


ALL_VARIANTS = False
CHOICE = PLANS / "choice.json"


def record_choice(expect):
    """Compiles every candidate configuration with twill, compares each
    one's schedules with `expect` (bench/gpu/expected.py), ranks them with
    twill's model per problem size and writes the choice and the ranking
    to CHOICE. Returns (the choice, per candidate key its loop summaries,
    the differences)."""
    from twill_triton import configure

    choice, schedules, diffs = {}, {}, []
    for kind, _ in kinds():
        def compile_with_twill(cand, kind=kind):
            k, d = twill_fresh(kind, cand["cx"], cand["opts"], cand["extra"])
            key = choice_key(kind, cand["label"])
            schedules[key] = expected.summaries(d)
            diff = expected.compare(expect, key, schedules[key])
            if diff:
                diffs.append(diff)
                print("DIFFERENT:", diff, flush=True)
            return k, d

        compiled = configure.compile_candidates(choice_candidates(kind), compile_with_twill)
        for size in kind_sizes(kind):
            ranking = configure.rank(compiled, lambda c: model_problem(kind, size, c)[0],
                                     lambda c: model_problem(kind, size, c)[1],
                                     panels=lambda c, running: panel_bytes(kind, size, c, running))
            best = ranking[0]
            if not best.scheduled or math.isinf(best.time):
                print(f"{kind} {size}: no candidate has a modeled time ({best.reason}); no choice", flush=True)
                continue
            choice.setdefault(kind, {})[str(size)] = dict(
                label=best.candidate["label"], cx=best.candidate["cx"], opts=best.candidate["opts"],
                extra=best.candidate["extra"], model_cycles=best.time,
                ranking=[dict(label=r.candidate["label"], model_cycles=r.time, summary=r.summary())
                         for r in ranking])
            print(f"{kind} {size}: twill's choice {best.candidate['label']}: {best.summary()}")
            for r in ranking[1:4]:
                print(f"    then {r.candidate['label']}: {r.summary()}")
    CHOICE.parent.mkdir(parents=True, exist_ok=True)
    CHOICE.write_text(json.dumps(choice, indent=1, default=str))
    return choice, schedules, diffs


# twill's Hopper FA forward schedule lowered to Gluon (fa_fwd_gluon): the
# graph of the sub-tiled loop as the Gluon kernel runs it, twill's joint
# schedule of it, the same problem under Triton 3.6's last-stage rule, and
# the plan the kernel is compiled with (plan.json). Made by --plans (the
# `twill` solver is not in the wheel), per Triton version.
GLUON = PLANS / "gluon"
GLUON_ROW = "twill gluon (joint schedule)"


# The Gluon plans recorded (directory under GLUON: the sub-tiled FA
# configuration of fa_fwd.CONFIGS whose loop twill reads, and changes to
# it): the bench's head dim 128, head dim 64 at BLOCK_N 64 (the Triton
# kernel whose loop twill reads allows BLOCK_N <= HEAD_DIM only), and the
# causal forward at head dim 128, whose kernel has two loops (the K blocks
# left of the diagonal, then the diagonal's, masked). bench_all measures
# each (the rows named GLUON_ROW; GLUON_KINDS); bench/gpu/probe/
# fa_gluon_probe.py --head-dim 64 sets the head-dim-64 plan next to its
# variants.
GLUON_PLANS = {"": ("subtile", {}), "hd64": ("subtile", dict(HEAD_DIM=64, BLOCK_N=64)),
               "causal": ("causal_subtile", {})}
# The bench's FA kinds (FA_KINDS) each plan is measured on. The plan of the
# sub-tiled loop is the fa_subtile kind's own schedule, and fa computes the
# same function with the loop not sub-tiled: both get it.
GLUON_KINDS = {"fa": "", "fa_subtile": "", "fa_hd64": "hd64", "fa_causal": "causal"}


def twill_binaries(who):
    """(twill-opt, twill) of this checkout's build, or SystemExit naming `who`."""
    twill_opt = twill_triton.hook._find_twill_opt()
    twill = str(Path(twill_opt).with_name("twill")) if twill_opt else None
    if not twill_opt or not os.path.exists(twill):
        raise SystemExit(f"{who} needs twill-opt and twill (cargo build --release)")
    return twill_opt, twill


def record_gluon():
    """Exports the sub-tiled FA forward loop from its TTGIR at the
    scheduling point (sm90, the bench's sub-tile configuration and each of
    GLUON_PLANS), solves it with twill as the Gluon kernel runs it (two
    compute groups of one warpgroup, CONSUMER_REGS registers each, no
    last-stage pins) and writes the plans to GLUON/plan.json (head dim
    128) and GLUON/hd64/plan.json (fa_fwd_gluon_plan), each with the CTAs
    per SM twill's model chooses per size (`gluon_occupancy`: the plan
    solved again within each occupancy's registers)."""
    import shutil

    twill_opt, twill = twill_binaries("record_gluon")
    if GLUON.exists():
        shutil.rmtree(GLUON)
    for sub, (cfg_name, changes) in GLUON_PLANS.items():
        record_gluon_plan(twill_opt, twill, GLUON / sub if sub else GLUON, cfg_name, changes)
    record_gluon_gemm(twill_opt, twill, GLUON / "gemm")
    for sub, (cfg_name, changes) in GLUON_BWD_PLANS.items():
        record_gluon_bwd(twill_opt, twill, GLUON / sub, cfg_name, changes)


def record_gluon_only(sub):
    """One of record_gluon's plans (GLUON_PLANS' `sub`, or "gemm"), the
    others untouched."""
    import shutil

    twill_opt, twill = twill_binaries("record_gluon")
    if sub == "gemm":
        shutil.rmtree(GLUON / "gemm", ignore_errors=True)
        record_gluon_gemm(twill_opt, twill, GLUON / "gemm")
        return
    if sub in GLUON_BWD_PLANS:
        shutil.rmtree(GLUON / sub, ignore_errors=True)
        record_gluon_bwd(twill_opt, twill, GLUON / sub, *GLUON_BWD_PLANS[sub])
        return
    if sub not in GLUON_PLANS or not sub:
        raise SystemExit(f"no Gluon plan {sub!r} to record alone (one of {[k for k in GLUON_PLANS if k]}, gemm, "
                         f"{', '.join(GLUON_BWD_PLANS)})")
    shutil.rmtree(GLUON / sub, ignore_errors=True)
    record_gluon_plan(twill_opt, twill, GLUON / sub, *GLUON_PLANS[sub])


# The FA backward's Gluon plans (fa_bwd_gluon_plan): directory under GLUON ->
# fa_bwd.CONFIGS entry whose two loops twill reads. bench_all measures the
# plan (GLUON_BWD_KINDS: both head dims, since the model charges
# shared-memory bandwidth and completes the rows kernel's dQ within its
# iteration, 2026-11-26; the plan carries its launch,
# fa_bwd_gluon_plan.launch_plan), and bench/gpu/probe/gluon_bwd_probe.py
# sets it next to its ablations.
# The dQ loop is read sub-tiled (DQ_SUBTILE: two halves of 64 query rows,
# which twill gives a group each) at 128-key steps, the tile measured
# fastest for the Gluon kernel (64-key steps: 0.93-0.95 of it, on 3.6,
# H100, 2026-11-26); the loops as fa_bwd's configuration writes them are solved and
# recorded next to the plan ("as_written").
GLUON_BWD_PLANS = {"bwd_hd128": ("hd128", dict(DQ_SUBTILE=True, BLOCK_N2=128)),
                   "bwd_hd64": ("hd64", dict(DQ_SUBTILE=True, BLOCK_N2=128))}


def record_gluon_bwd(twill_opt, twill, out, cfg_name, changes):
    """The Gluon backward's plan: exports the two loops of fa_bwd's
    configuration `cfg_name` with `changes` (sm90) at the scheduling point,
    solves each as the Gluon kernel runs it (two 4-warp compute groups of
    CONSUMER_REGS registers, no last-stage pins) and writes graphs,
    schedules and plan.json (fa_bwd_gluon_plan.plan_from_schedules, or the
    refusal) to `out`; the same for the configuration without `changes`
    under "as_written" (files suffixed _as_written)."""
    from bench.kernels import fa_bwd_gluon

    out.mkdir(parents=True)
    record = solve_gluon_bwd(twill_opt, twill, out, cfg_name, changes, "")
    record["as_written"] = solve_gluon_bwd(twill_opt, twill, out, cfg_name, {}, "_as_written")
    record["consumer_regs"] = fa_bwd_gluon.DEFAULT_CONFIG["CONSUMER_REGS"]
    (out / "plan.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"gluon backward plan {cfg_name}: {record['plan'] or 'refused: ' + record['refused']}; "
          f"as written: {record['as_written']['plan'] or 'refused: ' + record['as_written']['refused']}")


def gluon_bwd_fits(cfg):
    """Whether both Gluon backward kernels at `cfg` compile for sm_90 within
    the shared memory of the H100 model (machines/h100.toml, memory.smem)."""
    import tomllib

    from bench.kernels import fa_bwd_gluon
    from triton.backends.compiler import GPUTarget

    limit = tomllib.loads((REPO / "machines" / "h100.toml").read_text())["memory"]["smem"]["capacity"]
    try:
        kernels = fa_bwd_gluon.compile_for(GPUTarget("cuda", 90, 32), **cfg)
    except Exception as e:  # out of resources at compile time
        print(f"  {cfg}: does not compile ({type(e).__name__})", flush=True)
        return False
    return all(k.metadata.shared <= limit for k in kernels)


def solve_gluon_bwd(twill_opt, twill, out, cfg_name, changes, suffix):
    """record_gluon_bwd's work for one configuration: graphs and schedules
    to `out` (file names with `suffix`), the record returned."""
    import re

    from bench.kernels import fa_bwd_gluon
    from bench.kernels import fa_bwd_gluon_plan as B

    P = fa_fwd_gluon_plan
    cx, opts = fa_bwd.split_config(dict(fa_bwd.CONFIGS[cfg_name][90], **changes))
    tmp = Path(tempfile.mkdtemp(prefix="twill-gluon-bwd-"))
    os.environ["TRITON_CACHE_DIR"] = str(tmp / "cache")
    _, d = twill_compile("bwd_" + cfg_name, cx, opts, dump_dir=str(tmp / "dump"), ties="twill")
    ttgir = Path(d.dump) / "input.mlir"
    graphs = B.gluon_bwd_graphs(twill_opt, ttgir, tmp / "graphs")
    warps = int(re.search(r'"ttg.num-warps" = (\d+)', ttgir.read_text()).group(1))
    regs = fa_bwd_gluon.DEFAULT_CONFIG["CONSUMER_REGS"]
    scheds, loaded, brief = {}, {}, {}
    for loop in ("dkdv", "dq"):
        name = f"graph_{loop}{suffix}.toml"
        (out / name).write_text(graphs[loop].read_text())
        scheds[loop] = P.solve(twill, out / name, regs)
        (out / f"schedule_{loop}{suffix}.json").write_text(json.dumps(scheds[loop], indent=1))
        loaded[loop] = P.load_graph(out / name)
        j = scheds[loop]
        brief[loop] = {k: j[k] for k in ("ii", "length", "stages", "proven", "ii_proven", "res_mii", "seconds")}
        brief[loop]["groups"] = j["warp_specialization"]["groups"]
    shape = dict(HEAD_DIM=cx["HEAD_DIM"], BLOCK_M1=cx["BLOCK_M1"], BLOCK_N2=cx["BLOCK_N2"])
    record = dict(triton=triton.__version__, kernel_config=cx, options=opts, graph_warps=warps, schedule=brief,
                  commands=[f"twill-opt input.mlir --twill-export-graph='dir=. arch=sm90 scope=all'  # {cx}"]
                  + [f"twill solve graph_{loop}{suffix}.toml --groups 2 --reg-limit {regs} --u 30 --timeout 120 "
                     f"--objective {P.OBJECTIVE} --json" for loop in ("dkdv", "dq")])
    try:
        record["plan"] = dict(shape, **B.plan_from_schedules(scheds["dkdv"], loaded["dkdv"], scheds["dq"],
                                                             loaded["dq"]))
        if not suffix:
            record["plan"] = B.launch_plan(record["plan"], gluon_bwd_fits)
        record["schedule_facts"] = {"dkdv": B.describe(scheds["dkdv"], loaded["dkdv"], "dkdv"),
                                    "dq": B.describe(scheds["dq"], loaded["dq"], B.dq_loop_kind(loaded["dq"]))}
    except B.PlanError as e:
        record["plan"], record["refused"] = None, str(e)
    return record


def record_gluon_plan(twill_opt, twill, out, cfg_name, changes):
    """One plan of record_gluon: the configuration `cfg_name` of
    fa_fwd.CONFIGS (sub-tiled) with `changes`, written to `out`. A causal
    kernel has two loops, the K blocks left of the diagonal (all but
    BLOCK_M / BLOCK_N iterations of a CTA) and the diagonal's, masked: the
    plan is the first loop's schedule, and the second's is solved and
    recorded next to it (the kernel runs both with the plan's flags)."""
    import re

    P = fa_fwd_gluon_plan
    cx, opts = fa_fwd.split_config(fa_fwd.CONFIGS[cfg_name][90])
    cx = dict(cx, **changes)
    causal = bool(cx.get("CAUSAL"))
    tmp = Path(tempfile.mkdtemp(prefix="twill-gluon-"))
    os.environ["TRITON_CACHE_DIR"] = str(tmp / "cache")
    _, d = twill_compile("fa_subtile", cx, opts, dump_dir=str(tmp / "dump"), ties="twill")
    ttgir = Path(d.dump) / "input.mlir"
    graphs = P.gluon_graphs(twill_opt, ttgir, tmp / "graphs")
    pinned_graphs = P.gluon_graphs(twill_opt, ttgir, tmp / "pinned", pinned=True)
    if len(graphs) != 1 + causal:
        raise SystemExit(f"expected {1 + causal} loop graph(s), got {len(graphs)}")
    warps = int(re.search(r'"ttg.num-warps" = (\d+)', ttgir.read_text()).group(1))
    regs = fa_fwd_gluon.DEFAULT_CONFIG["CONSUMER_REGS"]
    out.mkdir(parents=True)
    (out / "graph.toml").write_text(graphs[0].read_text())
    (out / "graph_triton36_rule.toml").write_text(pinned_graphs[0].read_text())
    sched = P.solve(twill, out / "graph.toml", regs)
    shortest = P.solve(twill, out / "graph.toml", regs, objective="length")
    pinned = P.solve(twill, out / "graph_triton36_rule.toml", regs)
    (out / "schedule.json").write_text(json.dumps(sched, indent=1))
    (out / "schedule_length.json").write_text(json.dumps(shortest, indent=1))
    (out / "schedule_triton36_rule.json").write_text(json.dumps(pinned, indent=1))
    graph = P.load_graph(out / "graph.toml")
    # The kernel's shape constexprs go with the plan's flags.
    shape = {k: cx[k] for k in ("HEAD_DIM", "BLOCK_N")}
    if causal:
        shape["CAUSAL"] = True
    plan = dict(shape, **P.plan_from_schedule(sched, graph))

    def brief(j):
        b = {k: j[k] for k in ("ii", "length", "stages", "proven", "ii_proven", "res_mii", "seconds")}
        b["latency_slack"] = j["warp_specialization"].get("latency_slack")
        return b

    diagonal = None
    if causal:
        # The diagonal loop, solved alike and recorded. It runs BLOCK_M /
        # BLOCK_N iterations per CTA (one at the bench's tiles): no steady
        # state for its modulo schedule to shape, so the kernel runs those
        # iterations with the first loop's flags (PlanError: the diagonal
        # schedule's own flags would not matter either way).
        (out / "graph_diagonal.toml").write_text(graphs[1].read_text())
        diag = P.solve(twill, out / "graph_diagonal.toml", regs)
        (out / "schedule_diagonal.json").write_text(json.dumps(diag, indent=1))
        diag_graph = P.load_graph(out / "graph_diagonal.toml")
        diagonal = dict(iterations_per_cta=cx["BLOCK_M"] // cx["BLOCK_N"],
                        schedule=brief(diag))
        try:
            diagonal["plan"] = dict(shape, **P.plan_from_schedule(diag, diag_graph))
            diagonal["schedule_facts"] = P.describe(diag, diag_graph)
        except P.PlanError as e:
            diagonal["plan"], diagonal["refused"] = None, str(e)

    # The paper's objective (the shortest L) at the same I: the ablation of
    # the GPU run, or why the kernel cannot lower that schedule (3.9's
    # head-dim-64 loop: the groups' turns start with different wgmmas).
    try:
        short = dict(plan=dict(shape, **P.plan_from_schedule(shortest, graph)),
                     schedule_facts=P.describe(shortest, graph))
    except P.PlanError as e:
        short = dict(plan=None, refused=str(e))
    short["schedule"] = brief(shortest)
    record = dict(plan=plan, schedule_facts=P.describe(sched, graph), triton=triton.__version__,
                  kernel_config=cx, options=opts, graph_warps=warps,
                  consumer_regs=regs, schedule=brief(sched), triton36_rule=brief(pinned),
                  objective_length=short,
                  commands=["twill-opt input.mlir --twill-export-graph='dir=. arch=sm90'",
                            f"twill solve graph.toml --groups 2 --reg-limit {regs} --u 30 --timeout 120 "
                            f"--objective {P.OBJECTIVE} --json",
                            f"twill solve graph.toml --groups 2 --reg-limit {regs} --u 30 --timeout 120 "
                            f"--objective length --json",
                            f"twill solve graph_triton36_rule.toml --groups 2 --reg-limit {regs} --u 30 "
                            f"--timeout 120 --objective {P.OBJECTIVE} --json"])
    if diagonal:
        record["diagonal"] = diagonal
        record["commands"].append(f"twill solve graph_diagonal.toml --groups 2 --reg-limit {regs} --u 30 "
                                  f"--timeout 120 --objective {P.OBJECTIVE} --json")
    record["occupancy"] = gluon_occupancy(twill, out, graph, sched, plan, d.report, regs)
    (out / "plan.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"gluon plan {plan}: I = {sched['ii']} (ResMII {sched['res_mii']}, proven {sched['proven']}), "
          f"under Triton 3.6's rule I = {pinned['ii']} (proven {pinned['proven']}); CTAs per SM by size "
          f"{ {n: m['ctas'] for n, m in record['occupancy']['model'].items()} }")


def compiled_fit(compile, warps, occ):
    """Compiles a Gluon kernel for sm90 (`compile(TARGET)`) and reads what
    decides its occupancy: (None, {shared, regs, spill_bytes, ctas_fit})
    with `occ`'s CTAs per SM for a CTA of `warps` warps, or (why, {}) where
    ptxas refuses it, in ptxas's own words (its "fatal" lines, not the
    repro command)."""
    from twill_triton import configure as C

    try:
        k = compile(TARGET)
    except PTXASError as e:
        fatal = [ln.strip() for ln in str(e).splitlines() if "fatal" in ln]
        return f"does not compile: {fatal[0] if fatal else str(e).strip()[:200]}", {}
    kregs, frame = C.cubin_resources(k.asm["cubin"])
    return None, dict(shared=int(k.metadata.shared), regs=kregs, spill_bytes=frame,
                      ctas_fit=occ.ctas(int(k.metadata.shared), kregs, warps))


# CTAs per SM the Gluon plans are tried at (fa_fwd_gluon.register_split).
GLUON_CTAS = (1, 2)


def gluon_occupancy(twill, out, graph, sched, plan, report, regs):
    """The Gluon plan's CTAs per SM, chosen by twill's configuration model
    per bench size (fa_fwd_gluon_plan.occupancy_model). An occupancy is an
    option where the kernel, at that occupancy's register split
    (fa_fwd_gluon.register_split), compiles for sm90 without spills and
    fits that many times on an SM (twill_triton.configure's occupancy
    table), and twill finds a schedule within its registers that the kernel
    lowers with the same flags (the plan's schedule at one CTA). The loop's
    raw cycles per unit and the CTA's code outside the loop come from the
    pass's report on the Triton kernel the loop was read from. A causal
    kernel's CTAs run from BLOCK_M / BLOCK_N to N_CTX / BLOCK_N iterations
    (two loops, the first's unit cycles taken for both); the model takes
    their mean."""
    from twill_triton import configure as C

    P = fa_fwd_gluon_plan
    occ = C.machine_occupancy("h100")
    loops = C.loops_of(report)
    causal = bool(plan.get("CAUSAL"))
    if len(loops) != 1 + causal or not loops[0].units:
        raise SystemExit(f"expected {1 + causal} scheduled loop(s) with unit cycles in the report, got "
                         f"{len(loops)}")
    unit_cycles, outside = max(loops[0].units.values()), C.outside_cycles(report)
    options, facts = {}, {}
    for c in GLUON_CTAS:
        changes, limit = fa_fwd_gluon.register_split(c)
        fact = dict(config=changes, group_regs=limit)
        facts[str(c)] = fact
        why, got = compiled_fit(lambda t: fa_fwd_gluon.compile_for(t, **dict(plan, **changes)),
                                fa_fwd_gluon.CTA_WARPS, occ)
        if why:
            fact["refused"] = why
            continue
        fact.update(got)
        frame, fits = got["spill_bytes"], got["ctas_fit"]
        if frame or fits < c:
            fact["refused"] = f"{frame} bytes spilled" if frame else f"{fits} CTAs fit per SM"
            continue
        try:
            s = sched if limit == regs else P.solve(twill, out / "graph.toml", limit)
            flags = P.plan_from_schedule(s, graph)
        except P.PlanError as e:
            fact["refused"] = str(e)[:300]
            continue
        if any(plan[key] != v for key, v in flags.items()):
            fact["refused"] = f"twill's schedule within {limit} registers is another plan: {flags}"
            continue
        fact.update(ii=s["ii"], length=s["length"], proven=s["proven"])
        options[c] = s
    bm = fa_fwd_gluon.DEFAULT_CONFIG["BLOCK_M"]

    def iterations(n):
        if causal:  # CTA m runs (m + 1) * BLOCK_M / BLOCK_N iterations, m < n / BLOCK_M: their mean
            return (n // bm + 1) / 2 * (bm // plan["BLOCK_N"])
        return n // plan["BLOCK_N"]

    problems = {str(n): ((n // bm) * FA_SHAPE["Z"] * FA_SHAPE["H"], iterations(n)) for n in FA_SIZES}
    model = P.occupancy_model(options, unit_cycles, outside, problems, occ.sms)
    for m in model.values():
        m["cycles"] = {str(c): t for c, t in m["cycles"].items()}
    return dict(unit_cycles=unit_cycles, outside_cycles=outside, options=facts, model=model)


# The GEMM's Gluon plans (matmul_gluon_plan): the sub-tiled loop read at each
# tile width (the Triton path's warps there: 4 at 128 columns, 8 at 256),
# solved with the register limit of two consumer groups (the smaller
# budget; one group gets more), tried at these CTAs per SM.
GEMM_GLUON_TILES = {128: 4, 256: 8}
GEMM_GLUON_CTAS = (1, 2)


def record_gluon_gemm(twill_opt, twill, out):
    """The Gluon GEMM's plans, one per tile width of GEMM_GLUON_TILES
    (`out`/bn<width>/: graph, schedule), and per bench size the one twill's
    model chooses (matmul_gluon_plan.choose_tile), in `out`/plan.json."""
    from twill_triton import configure as C

    P = matmul_gluon_plan
    out.mkdir(parents=True)
    occ = C.machine_occupancy("h100")
    cands = {}
    for bn, warps in GEMM_GLUON_TILES.items():
        cands[str(bn)] = record_gluon_gemm_tile(twill_opt, twill, out / f"bn{bn}", bn, warps, occ)
    model = {}
    for size in GEMM_SIZES:
        cycles, rooms = {}, {}
        for bn, c in cands.items():
            sched = json.loads((out / f"bn{bn}" / "schedule.json").read_text())
            cycles[int(bn)] = P.persistent_cycles(sched, c["unit_cycles"], c["outside_cycles"],
                                                  (size // matmul_gluon.BLOCK_M) * (size // int(bn)),
                                                  size // c["plan"]["BLOCK_K"], occ.sms, c["plan"]["CTAS"])
            rooms[int(bn)] = P.headroom(c["units"])
        choice = P.choose_tile(cycles, rooms, C.MODEL_TOLERANCE)
        model[str(size)] = dict(cycles={str(t): v for t, v in cycles.items()},
                                headroom={str(t): v for t, v in rooms.items()}, tile=choice)
    record = dict(triton=triton.__version__, candidates=cands, model=model,
                  commands=["twill-opt input.mlir --twill-export-graph='dir=. arch=sm90 scope=all'",
                            "twill solve graph.toml --groups 2 --reg-limit R --u 30 --timeout 120 "
                            f"--objective {fa_fwd_gluon_plan.OBJECTIVE} --json"])
    (out / "plan.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"gluon gemm: tiles by size { {n: m['tile'] for n, m in model.items()} }, modeled "
          f"{ {n: m['cycles'] for n, m in model.items()} }")


def record_gluon_gemm_tile(twill_opt, twill, out, block_n, warps, occ):
    """One tile width of record_gluon_gemm: exports the sub-tiled loop
    (matmul.matmul_tma_subtile_kernel at BLOCK_N `block_n`, sm90, `warps`
    warps) from its TTGIR, solves the joint problem with two compute groups,
    and returns the plan: the flags twill's schedule fixes and, per
    occupancy, the deepest ring that compiles without spills and fits (or
    why none does); the plan runs at the most CTAs per SM whose ring holds
    what the schedule needs."""
    import re

    from twill_triton import configure as C

    P = matmul_gluon_plan
    (base, _), _ = gemm_configs()
    cx = dict(base, BLOCK_N=block_n, SUBTILE=True)
    opts = dict(num_warps=warps, num_stages=3)
    tmp = Path(tempfile.mkdtemp(prefix="twill-gluon-gemm-"))
    os.environ["TRITON_CACHE_DIR"] = str(tmp / "cache")
    _, d = twill_compile("gemm", cx, opts, dump_dir=str(tmp / "dump"), ties="twill")
    ttgir = Path(d.dump) / "input.mlir"
    graphs = fa_fwd_gluon_plan.gluon_graphs(twill_opt, ttgir, tmp / "graphs", scope="all")
    loops = C.loops_of(d.report)
    if len(graphs) != 1 or len(loops) != 1 or not loops[0].units:
        raise SystemExit(f"expected one loop graph with unit cycles, got {len(graphs)} graphs, {len(loops)} loops")
    graph_warps = int(re.search(r'"ttg.num-warps" = (\d+)', ttgir.read_text()).group(1))
    _, regs = matmul_gluon.register_split(1, consumers=2)
    out.mkdir(parents=True)
    (out / "graph.toml").write_text(graphs[0].read_text())
    sched = P.solve(twill, out / "graph.toml", regs)
    (out / "schedule.json").write_text(json.dumps(sched, indent=1))
    graph = P.load_graph(out / "graph.toml")
    flags = P.plan_from_schedule(sched, graph)
    shape = dict(BLOCK_N=block_n, BLOCK_K=base["BLOCK_K"], GROUP_M=base["GROUP_M"])
    options, chosen = {}, None
    for c in GEMM_GLUON_CTAS:
        split, limit = matmul_gluon.register_split(c, consumers=flags["CONSUMERS"])
        fact = dict(config=split, group_regs=limit)
        options[str(c)] = fact
        tried = {}

        def fits(stages, c=c, split=split, tried=tried):
            cfg = dict(shape, CONSUMERS=flags["CONSUMERS"], STAGES=stages, **split)
            why, got = compiled_fit(lambda t: matmul_gluon.compile_for(t, **cfg),
                                    matmul_gluon.cta_warps(flags["CONSUMERS"]), occ)
            tried[stages] = why or got
            return not why and got["spill_bytes"] == 0 and got["ctas_fit"] >= c

        try:
            fact["stages"] = P.deepest_ring(fits, flags["MIN_STAGES"])
            chosen = c
        except P.PlanError as e:
            fact["refused"] = str(e)
        fact["tried"] = {str(s): t for s, t in tried.items()}
    if chosen is None:
        raise SystemExit(f"no occupancy holds the BLOCK_N {block_n} GEMM plan's ring: {options}")
    plan = dict(shape, CONSUMERS=flags["CONSUMERS"], PERSISTENT=True, STAGES=options[str(chosen)]["stages"],
                CTAS=chosen, **options[str(chosen)]["config"])
    print(f"gluon gemm plan BLOCK_N {block_n}: {plan}: I = {sched['ii']} (ResMII {sched['res_mii']}, proven "
          f"{sched['proven']}), needs {flags['MIN_STAGES']} slots; occupancies "
          f"{ {c: o.get('stages') or o.get('refused') for c, o in options.items()} }")
    return dict(plan=plan, schedule_facts=P.describe(sched, graph), min_stages=flags["MIN_STAGES"],
                kernel_config=cx, options=opts, graph_warps=graph_warps, consumer_regs=regs,
                schedule={k: sched[k] for k in ("ii", "length", "stages", "proven", "ii_proven", "res_mii",
                                                "seconds")},
                units=loops[0].units, unit_cycles=max(loops[0].units.values()),
                outside_cycles=C.outside_cycles(d.report), remarks=d.remarks, occupancy=options)


def gluon_config(gluon, size):
    """The kernel configuration of a recorded Gluon plan at `size`: its
    flags, and the register split recorded for the CTAs per SM the model
    chose there (the split that was checked for spills and fit; one CTA,
    the kernel's default split, where the recording has no choice)."""
    occ = gluon.get("occupancy") or {}
    c = (occ.get("model") or {}).get(str(size), {}).get("ctas", 1)
    split = (occ.get("options") or {}).get(str(c), {}).get("config") or fa_fwd_gluon.register_split(1)[0]
    return dict(gluon["plan"], **split)


def load_gluon_plan(sub=""):
    path = (GLUON / sub if sub else GLUON) / "plan.json"
    return json.loads(path.read_text()) if path.exists() else None


def load_choice():
    return json.loads(CHOICE.read_text()) if CHOICE.exists() else {}


def gluon_plans():
    """Every Gluon plan of GLUON (directory under it -> plan.json)."""
    return {("" if p.parent == GLUON else p.parent.relative_to(GLUON).as_posix()): json.loads(p.read_text())
            for p in sorted(GLUON.rglob("plan.json"))}


def plans(bless=False):
    """--plans: the Gluon plans and the model's choice into PLANS, every
    twill compile of the bench compared with the expected file; with
    `bless`, the expected file is rewritten instead. Exits 1 on a
    difference."""
    expect = expected.load() or {}
    record_gluon()
    choice, schedules, diffs = record_choice(expect)
    for kind, _ in kinds():
        for label, extra, cx, opts in twill_variants(kind):
            _, d = twill_fresh(kind, cx, opts, extra)
            key = variant_key(kind, label)
            schedules[key] = expected.summaries(d)
            print(label, kind, "scheduled" if d.scheduled else f"NOT scheduled: {d.reason}")
            for r in d.remarks:
                print("  ", r.split("remark: ", 1)[-1])
            diffs.append(expected.compare(expect, key, schedules[key]))
    chosen = {k: {s: v["label"] for s, v in by.items()} for k, by in choice.items()}
    gluon = {sub: expected.strip_plan(p) for sub, p in gluon_plans().items()}
    diffs.append(None if chosen == expect.get("choice") else f"choice: expected {expect.get('choice')}, got {chosen}")
    for sub in sorted(set(gluon) | set(expect.get("gluon") or {})):
        if gluon.get(sub) != (expect.get("gluon") or {}).get(sub):
            diffs.append(f"gluon plan {sub or '(fa)'}: differs from the expected one")
    diffs = [d for d in diffs if d]
    print("plans written under", PLANS)
    if bless:
        old = expect.get("schedules") or {}
        # A compile that is one of its known alternatives keeps them all.
        merged = {k: old[k] if v in old.get(k, []) else [v] for k, v in schedules.items()}
        # Keys --plans does not compile (the lowered variants, blessed by
        # bench/tests with TWILL_BLESS=1) are kept.
        merged.update({k: v for k, v in old.items() if k not in merged})
        expected.save(dict(schedules=merged, choice=chosen, gluon=gluon))
        print("expected schedules written:", expected.path())
    elif diffs:
        print(f"{len(diffs)} difference(s) from {expected.path()}:", *diffs, sep="\n  ")
        raise SystemExit(1)
    else:
        print(f"every schedule, the choice and the Gluon plans are those of {expected.path()}")


# --------------------------------------------------------------------------
# GPU side.
# --------------------------------------------------------------------------
# Paired timing: rounds of alternating medians, each median over at least
# PAIRED_CALLS calls. With do_bench's 100 ms a 16k attention call (20-35
# ms) gave a median of 3-5 samples, and the SM clock dips now and then:
# one H100 run measured one kernel at 21.2-22.6 ms within one paired row
# (fa_fwd_hd64 16k, a 0.959 "ratio" between configurations the first pass
# had within 0.5%).
PAIRED_ROUNDS, PAIRED_CALLS = 5, 20


def nvdisasm():
    """The nvdisasm beside the ptxas Triton uses (on the H100 the carried
    3.9 tree has no CUDA binaries; TRITON_PTXAS_PATH names the 3.6 wheel's
    ptxas), else the wheel's own, else one on PATH."""
    import shutil
    ptxas = os.environ.get("TRITON_PTXAS_PATH")
    ptxas = shutil.which(ptxas) if ptxas else None
    for bins in ([Path(ptxas).parent] if ptxas else []) + [Path(triton.__file__).parent / "backends" / "nvidia" / "bin"]:
        if (bins / "nvdisasm").is_file():
            return str(bins / "nvdisasm")
    return shutil.which("nvdisasm") or "nvdisasm"


def sass_lines(cubin):
    """A cubin's instructions and labels as nvdisasm prints them, without
    addresses. Two compilations of the same code agree here even where their
    cubins differ in bytes (the line tables name the source file's path,
    which differs between a recorded schedule and a compile on the GPU
    machine)."""
    import re
    import subprocess
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([str(nvdisasm()), "-c", f.name], capture_output=True, text=True, check=True).stdout
    return [re.sub(r"/\*[0-9a-f]*\*/", "", line).strip() for line in text.splitlines()]


def same_code(a, b):
    """Whether two compiled kernels are the same code: the same instructions
    and the same launch (warps, CTAs, shared memory); None where nvdisasm
    cannot tell (said once)."""
    launch = ("num_warps", "num_ctas", "shared")
    if any(getattr(a.metadata, k, None) != getattr(b.metadata, k, None) for k in launch):
        return False
    try:
        return a.asm["cubin"] == b.asm["cubin"] or sass_lines(a.asm["cubin"]) == sass_lines(b.asm["cubin"])
    except Exception as e:
        if not getattr(same_code, "warned", False):
            same_code.warned = True
            print(f"same code: cannot disassemble ({type(e).__name__}: {e}); not compared", flush=True)
        return None


def med_calls(fn, ms):
    """do_bench's median of `fn`, over at least PAIRED_CALLS calls of a
    kernel that takes about `ms`."""
    from triton.testing import do_bench
    return do_bench(fn, warmup=25, rep=max(100, int(PAIRED_CALLS * ms) + 1), return_mode="median")


@functools.lru_cache(maxsize=None)
def _preprocess_kernel(cfg_name):
    """(constexprs, compiled kernel) of fa_bwd's preprocess for `cfg_name`."""
    pre_kw, pre_opts = fa_bwd.split_config(fa_bwd.PREPROCESS_CONFIGS[cfg_name])
    return pre_kw, triton.compile(fa_bwd.make_preprocess_ast_source(**pre_kw), target=TARGET, options=pre_opts)


def bwd_inputs(cfg_name, Z, H, N):
    """Random fp16 Q, K, V, dO [Z, H, N, D] of fa_bwd's configuration
    `cfg_name`, the forward's O and M, and Delta from fa_bwd's preprocess
    kernel: what the backward kernel reads. Returns (q, k, v, do, o, lse,
    delta, sm_scale)."""
    import torch

    from bench.kernels import check

    D = fa_bwd.CONFIGS[cfg_name][90]["HEAD_DIM"]
    pre_kw, pre = _preprocess_kernel(cfg_name)
    q, k, v, do = (torch.empty(Z, H, N, D, device="cuda", dtype=torch.float16).normal_(0, 0.5) for _ in range(4))
    sm_scale = 1.0 / math.sqrt(D)
    o, lse = check._fwd(90, fa_fwd.CONFIGS["default" if D == 128 else "hd64"][90], q, k, v, sm_scale)
    delta = torch.empty(Z * H * N, device="cuda", dtype=torch.float32)
    sig, cst, _ = fa_bwd.preprocess_ast_source_args(**pre_kw)
    check._launch(pre, (N // pre_kw["BLOCK_M"], Z * H, 1), sig, cst, dict(O=o, DO=do, Delta=delta, N_CTX=N))
    return q, k, v, do, o, lse, delta, sm_scale

# twill's configuration of each kernel: the Gluon plan where twill has one
# (its joint schedule, lowered where Triton cannot lower it: GLUON_KINDS and
# the GEMM), else the configuration its model chooses on the Triton path.
# The rule is per kernel, not per size, and fixed before the measurement:
# the better of twill's two rows is never picked.
# The backward has a Gluon plan at both head dims (GLUON_BWD_PLANS). Before
# 2026-11-26 the head-dim-64 plan was refused (twill's dK/dV cut with three
# crossings, 0.73-0.82 of stock, and a dQ schedule that kept dQ in flight,
# ptxas C7515) and that kernel ran on the Triton path (the runs of that
# time recorded their routes so).
GLUON_BWD_KINDS = {"bwd_hd128": "bwd_hd128", "bwd_hd64": "bwd_hd64"}
CONFIG_ROUTE = dict({FA_ROWS[k]: "gluon" for k in GLUON_KINDS}, matmul="gluon",
                    **{"fa_" + k: "gluon" for k in GLUON_BWD_KINDS})
# A run records the routes it was measured under (results["config_route"]);
# runs recorded before that (before 2026-11-26) had the backward on the
# Triton path, and are summarized with those routes.
ROUTE_BEFORE_RECORDED = {k: v for k, v in CONFIG_ROUTE.items() if not k.startswith("fa_bwd")}


def config_route(results):
    """The routes `results` were measured under (module comment above)."""
    return results.get("config_route") or ROUTE_BEFORE_RECORDED


def summarize(results):
    """Prints the run's summaries (and stores them in `results`): twill's
    Triton-path choice, the Gluon plans, and twill's configuration of each
    kernel (under the routes the run was measured with: config_route),
    each against the best stock configuration of the grid measured in the
    same run, with the paired ratio. `run.py
    --summarize results.json[.gz]` prints them again for a recorded run."""
    rows_all = results["rows"]

    def cell(kernel, size):
        rows = [r for r in rows_all if r["kernel"] == kernel and r["size"] == size and r["tflops"] and r["correct"]]
        stock = max((r for r in rows if r["variant"].startswith("triton")), key=lambda r: r["tflops"], default=None)
        ref = next((r for r in rows if r["variant"].startswith(("cudnn", "cublas"))), None)
        return rows, stock, ref

    def pair_of(key, kernel, size):
        return next((p for p in results.get(key, []) if p["kernel"] == kernel and p["size"] == size), None)

    kernels = sorted({r["kernel"] for r in rows_all})
    sizes_of = {k: sorted({r["size"] for r in rows_all if r["kernel"] == k}) for k in kernels}
    print("\nsummary: kernel size | best stock (config) | twill's choice (config) | ratio | paired ratio",
          flush=True)
    summary = []
    for kernel in kernels:
        for size in sizes_of[kernel]:
            rows, stock, _ = cell(kernel, size)
            ours = next((r for r in rows if r["variant"].startswith("twill choice")), None)
            if stock and ours:
                ratio = ours["tflops"] / stock["tflops"]
                pair = pair_of("paired", kernel, size)
                summary.append(dict(kernel=kernel, size=size, stock=stock["variant"], stock_tflops=stock["tflops"],
                                    twill=ours["variant"], twill_tflops=ours["tflops"], ratio=ratio,
                                    paired_ratio=pair["ratio"] if pair else None,
                                    same_code=pair.get("same_code") if pair else None))
                print(f"{kernel:16s} {size:>6} | {stock['tflops']:6.1f} ({stock['variant'][7:]}) | "
                      f"{ours['tflops']:6.1f} ({ours['variant'][13:]}) | {ratio:.3f}"
                      + (f" | paired {pair['ratio']:.3f}" if pair else "")
                      + (" | the same code" if pair and pair.get("same_code") else ""), flush=True)
    results["summary"] = summary
    print("\nsummary: twill's Hopper joint schedules through Gluon | best stock (config) | ratio | paired ratio "
          "| cuDNN / cuBLAS", flush=True)
    for kernel in kernels:
        for size in sizes_of[kernel]:
            rows, stock, ref = cell(kernel, size)
            ours = next((r for r in rows if r["variant"] == GLUON_ROW), None)
            if stock and ours:
                pair = pair_of("paired_gluon", kernel, size)
                print(f"{kernel:14s} {size:>6} | {ours['tflops']:6.1f} ({ours['note']}) | {stock['tflops']:6.1f} "
                      f"({stock['variant'][7:]}) | {ours['tflops'] / stock['tflops']:.3f}"
                      + (f" | paired {pair['ratio']:.3f}" if pair else "")
                      + (f" | {ref['tflops']:.1f}" if ref else ""), flush=True)
    print("\nsummary: twill's configuration of each kernel (the Gluon plan where twill has one, else its Triton-path "
          "choice) | best stock (config) | ratio | paired ratio | correct", flush=True)
    config = []
    routes = config_route(results)
    for kernel in kernels:
        route = routes.get(kernel, "triton")
        for size in sizes_of[kernel]:
            _, stock, _ = cell(kernel, size)
            want = (lambda v: v == GLUON_ROW) if route == "gluon" else (lambda v: v.startswith("twill choice"))
            mine = [r for r in rows_all if r["kernel"] == kernel and r["size"] == size and want(r["variant"])]
            if not stock or not mine:
                # Not measured (no recorded plan, a failed compile): shown,
                # never dropped from the table.
                config.append(dict(kernel=kernel, size=size, route=route, twill=None, correct=False, ratio=None,
                                   missing=True))
                print(f"{kernel:16s} {size:>6} | {route:6s} MISSING: no {'Gluon' if route == 'gluon' else 'twill'} "
                      f"row" + ("" if stock else " and no correct stock row"), flush=True)
                continue
            ours = mine[0]
            pair = pair_of("paired_gluon" if route == "gluon" else "paired", kernel, size)
            ratio = ours["tflops"] / stock["tflops"] if ours["tflops"] and ours["correct"] else None
            config.append(dict(kernel=kernel, size=size, route=route, twill=ours["variant"],
                               twill_tflops=ours["tflops"], correct=ours["correct"], stock=stock["variant"],
                               stock_tflops=stock["tflops"], ratio=ratio,
                               paired_ratio=pair["ratio"] if pair else None,
                               same_code=pair.get("same_code") if pair else None))
            print(f"{kernel:16s} {size:>6} | {route:6s} {(ours['tflops'] or 0):6.1f} | {stock['tflops']:6.1f} "
                  f"({stock['variant'][7:]}) | " + (f"{ratio:.3f}" if ratio else "-")
                  + (f" | paired {pair['ratio']:.3f}" if pair else " | -")
                  + f" | {ours['correct']}" + (" | the same code" if pair and pair.get("same_code") else ""),
                  flush=True)
    results["summary_config"] = config
    summarize_lowered(results)


def summarize_lowered(results):
    """The lowered variants' summary (results["summary_lowered"]): per
    kernel and size, the fastest correct row of a variant twill lowered
    with the verifier's proof (results["lowered"]) against the best stock
    configuration, with paired_lowered's ratio, and against cuBLAS / cuDNN
    of the same run; kernels with lowered variants where none lowered say
    so."""
    lowered = results.get("lowered") or {}
    if not lowered:
        return
    ok = {k.split(" ", 1)[1] for k, r in lowered.items() if r.get("ok")}
    print("\nsummary: twill lowered (fastest lowered and proved) | best stock (config) | ratio | paired ratio "
          "| cuBLAS / cuDNN | lowered / cuBLAS or cuDNN", flush=True)
    out = []
    rows_all = results["rows"]
    for kernel in sorted({r["kernel"] for r in rows_all if r["variant"].startswith(LOWERED_ROW)}):
        for size in sorted({r["size"] for r in rows_all if r["kernel"] == kernel}):
            rows = [r for r in rows_all if r["kernel"] == kernel and r["size"] == size and r["tflops"]
                    and r["correct"]]
            stock = max((r for r in rows if r["variant"].startswith("triton")), key=lambda r: r["tflops"],
                        default=None)
            ref = next((r for r in rows if r["variant"].startswith(("cudnn", "cublas"))), None)
            ours = max((r for r in rows if r["variant"] in ok), key=lambda r: r["tflops"], default=None)
            if ours is None:
                print(f"{kernel:16s} {size:>6} | no lowered and proved variant ran correctly", flush=True)
                out.append(dict(kernel=kernel, size=size, lowered=None))
                continue
            pair = next((p for p in results.get("paired_lowered", []) if p["kernel"] == kernel
                         and p["size"] == size), None)
            ratio = ours["tflops"] / stock["tflops"] if stock else None
            vs_ref = ours["tflops"] / ref["tflops"] if ref else None
            out.append(dict(kernel=kernel, size=size, lowered=ours["variant"], lowered_tflops=ours["tflops"],
                            stock=stock and stock["variant"], stock_tflops=stock and stock["tflops"], ratio=ratio,
                            paired_ratio=pair["ratio"] if pair else None, reference=ref and ref["variant"],
                            reference_tflops=ref and ref["tflops"], vs_reference=vs_ref))
            print(f"{kernel:16s} {size:>6} | {ours['tflops']:6.1f} ({ours['variant'][len(LOWERED_ROW) + 1:]}) | "
                  + (f"{stock['tflops']:6.1f} ({stock['variant'][7:]}) | {ratio:.3f}" if stock else "- | -")
                  + (f" | paired {pair['ratio']:.3f}" if pair else " | -")
                  + (f" | {ref['tflops']:.1f} | {vs_ref:.3f}" if ref else " | - | -"), flush=True)
    results["summary_lowered"] = out


def dry_run():
    """--dry-run: every lowered variant of the selected kinds compiled for
    cuda:90 here (no GPU), each decision printed, and with the GEMM every
    case of the sweep (bench.gpu.sweep.compile_only). Returns 1 where a
    GEMM variant or a sweep case is not lowered and proved, else 0."""
    from bench.gpu import sweep

    bad = []
    for kind, _ in kinds():
        for variant, cx, opts in lowered_variants(kind):
            os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="twill-dry-run-")
            rec = None
            try:
                _, _, rec, note = lowered_compile(kind, cx, opts)
            except Exception as e:
                note = f"does not compile: {type(e).__name__}: {(str(e).strip().splitlines() or [''])[-1][:150]}"
            print(f"{kind} {variant}: {note}", flush=True)
            if kind == "gemm" and not (rec and rec["ok"]):
                bad.append(f"{kind} {variant}: {note}")
    if selected("gemm"):
        bad += sweep.compile_only()
    print(*(bad or ["dry run: every lowered GEMM variant and sweep case is lowered and proved"]), sep="\n")
    return 1 if bad else 0


def run_sweep(results, out):
    """bench.gpu.sweep, before any timing (a hang there is caught and
    reported; one in a timed lowered kernel would end the run): into
    results["sweep"] and results.json at once. Returns the sweep's kernels
    whose lowered route hung or failed to run."""
    from bench.gpu import sweep

    res = sweep.sweep(deadline_s=SWEEP_DEADLINE_S)
    results["sweep"] = res
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "results.json").write_text(json.dumps(results, indent=1))
    return {r["kernel"] for r in res["rows"] if r["route"] == "twill lowered"
            and r["status"] in ("hang", "error", "compile timeout", "not run")}


# Seconds the sweep may take in a --sweep run.
SWEEP_DEADLINE_S = 240


def bench_all(out, with_sweep=False):
    import torch
    from triton.testing import do_bench
    from triton.tools.tensor_descriptor import TensorDescriptor

    torch.manual_seed(0)
    # Scratch for tensor descriptors made in a kernel (DEVICE_DESC).
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    dev = torch.cuda.get_device_name()
    results = {"device": dev, "triton": triton.__version__, "torch": torch.__version__,
               "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "rows": [], "config_route": CONFIG_ROUTE,
               "kinds": [k for k, _ in kinds()]}
    # Lowered GEMMs not timed: their sweep kernel hung or failed to run.
    unsafe = run_sweep(results, out) if with_sweep else set()

    def med(fn):
        return do_bench(fn, warmup=25, rep=100, return_mode="median")

    def paired(kernel, size, fns, kind, rounds=PAIRED_ROUNDS, ours_prefix="twill choice", key="paired",
               among=None):
        """The best stock configuration and one of twill's rows (by default
        the model's choice) timed alternately (rounds x each, medians of at
        least PAIRED_CALLS calls), right after all variants of this kernel
        and size: the first-pass rows of the two are up to a minute apart,
        and a kernel timed twice drifts by a few percent over that time.
        Rounds alternate which of the two goes first (stock, twill, twill,
        stock, ...), so that a drift within a round does not favor either
        (with 5 rounds stock goes first 3 times; the ratio is of medians).
        `same_code`: whether the two compiled to the same instructions
        (`kind`'s compiled variants, `same_code`; None where one is not a
        compiled Triton kernel): then the ratio is 1 by construction and
        measures the method's noise. `among` (variant names): twill's row
        is the fastest of these instead of the first of `ours_prefix`."""
        rows = [r for r in results["rows"] if r["kernel"] == kernel and r["size"] == size and r["correct"]
                and r["ms"] and r["variant"] in fns]
        stock = min((r for r in rows if r["variant"].startswith("triton")), key=lambda r: r["ms"], default=None)
        if among is None:
            ours = next((r for r in rows if r["variant"].startswith(ours_prefix)), None)
        else:
            ours = min((r for r in rows if r["variant"] in among), key=lambda r: r["ms"], default=None)
        if stock is None or ours is None:
            return
        ts, tt = [], []
        try:
            for n in range(rounds):
                for which in ("stock", "ours") if n % 2 == 0 else ("ours", "stock"):
                    r, times = (stock, ts) if which == "stock" else (ours, tt)
                    times.append(med_calls(fns[r["variant"]], r["ms"]))
        except Exception as e:  # a failure here must not lose the run
            print(f"paired {kernel} {size} failed: {type(e).__name__}: {e}", flush=True)
            return
        ratio = statistics.median(ts) / statistics.median(tt)
        ka, kb = compiled.get((kind, stock["variant"])), compiled.get((kind, ours["variant"]))
        same = None if ka is None or kb is None else same_code(ka[0], kb[0])
        results.setdefault(key, []).append(dict(kernel=kernel, size=size, stock=stock["variant"],
                                                     twill=ours["variant"], stock_ms=ts, twill_ms=tt, ratio=ratio,
                                                     same_code=same))
        print(f"paired {kernel} {size}: {stock['variant']} {['%.4f' % t for t in ts]} ms, "
              f"{ours['variant']} {['%.4f' % t for t in tt]} ms: twill / stock = {ratio:.3f}"
              + (" (the same code)" if same else ""), flush=True)

    def row(kernel, size, variant, ms, flops, ok, err, note=""):
        tf = flops / (ms * 1e-3) / 1e12 if ms else None
        results["rows"].append(dict(kernel=kernel, size=size, variant=variant, ms=ms, tflops=tf, correct=ok,
                                    max_err=err, note=note))
        print(f"{kernel:8s} {size:>6} {variant:24s} {('%.3f' % ms) if ms else '-':>8} ms "
              f"{('%.1f' % tf) if tf else '-':>7} TFLOPS  correct={ok} err={err if err is None else '%.2e' % err} "
              f"{note}", flush=True)

    # Compile everything first (stock grid, then twill, scheduled live); a process
    # pool fills Triton's cache in parallel, then this process loads from it.
    # The twill variants are compiled in this process only, each label with
    # a cache of its own, so that the hook runs and reports its decision.
    cache = Path(tempfile.mkdtemp(prefix="twill-gpu-cache-"))
    os.environ["TRITON_CACHE_DIR"] = str(cache / "stock")
    jobs = [(kind, cx, opts) for kind, (tw, grid) in kinds() for cx, opts in grid]
    t0 = time.time()
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(16, os.cpu_count() or 1), mp_context=spawn) as pool:
        list(pool.map(_warm, jobs))
    print(f"compiled {len(jobs)} kernels in {time.time() - t0:.0f} s (parallel cache fill)", flush=True)
    compiled = {}

    expect = expected.load()
    results["schedules"] = {}

    def live_compile(kind, label, variant, cx, opts, extra, key, cache_name):
        """Compiles a twill variant, scheduled here by the installed hook,
        with a cache of its own so that the hook runs and reports its
        decision; compares its schedules with the expected ones (`key`);
        adds it to `compiled` as `variant` and returns the decision (None
        when it does not compile)."""
        os.environ["TRITON_CACHE_DIR"] = str(cache / cache_name)
        try:
            k, d = twill_compile(kind, cx, opts, extra)
        except Exception as e:
            print(f"twill compile failed: {kind} {label}: {type(e).__name__}: {e}", flush=True)
            return None
        note = "twill applied" if d.scheduled else f"twill NOT applied: {d.reason[:150]}"
        compiled[(kind, variant)] = (k, cx, note)
        diff = expected.compare(expect, key, expected.summaries(d))
        results["schedules"][key] = diff or "as expected"
        print(kind, label, note, *d.remarks, f"schedules: {diff or 'as expected'}", sep="\n  ", flush=True)
        return d

    # The lowered variants that lowered and were proved (paired_lowered).
    lowered_ok = set()

    def live_lowered(kind, variant, cx, opts):
        """A lowered variant (lowered_compile), compiled here like
        live_compile; what was lowered and proved goes to
        results["lowered"], and a compile that fails is a row at every size
        (never dropped)."""
        os.environ["TRITON_CACHE_DIR"] = str(cache / slug(variant))
        record = results.setdefault("lowered", {})
        try:
            k, d, rec, note = lowered_compile(kind, cx, opts)
        except Exception as e:
            note = f"does not compile: {type(e).__name__}: {(str(e).strip().splitlines() or [''])[-1][:150]}"
            record[f"{kind} {variant}"] = dict(compiled=False, note=note)
            print(f"lowered compile failed: {kind} {variant}: {note}", flush=True)
            for size in kind_sizes(kind):
                row(kernel_name(kind), size, variant, None, 0, False, None, note)
            return
        compiled[(kind, variant)] = (k, cx, note)
        if rec["ok"]:
            lowered_ok.add(variant)
        key = variant_key(kind, variant)
        diff = expected.compare(expect, key, expected.summaries(d))
        results["schedules"][key] = diff or "as expected"
        record[f"{kind} {variant}"] = dict(rec, compiled=True, note=note)
        print(kind, variant, note, *d.remarks, f"schedules: {diff or 'as expected'}", sep="\n  ", flush=True)

    for kind, (tw, grid) in kinds():
        os.environ["TRITON_CACHE_DIR"] = str(cache / "stock")
        for cx, opts in grid:
            n = name_of(kind, cx, opts)
            try:
                compiled[(kind, "triton " + n)] = (compile_kernel(kind, cx, opts), cx, None)
            except Exception as e:
                print(f"compile failed: {kind} {n}: {str(e).splitlines()[-1][:200]}", flush=True)
        for label, extra, cx, opts in twill_variants(kind):
            d = live_compile(kind, label, f"{label} " + name_of(kind, cx, opts), cx, opts, extra,
                             variant_key(kind, label), slug(label))
            if d is not None:
                results.setdefault("twill", {})[f"{kind} {label}"] = dict(scheduled=d.scheduled, reason=d.reason,
                                                                          remarks=d.remarks)
        for variant, cx, opts in lowered_variants(kind):
            live_lowered(kind, variant, cx, opts)

    # twill's model's choice of configuration, per kind and size (made by
    # --plans): one compiled kernel per chosen candidate, run only at
    # the sizes it was chosen for.
    only_sizes = {}
    choice = load_choice()
    results["choice"] = choice
    for kind, by_size in choice.items():
        for size, ch in by_size.items():
            variant = f"twill choice {ch['label']}"
            only_sizes.setdefault((kind, variant), set()).add(int(size))
            if (kind, variant) not in compiled:
                live_compile(kind, variant, variant, ch["cx"], ch["opts"], ch["extra"],
                             choice_key(kind, ch["label"]), "choice_" + slug(ch["label"]))

    def skip(kind, variant, size):
        return (kind, variant) in only_sizes and size not in only_sizes[(kind, variant)]

    # twill's FA forward schedules through Gluon (recorded plans: head dim
    # 128, 64 and causal; GLUON_KINDS), each at the CTAs per SM twill's model chose for the size,
    # and two ablations of the head-dim-128 plan: the groups' turns on the
    # tensor core enforced with mbarriers, and the plan of the paper's
    # objective (the shortest L: the turn order, PV before QK^T) instead of
    # the largest latency slack.
    gluon_plans = {kind: load_gluon_plan(sub) for kind, sub in GLUON_KINDS.items()}
    results["gluon_plan"] = gluon_plans["fa"]
    results["gluon_plan_hd64"] = gluon_plans["fa_hd64"]
    results["gluon_plan_causal"] = gluon_plans["fa_causal"]
    ablations = []
    if gluon_plans["fa"]:
        plan = gluon_plans["fa"]["plan"]
        ablations = [("ablation: gluon, turns enforced", dict(plan, PINGPONG=True))]
        if (gluon_plans["fa"].get("objective_length") or {}).get("plan"):
            ablations.append(("ablation: gluon, objective length (shortest L)",
                              gluon_plans["fa"]["objective_length"]["plan"]))
    for kind, g in gluon_plans.items():
        if not g:
            print(f"no recorded Gluon plan for {kind} (run.py --plans)", flush=True)
    gluon_compiled = {}

    def gluon_kernel(cfg, module=fa_fwd_gluon):
        """`module`'s Gluon kernel at `cfg`, compiled once (None where it
        does not compile)."""
        key = (module.__name__,) + tuple(sorted(cfg.items()))
        if key not in gluon_compiled:
            try:
                gluon_compiled[key] = module.compile_for(None, **cfg)
            except Exception as e:
                print(f"gluon compile failed: {module.__name__} {cfg}: {type(e).__name__}: {str(e)[-300:]}",
                      flush=True)
                gluon_compiled[key] = None
        return gluon_compiled[key]

    def gluon_variants(fa_kind, size):
        g = gluon_plans.get(fa_kind)
        if not g:
            return []
        return [(GLUON_ROW, gluon_config(g, size))] + (ablations if fa_kind == "fa" else [])

    # FlashAttention forward, every kind.
    Z, H = FA_SHAPE["Z"], FA_SHAPE["H"]
    for fa_kind, (cfg_name, D) in FA_KINDS.items():
        if not selected(fa_kind):
            continue
        causal = bool(fa_fwd.CONFIGS[cfg_name][90].get("CAUSAL"))
        for N in FA_SIZES:
            q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
            sm_scale = 1.0 / math.sqrt(D)
            flops = 4.0 * Z * H * N * N * D * (0.5 if causal else 1.0)
            heads = [(0, 0), (Z - 1, H - 1)]  # reference on two heads
            ref, ref_lse = {}, {}
            for z, h in heads:
                s_ = (q[z, h].float() @ k[z, h].float().T) * sm_scale
                if causal:
                    s_ = s_.masked_fill(torch.ones(N, N, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
                ref[(z, h)] = torch.softmax(s_, dim=-1) @ v[z, h].float()
                ref_lse[(z, h)] = torch.logsumexp(s_, dim=-1) / math.log(2)  # M: log2-sum-exp
                del s_

            def check(o, lse=None):
                """O against float32 on two heads; and M (the log2-sum-exp
                the backward pass reads), where given."""
                if not torch.isfinite(o).all():
                    return False, float("nan")
                err = max((o[z, h].float() - ref[(z, h)]).abs().max().item() for z, h in heads)
                if lse is not None:
                    m = lse.view(Z, H, N)
                    lerr = max((m[z, h] - ref_lse[(z, h)]).abs().max().item() for z, h in heads)
                    if not lerr < 1e-2:
                        return False, max(err, lerr)
                return err < 2e-2, err

            fns = {}

            def measure(variant, make_fn, o, lse, note):
                """One FA row: the launch function from `make_fn()`, outputs
                poisoned, one launch checked (O and M), then timed; a
                failure to build or launch is the row's note."""
                try:
                    fn = make_fn()
                    o.fill_(float("nan"))
                    lse.fill_(float("nan"))
                    fn()
                    torch.cuda.synchronize()
                    ok, err = check(o, lse)
                    ms = med(fn)
                    fns[variant] = fn
                except Exception as e:
                    ok, err, ms = False, None, None
                    note = f"launch failed: {str(e)[:120]}"
                row(FA_ROWS[fa_kind], N, variant, ms, flops, ok, err, note)

            for (kind, variant), (kern, cx, note) in compiled.items():
                if kind != fa_kind or skip(kind, variant, N):
                    continue
                if N % cx["BLOCK_N"] or N % cx["BLOCK_M"]:
                    continue
                o = torch.empty_like(q)
                lse = torch.empty(Z * H * N, device="cuda", dtype=torch.float32)
                BM, BN = cx["BLOCK_M"], cx["BLOCK_N"]
                q_rows = BM // 2 if cx.get("SUBTILE") else BM

                def desc(t, rows):
                    return TensorDescriptor.from_tensor(t.view(Z * H * N, D), [rows, D])

                if cx.get("DEVICE_DESC"):  # the kernel makes its descriptors
                    dq, dk, dv, do = q, k, v, o
                else:
                    dq, dk, dv, do = desc(q, q_rows), desc(k, BN), desc(v, BN), desc(o, q_rows)
                grid = (triton.cdiv(N, BM), Z * H, 1)
                general = ("CAUSAL" in cx) or ("SUBTILE" in cx)
                consts = (cx["HEAD_DIM"], BM, BN) + ((bool(cx.get("CAUSAL")), bool(cx.get("SUBTILE"))) if general
                                                     else ()) + (cx["WARP_SPECIALIZE"],)

                def fn(kern=kern, grid=grid, lse=lse, dq=dq, dk=dk, dv=dv, do=do, consts=consts):
                    kern[grid](sm_scale, lse, Z, H, dq, dk, dv, do, N, *consts)

                measure(variant, lambda fn=fn: fn, o, lse, note or "")
            for variant, gcfg in gluon_variants(fa_kind, N):
                gk = gluon_kernel(gcfg)
                if gk is None:
                    continue
                o = torch.empty_like(q)
                lse = torch.empty(Z * H * N, device="cuda", dtype=torch.float32)
                note = "plan " + " ".join(f"{k}={gcfg[k]}" for k in ("BLOCK_N", "PINGPONG", "QK_FIRST", "INTRA",
                                                                     "STAGES", "MAXNREG") if k in gcfg)
                measure(variant, lambda gk=gk, gcfg=gcfg, o=o, lse=lse:
                        fa_fwd_gluon.launcher(gk, q, k, v, o, lse, sm_scale, **gcfg), o, lse, note)
            paired(FA_ROWS[fa_kind], N, fns, fa_kind)
            paired(FA_ROWS[fa_kind], N, fns, fa_kind, key="paired_lowered", among=lowered_ok)
            if gluon_plans.get(fa_kind):
                paired(FA_ROWS[fa_kind], N, fns, fa_kind, ours_prefix=GLUON_ROW, key="paired_gluon")
            # cuDNN through torch SDPA.
            try:
                from torch.nn.attention import SDPBackend, sdpa_kernel
                import torch.nn.functional as F

                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    f = lambda: F.scaled_dot_product_attention(q, k, v, scale=sm_scale, is_causal=causal)  # noqa: E731
                    o = f()
                    ok, err = check(o)
                    row(FA_ROWS[fa_kind], N, "cudnn (torch sdpa)", med(f), flops, ok, err)
            except Exception as e:
                row(FA_ROWS[fa_kind], N, "cudnn (torch sdpa)", None, flops, False, None, f"failed: {str(e)[:100]}")
            del q, k, v, ref
            torch.cuda.empty_cache()

    # FlashAttention backward (the main kernel; O, the log-sum-exp and Delta
    # come from stock fa_fwd and fa_bwd's preprocess kernel).
    from bench.kernels import check, fa_bwd_gluon  # check: launch helpers

    gluon_bwd = {kind: load_gluon_plan(sub) for kind, sub in GLUON_BWD_KINDS.items()}
    results["gluon_plan_bwd"] = gluon_bwd

    def bench_bwd(bwd_kind, cfg_name):
        D = fa_bwd.CONFIGS[cfg_name][90]["HEAD_DIM"]
        bwd_plan = (gluon_bwd.get(bwd_kind) or {}).get("plan")
        if bwd_kind in GLUON_BWD_KINDS and not bwd_plan:
            print(f"no recorded Gluon plan for {bwd_kind} (run.py --plans)", flush=True)
        for N in FA_SIZES:
            q, k, v, do, o, lse, delta, sm_scale = bwd_inputs(cfg_name, Z, H, N)
            flops = 2.5 * 4.0 * Z * H * N * N * D
            heads = [(0, 0), (Z - 1, H - 1)]
            ref = {}
            for z, h in heads:
                qr, kr, vr = (t[z, h].detach().float().requires_grad_() for t in (q, k, v))
                (torch.softmax((qr @ kr.T) * sm_scale, dim=-1) @ vr).backward(do[z, h].float())
                ref[(z, h)] = (qr.grad, kr.grad, vr.grad)
                del qr, kr, vr
            torch.cuda.empty_cache()

            def check_grads(dq, dk, dv):
                if not (torch.isfinite(dq).all() and torch.isfinite(dk).all() and torch.isfinite(dv).all()):
                    return False, float("nan")
                err = max((got[z, h].float() - want).abs().max().item() / want.abs().max().item()
                          for z, h in heads for got, want in zip((dq, dk, dv), ref[(z, h)]))
                return err < 1e-2, err

            fns = {}
            for (kind, variant), (kern, cx, note) in compiled.items():
                if kind != bwd_kind or skip(kind, variant, N):
                    continue
                dq, dk, dv = (torch.empty_like(q) for _ in range(3))
                values = check.bwd_values(cx, sm_scale, lse, delta, q, k, v, do, dq, dk, dv)
                sig, cst, _ = fa_bwd.ast_source_args(**cx)
                N1 = cx["BLOCK_N1"]

                def fn(kern=kern, N1=N1, sig=sig, cst=cst, values=values):
                    check._launch(kern, (N // N1, Z * H, 1), sig, cst, values)

                try:
                    for t in (dq, dk, dv):
                        t.fill_(float("nan"))
                    fn()
                    torch.cuda.synchronize()
                    ok, err = check_grads(dq, dk, dv)
                    ms = med(fn)
                    fns[variant] = fn
                except Exception as e:
                    ok, err, ms = False, None, None
                    note = f"launch failed: {str(e)[:120]}"
                row("fa_" + bwd_kind, N, variant, ms, flops, ok, err, note or "")
            # twill's joint schedules of both loops through Gluon (fa_bwd_gluon).
            gk = gluon_kernel(bwd_plan, module=fa_bwd_gluon) if bwd_plan else None
            if gk is not None:
                dq, dk, dv = (torch.empty_like(q) for _ in range(3))
                note = "plan " + " ".join(f"{k}={bwd_plan[k]}" for k in ("SPLIT1", "SPLIT2", "BLOCK_N2", "STAGES1",
                                                                          "STAGES2"))
                try:
                    fn = fa_bwd_gluon.launcher(gk, q, k, v, do, lse, delta, dq, dk, dv, sm_scale, **bwd_plan)
                    for t in (dq, dk, dv):
                        t.fill_(float("nan"))
                    fn()
                    torch.cuda.synchronize()
                    ok, err = check_grads(dq, dk, dv)
                    ms = med(fn)
                    fns[GLUON_ROW] = fn
                except Exception as e:
                    ok, err, ms = False, None, None
                    note = f"launch failed: {str(e)[:120]}"
                row("fa_" + bwd_kind, N, GLUON_ROW, ms, flops, ok, err, note)
            paired("fa_" + bwd_kind, N, fns, bwd_kind)
            paired("fa_" + bwd_kind, N, fns, bwd_kind, key="paired_lowered", among=lowered_ok)
            if gk is not None:
                paired("fa_" + bwd_kind, N, fns, bwd_kind, ours_prefix=GLUON_ROW, key="paired_gluon")
            # cuDNN backward through torch SDPA (forward + backward timed minus forward).
            try:
                from torch.nn.attention import SDPBackend, sdpa_kernel
                import torch.nn.functional as F

                qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    out = F.scaled_dot_product_attention(qg, kg, vg, scale=sm_scale)
                    f = lambda: torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True)  # noqa: E731
                    gq, gk, gv = f()
                    ok, err = check_grads(gq, gk, gv)
                    row("fa_" + bwd_kind, N, "cudnn (torch sdpa backward)", med(f), flops, ok, err)
                del qg, kg, vg, out
            except Exception as e:
                row("fa_" + bwd_kind, N, "cudnn (torch sdpa backward)", None, flops, False, None,
                    f"failed: {str(e)[:100]}")
            del q, k, v, do, o, lse, delta, ref
            torch.cuda.empty_cache()

    for bwd_kind, cfg_name in BWD_KINDS.items():
        if not selected(bwd_kind):
            continue
        try:
            bench_bwd(bwd_kind, cfg_name)
        except Exception as e:  # keep the rest of the run
            print(f"backward benchmark {bwd_kind} failed: {type(e).__name__}: {e}", flush=True)

    # GEMM (C = A B^T, A: MxK, B: NxK): the grid, twill's Triton-path
    # choice, twill's joint schedule through Gluon (matmul_gluon_plan, the
    # tile twill's model chooses per size) and ablations of it.
    gemm_gluon = load_gluon_plan("gemm")
    results["gluon_plan_gemm"] = gemm_gluon
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if not gemm_gluon:
        print("no recorded Gluon plan for the GEMM (run.py --plans)", flush=True)

    def gemm_gluon_variants(size):
        """twill's plan at `size` and its ablations: the other tile's plan,
        the ring the schedule needs and no deeper, a CTA per tile, and (for a
        one-group plan) two consumer groups, one per half."""
        if not gemm_gluon:
            return []
        chosen = gemm_gluon["model"][str(size)]["tile"]
        cand = gemm_gluon["candidates"][str(chosen)]
        plan = cand["plan"]
        out = [(GLUON_ROW, plan)]
        for t, other in gemm_gluon["candidates"].items():
            if int(t) != chosen:
                out.append((f"ablation: gluon gemm, BN{t} plan", other["plan"]))
        if cand["min_stages"] != plan["STAGES"]:
            out.append(("ablation: gluon gemm, the schedule's ring only", dict(plan, STAGES=cand["min_stages"])))
        out.append(("ablation: gluon gemm, a CTA per tile", dict(plan, PERSISTENT=False)))
        if plan["CONSUMERS"] == 1:
            two, _ = matmul_gluon.register_split(plan["CTAS"], consumers=2)
            out.append(("ablation: gluon gemm, two consumer groups", dict(plan, CONSUMERS=2, **two)))
        return out

    for S in (GEMM_SIZES if selected("gemm") else []):
        M = N = K = S
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(N, K, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float().T
        flops = 2.0 * M * N * K
        scale = ref.abs().max().item()

        def check(c):
            if not torch.isfinite(c).all():
                return False, float("nan")
            err = (c.float() - ref).abs().max().item() / scale
            return err < 1e-2, err

        fns = {}

        def measure(variant, make_fn, c):
            """Runs make_fn()'s function once on a NaN-poisoned C, checks C,
            times it and keeps it for the paired rounds: (correct, error,
            ms, None), or (False, None, None, the failure) where it does not
            launch."""
            try:
                fn = make_fn()
                c.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                ok, err = check(c)
                ms = med(fn)
                fns[variant] = fn
                return ok, err, ms, None
            except Exception as e:
                return False, None, None, f"launch failed: {str(e)[:120]}"

        for (kind, variant), (kern, cx, note) in compiled.items():
            if kind != "gemm" or skip(kind, variant, S):
                continue
            sweep_kernel = "host ws" if cx.get("WARP_SPECIALIZE") else "host"
            if variant.startswith(LOWERED_ROW) and sweep_kernel in unsafe:
                row("matmul", S, variant, None, flops, False, None,
                    f"{note}; not timed: its sweep kernel ({sweep_kernel}) hung or failed to run")
                continue
            c = torch.empty(M, N, device="cuda", dtype=torch.float16)
            BM, BN, BK = cx["BLOCK_M"], cx["BLOCK_N"], cx["BLOCK_K"]
            ad = TensorDescriptor.from_tensor(a, [BM, BK])
            bd = TensorDescriptor.from_tensor(b, [BN, BK])
            cd = TensorDescriptor.from_tensor(c, [BM, BN])
            grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN), 1, 1)

            # matmul_tma_ws_kernel's WARP_SPECIALIZE is a launch argument too.
            ws = (True, ) if cx.get("WARP_SPECIALIZE") else ()

            def fn(kern=kern, grid=grid, ad=ad, bd=bd, cd=cd, BM=BM, BN=BN, BK=BK, cx=cx, ws=ws):
                kern[grid](ad, bd, cd, M, N, K, BM, BN, BK, cx["GROUP_M"], *ws)

            ok, err, ms, failed = measure(variant, lambda fn=fn: fn, c)
            row("matmul", S, variant, ms, flops, ok, err, failed or note or "")
        for variant, gcfg in gemm_gluon_variants(S):
            gk = gluon_kernel(gcfg, matmul_gluon)
            if gk is None:
                continue
            c = torch.empty(M, N, device="cuda", dtype=torch.float16)
            note = "plan " + " ".join(f"{k}={gcfg[k]}" for k in ("BLOCK_N", "CONSUMERS", "STAGES", "PERSISTENT",
                                                                 "CTAS"))
            ok, err, ms, failed = measure(variant, lambda gk=gk, c=c, gcfg=gcfg:
                                          matmul_gluon.launcher(gk, a, b, c, sms, **gcfg), c)
            row("matmul", S, variant, ms, flops, ok, err, note + (f" {failed}" if failed else ""))
        paired("matmul", S, fns, "gemm")
        paired("matmul", S, fns, "gemm", key="paired_lowered", among=lowered_ok)
        if gemm_gluon:
            paired("matmul", S, fns, "gemm", ours_prefix=GLUON_ROW, key="paired_gluon")
        f = lambda: a @ b.T  # noqa: E731
        ok, err = check(f())
        row("matmul", S, "cublas (torch)", med(f), flops, ok, err)
        del a, b, ref
        torch.cuda.empty_cache()

    summarize(results)

    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "results.json").write_text(json.dumps(results, indent=1))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        kernels = [kernel_name(k) for k, _ in kinds()]
        fig, axes = plt.subplots(1, len(kernels), figsize=(5 * len(kernels), 5), squeeze=False)
        for ax, kernel in zip(axes[0], kernels):
            rows = [r for r in results["rows"] if r["kernel"] == kernel and r["tflops"]]
            sizes = sorted({r["size"] for r in rows})
            best_stock = {s: max((r["tflops"] for r in rows if r["size"] == s and r["variant"].startswith("triton")
                                  and r["correct"]), default=0) for s in sizes}
            tw = {s: max((r["tflops"] for r in rows if r["size"] == s and r["variant"].startswith("twill choice")
                          and r["correct"]), default=0) for s in sizes}
            ref = {s: max((r["tflops"] for r in rows if r["size"] == s and ("cudnn" in r["variant"]
                                                                         or "cublas" in r["variant"])), default=0)
                   for s in sizes}
            gl_ = {s: max((r["tflops"] for r in rows if r["size"] == s and r["variant"] == GLUON_ROW
                           and r["correct"]), default=0) for s in sizes}
            bars = [("best stock Triton", best_stock), ("twill (model's configuration)", tw)]
            if any(gl_.values()):
                bars.append(("twill's schedule through Gluon", gl_))
            bars.append(("cuDNN/cuBLAS", ref))
            xs = range(len(sizes))
            w = 0.8 / len(bars)
            for i, (label, vals) in enumerate(bars):
                ax.bar([x + (i - (len(bars) - 1) / 2) * w for x in xs], [vals[s] for s in sizes], w, label=label)
            ax.set_xticks(list(xs), [str(s) for s in sizes])
            ax.set_title(f"{kernel} on {dev}")
            ax.set_ylabel("TFLOPS")
            ax.legend()
        fig.tight_layout()
        fig.savefig(Path(out) / "results.png", dpi=100)
    except Exception as e:
        print("no chart:", e)
    return results


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--plans", action="store_true",
                    help="make the Gluon plans and the model's choice under bench/gpu/plans/<triton> and compare "
                         "every schedule with bench/gpu/expected (machine with twill and twill-opt)")
    ap.add_argument("--bless", action="store_true", help="with --plans: rewrite the expected file instead")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench/gpu/out"))
    ap.add_argument("--record-gluon", action="store_true",
                    help="make only the Gluon plans (FA forward, GEMM; machine with twill)")
    ap.add_argument("--record-gluon-only", metavar="PLAN",
                    help="make one Gluon plan alone: hd64, causal or gemm (machine with twill)")
    ap.add_argument("--summarize", metavar="RESULTS",
                    help="print the summaries of a recorded run's results.json (or .json.gz) again")
    ap.add_argument("--kinds", help="comma-separated kinds to run (default: all): "
                    + ", ".join(k for k, _ in kinds_configs()))
    ap.add_argument("--sweep", action="store_true",
                    help="first the lowered GEMMs' correctness sweep (bench.gpu.sweep), into results.json")
    ap.add_argument("--dry-run", action="store_true",
                    help="compile every lowered variant (--kinds) for cuda:90 here, no GPU, and the sweep's "
                         "kernels; exits 1 where a GEMM variant is not lowered and proved")
    ap.add_argument("--all-variants", action="store_true",
                    help="also the twill variants of earlier runs (prefetch+1, slot order, BN64 w4 s2)")
    args = ap.parse_args()
    ALL_VARIANTS = args.all_variants
    if args.kinds:
        KINDS_ONLY = [k.strip() for k in args.kinds.split(",") if k.strip()]
        unknown = set(KINDS_ONLY) - {k for k, _ in kinds_configs()}
        if unknown:
            raise SystemExit(f"unknown kinds {sorted(unknown)}")
    if args.summarize:
        import gzip

        opener = gzip.open if args.summarize.endswith(".gz") else open
        with opener(args.summarize, "rt") as f:
            summarize(json.load(f))
    elif args.record_gluon:
        record_gluon()
    elif args.record_gluon_only is not None:
        record_gluon_only(args.record_gluon_only)
    elif args.plans:
        plans(bless=args.bless)
    elif args.dry_run:
        raise SystemExit(dry_run())
    else:
        res = bench_all(args.out, with_sweep=args.sweep)
        if args.sweep and not res["sweep"]["ok"]:
            raise SystemExit("the lowered GEMMs' sweep FAILED (results.json \"sweep\")")
