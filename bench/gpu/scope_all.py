#!/usr/bin/env python3
"""GPU bench of twill under scope=all on the GEMMs users write themselves:
the persistent GEMMs (third_party/triton/tests/kernels/persistent_matmul.py:
TMA and pointer loads; their loop is the fused (tile, k) loop whose body
keeps the tile's set-up and epilogue under scf.ifs) and the tutorial-03
style pointer-load matmuls (pointer_matmul.py, each configuration of
CONFIGS at its own num_stages). Stock Triton against twill, live: twill-opt
schedules on the GPU machine (the installed wheel's, bash
bench/gpu/install_wheel.sh).

    python3 -m bench.gpu.scope_all --out DIR [--sizes 4096x4096x4096,...] [--stages 2,3,4]
                                   [--variants tma,pointer,tutorial] [--ties triton] [--timer graph]

Per variant, num_stages (the persistent GEMMs: each of --stages; the
tutorial matmuls: their configuration's) and size:
the kernel compiled stock and with twill (each in a fresh Triton cache),
launched on NaN-poisoned C and checked against a float32 torch reference
(max |C - ref| / max |ref| <= TOL; NaN never passes; REPEATS launches, the
worst counts), then timed paired: ROUNDS rounds alternating stock and twill,
each a do_bench median; the ratio is of the medians of the rounds. Each row
prints what twill decided for the fused loop (scheduled, or the skip reason
code) and the model's prediction for Triton's schedule and for twill's
(cycles per iteration, from the report's schedule and its `triton` record,
or its `compared` record where twill kept Triton's schedule), so that a
wrong prediction is visible next to the measurement. twill runs with the
hook's defaults (a tie with Triton's schedule in the model keeps the
deeper pipeline: Triton's where it has more stages, else twill's);
`--ties twill` keeps twill's there, `--ties triton` Triton's
(`triton_as_good`). Each row
says whether the two binaries differ: where they are the same, the pair is
an A/A test of the timing (its spread is the method's noise at that size).
Each compile launches through a JITFunction of its own, so that each
column runs its own binary (Triton's JIT caches compiled kernels in memory
by arguments and options, not by the stages hook). The summary
gives, per variant and size, twill at each num_stages against the best stock
num_stages.

Writes DIR/results.json and DIR/table.md. Exit status 1 when a row is wrong
or failed, 0 otherwise; 2 without a GPU.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

TOL = 1e-2
REPEATS = 3
ROUNDS = 5
SIZES = [(4096, 4096, 4096), (8192, 8192, 8192), (3000, 5000, 4096), (1024, 1024, 64)]
STAGES = [2, 3, 4]


def parse_sizes(text):
    return [tuple(int(x) for x in s.split("x")) for s in text.split(",") if s]


def fused_loop(decision):
    """The report's record of the fused loop (the one with Triton's
    schedule on it, the last loop), or None."""
    if decision is None or not decision.report:
        return None
    loops = decision.report.get("loops", [])
    return loops[-1] if loops else None


def paired(a, b, rounds, timed):
    """Medians of `rounds` timings (`timed(fn)`, ms) of `a` and of `b`,
    the two alternating which goes first from one round to the next."""
    ta, tb = [], []
    for r in range(rounds):
        pair = [(a, ta), (b, tb)] if r % 2 == 0 else [(b, tb), (a, ta)]
        for fn, acc in pair:
            acc.append(timed(fn))
    return statistics.median(ta), statistics.median(tb)


def prediction(record):
    """(decision or reason, twill's cycles per iteration, Triton's) of a
    fused-loop record."""
    if record is None:
        return "no report", None, None
    # Scheduled: twill's schedule, Triton's beside it; kept Triton's on a
    # tie or a loss in the model: both from `compared`.
    sched = record.get("schedule") or record.get("compared") or {}
    triton_rec = sched.get("triton") or {}
    what = record["decision"] if record["decision"] == "scheduled" else record.get("reason")
    return what, sched.get("ii_cycles"), triton_rec.get("ii_cycles")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sizes", type=parse_sizes, default=SIZES)
    ap.add_argument("--stages", default=",".join(map(str, STAGES)))
    ap.add_argument("--variants", default="tma,pointer,tutorial")
    ap.add_argument("--timer", choices=("bench", "graph"), default="bench",
                    help="bench: do_bench (L2 flushed before each launch); graph: do_bench_cudagraph "
                         "(launches replayed from a CUDA graph, L2 warm: no launch overhead, for kernels of "
                         "a few microseconds)")
    ap.add_argument("--ties", choices=("deeper", "triton", "twill"), default=None,
                    help="the hook's TWILL_TIES (default: the hook's own, deeper)")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("no GPU", file=sys.stderr)
        return 2
    import triton
    from triton.testing import do_bench, do_bench_cudagraph

    def timed(fn):
        if args.timer == "graph":
            return do_bench_cudagraph(fn, rep=100, return_mode="median")
        return do_bench(fn, warmup=25, rep=100, return_mode="median")
    from triton.tools.tensor_descriptor import TensorDescriptor

    import twill_triton
    from third_party.triton.tests.kernels import persistent_matmul as pm
    from third_party.triton.tests.kernels import pointer_matmul as tm

    args.out.mkdir(parents=True, exist_ok=True)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    stages = [int(s) for s in args.stages.split(",")]
    rows, failed = [], False

    def kernel_of(name):
        if name.startswith("tutorial"):
            return tm.matmul_kernel
        return pm.persistent_tma_kernel if name == "tma" else pm.persistent_pointer_kernel

    def launch(name, cfg, data, c, jit):
        """The launch of the kernel of row `name` through `jit`, this
        compile's own JITFunction of it (so that its in-memory cache holds
        this compile's binary alone: Triton's JIT keys that cache by the
        arguments and options, not by the stages hook)."""
        a, b, bt = data["a"], data["b"], data["bt"]
        m, k = a.shape
        n = b.shape[0]
        if name.startswith("tutorial"):
            cx, opts = tm.split(cfg)
            grid = (triton.cdiv(m, cx["BLOCK_M"]) * triton.cdiv(n, cx["BLOCK_N"]), )
            return lambda: jit[grid](a, bt, c, m, n, k, a.stride(0), a.stride(1), bt.stride(0), bt.stride(1),
                                     c.stride(0), c.stride(1), **cx, **opts)
        grid = (min(sms, triton.cdiv(m, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"])), )
        cx, opts = pm.split(dict(cfg, NUM_PROGRAMS=grid[0]))
        if name == "tma":
            da = TensorDescriptor.from_tensor(a, [cx["BLOCK_M"], cx["BLOCK_K"]])
            db = TensorDescriptor.from_tensor(b, [cx["BLOCK_N"], cx["BLOCK_K"]])
            dc = TensorDescriptor.from_tensor(c, [cx["BLOCK_M"], cx["BLOCK_N"]])
            return lambda: jit[grid](da, db, dc, m, n, k, **cx, **opts)
        return lambda: jit[grid](a, b, c, m, n, k, **cx, **opts)

    def compiled(name, cfg, data, c, twill):
        """The launch of a freshly compiled kernel (its own Triton cache),
        its worst relative error, twill's decision, and the binary (cubin)."""
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="twill-persistent-")
        jit = triton.jit(kernel_of(name).fn)
        before = len(twill_triton.decisions())
        if twill:
            twill_triton.enable(scope="all", ties=args.ties)
        try:
            fn = launch(name, cfg, data, c, jit)
            ref = data["ref"]
            worst, binary = 0.0, None
            for _ in range(REPEATS):
                c.fill_(float("nan"))
                binary = fn().asm["cubin"]
                torch.cuda.synchronize()
                err = ((c.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()
                worst = err if err != err else max(worst, err)  # NaN stays NaN
                if worst != worst:
                    break
        finally:
            twill_triton.disable()
        new = twill_triton.decisions()[before:]
        return fn, worst, (new[-1] if new else None), binary

    def configurations(variant):
        """(row name, configuration) of a --variants entry."""
        if variant == "tutorial":
            return [(f"tutorial {c}", dict(cfg)) for c, cfg in tm.CONFIGS.items()]
        return [(variant, dict(pm.CONFIGS[variant], num_stages=ns)) for ns in stages]

    names = []
    for variant in args.variants.split(","):
        for (m, n, k) in args.sizes:
            torch.manual_seed(0)
            a = torch.randn(m, k, device="cuda", dtype=torch.float16)
            b = torch.randn(n, k, device="cuda", dtype=torch.float16)
            # The tutorial kernel reads B as K x N: its transpose, contiguous.
            data = {"a": a, "b": b, "bt": b.T.contiguous() if variant == "tutorial" else None,
                    "ref": a.float() @ b.float().T}
            for name, cfg in configurations(variant):
                ns = cfg["num_stages"]
                if name not in names:
                    names.append(name)
                row = {"variant": name, "size": f"{m}x{n}x{k}", "num_stages": ns}
                try:
                    c0 = torch.empty(m, n, device="cuda", dtype=torch.float16)
                    c1 = torch.empty(m, n, device="cuda", dtype=torch.float16)
                    stock, e0, _, stock_bin = compiled(name, cfg, data, c0, False)
                    ours, e1, d, twill_bin = compiled(name, cfg, data, c1, True)
                    what, ours_cyc, triton_cyc = prediction(fused_loop(d))
                    # Identical binaries make the pair an A/A test of the timing.
                    row.update(stock_err=e0, twill_err=e1, twill=what, applied=bool(d and d.scheduled),
                               binary="same" if stock_bin == twill_bin else "differs",
                               model_twill_cycles=ours_cyc, model_triton_cycles=triton_cyc)
                    ok = all(e == e and e <= TOL for e in (e0, e1))
                    row["verdict"] = "correct" if ok else "WRONG"
                    failed |= not ok
                    stock_ms, twill_ms = paired(stock, ours, ROUNDS, timed)
                    row.update(stock_ms=stock_ms, twill_ms=twill_ms)
                    row["ratio"] = row["stock_ms"] / row["twill_ms"]
                    row["tflops"] = 2 * m * n * k / row["twill_ms"] / 1e9
                except Exception as e:  # a failed row is reported, the bench goes on
                    row.update(verdict="error", error=f"{type(e).__name__}: {e}"[:400])
                    failed = True
                rows.append(row)
                print(json.dumps(row), flush=True)

    summary = []
    for name in names:
        for (m, n, k) in args.sizes:
            size = f"{m}x{n}x{k}"
            mine = [r for r in rows if r["variant"] == name and r["size"] == size and "stock_ms" in r]
            if not mine:
                continue
            best = min(r["stock_ms"] for r in mine)
            for r in mine:
                summary.append({"variant": name, "size": size, "num_stages": r["num_stages"],
                                "vs_same": r["ratio"], "vs_best_stock": best / r["twill_ms"]})
    lines = ["| variant | size | num_stages | verdict | twill | binary | model: Triton / twill (cycles/iter) "
             "| stock ms | twill ms | paired | vs best stock |", "|" + " --- |" * 11]
    for r in rows:
        s = next((x for x in summary if x["variant"] == r["variant"] and x["size"] == r["size"]
                  and x["num_stages"] == r["num_stages"]), None)
        lines.append("| {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} |".format(
            r["variant"], r["size"], r["num_stages"], r.get("verdict"), r.get("twill", r.get("error", "")),
            r.get("binary", "-"),
            r.get("model_triton_cycles"), r.get("model_twill_cycles"),
            f"{r['stock_ms']:.3f}" if "stock_ms" in r else "-", f"{r['twill_ms']:.3f}" if "twill_ms" in r else "-",
            f"{r['ratio']:.3f}" if "ratio" in r else "-", f"{s['vs_best_stock']:.3f}" if s else "-"))
    table = "\n".join(lines)
    print(table)
    (args.out / "table.md").write_text(table + "\n")
    (args.out / "results.json").write_text(json.dumps({
        "device": torch.cuda.get_device_name(0), "triton": triton.__version__, "timer": args.timer, "rows": rows,
        "summary": summary}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
