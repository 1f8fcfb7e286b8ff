"""Coverage and compile time of twill on every kernel of the test fixtures
(third_party/triton/tests/kernels: TMA GEMMs, FlashAttention forward and
backward, the pointer-load matmuls and attention backward, the persistent
GEMMs with TMA and pointer loads, the grouped GEMM), on the CPU:

    PYTHONPATH=third_party/triton:. python -m bench.compile.coverage [--caps 90,100] [--json FILE]
    python -m bench.compile.coverage --merge 3.6.json 3.9.json   # BENCHMARKS.md's table

Per kernel and target: what twill did with each loop under `scope=all`
(scheduled, or the report's skip reason code; the report's loops in program
order), whether the kernel kept twill's schedule or fell back (and why), and
the compile time it added: one cold compile of stock Triton, one of Triton
with twill and an empty twill schedule cache, then `--warm` more (3) with
that cache warm, of which the median counts (a warm compile takes tens of
milliseconds, where one stall of the machine shows; a fresh Triton cache for
each compile), as the difference to stock and as twill's
own seconds (the hook's clock around its twill-opt calls and the
verification; the difference of two compiles is noisy by a few tenths of a
second on a busy machine). The summary gives the median and maximum added
time, cold and warm. Timing targets live here, not in tests."""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import triton
from triton.backends.compiler import GPUTarget

import twill_triton
from third_party.triton.tests.kernels import (fa_bwd, fa_fwd, grouped_matmul, matmul, persistent_matmul,
                                              pointer_attention_bwd, pointer_matmul)


def _config(module, name):
    def make(cap):
        kwargs, opts = module.split_config(module.CONFIGS[name][cap])
        return module.make_ast_source(**kwargs), opts
    return make


def _gemm(**extra):
    def make(cap):
        cfg = dict(matmul.DEFAULT_CONFIG, **extra)
        opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages")}
        return matmul.make_ast_source(**cfg), opts
    return make


def _pointer(module, kernel, config):
    def make(cap):
        return module.ast_source(kernel, **config)
    return make


def _persistent(name):
    def make(cap):
        return persistent_matmul.ast_source(name)
    return make


def _grouped(config):
    def make(cap):
        return grouped_matmul.ast_source(**config)
    return make


def kernels():
    """(name, make(cap) -> (source, options)) of every fixture kernel."""
    out = [("matmul_tma", _gemm())]
    out += [(f"fa_fwd_{name}", _config(fa_fwd, name)) for name in fa_fwd.CONFIGS]
    out += [(f"fa_bwd_{name}", _config(fa_bwd, name)) for name in fa_bwd.CONFIGS]
    out += [(f"pointer_matmul_{name}", _pointer(pointer_matmul, "matmul", c))
            for name, c in pointer_matmul.CONFIGS.items()]
    out += [(f"pointer_bias_relu_{name}", _pointer(pointer_matmul, "bias_relu", c))
            for name, c in pointer_matmul.BIAS_CONFIGS.items()]
    out += [(f"pointer_attn_bwd_{name}", _pointer(pointer_attention_bwd, "bwd", c))
            for name, c in pointer_attention_bwd.CONFIGS.items()]
    out += [(f"persistent_{name}", _persistent(name)) for name in persistent_matmul.CONFIGS]
    out += [(f"grouped_matmul_{name}", _grouped(c)) for name, c in grouped_matmul.CONFIGS.items()]
    return out


def compile_once(make, cap, twill_cache=None):
    """Seconds of one compile with a fresh Triton cache (with twill when
    `twill_cache` names its schedule cache), and twill's Decision."""
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="cov-")
    if twill_cache is not None:
        os.environ["TWILL_CACHE_DIR"] = twill_cache
        twill_triton.enable(scope="all")
    src, opts = make(cap)
    started = time.monotonic()
    try:
        triton.compile(src, target=GPUTarget("cuda", cap, 32), options=opts)
        error = None
    except Exception as e:  # a kernel this Triton cannot compile for the target
        error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    finally:
        if twill_cache is not None:
            twill_triton.disable()
    seconds = time.monotonic() - started
    decision = twill_triton.decisions()[-1] if twill_cache is not None and twill_triton.decisions() else None
    return seconds, decision, error


def loops_of(decision):
    """What twill did with each loop: `scheduled (stages N)` or the skip code."""
    out = []
    for lp in ((decision.report or {}).get("loops") or []) if decision else []:
        if lp.get("decision") == "scheduled":
            out.append(f"scheduled ({lp['schedule']['stages']} stages)")
        else:
            out.append(lp.get("reason") or lp.get("decision") or "?")
    return out


def row(name, make, cap, warm_compiles=3):
    stock, _, error = compile_once(make, cap)
    if error:
        return dict(kernel=name, cap=cap, triton=triton.__version__, error=error)
    cache = tempfile.mkdtemp(prefix="twill-cache-")
    cold, d, error = compile_once(make, cap, cache)
    warms = [compile_once(make, cap, cache) for _ in range(max(1, warm_compiles))]
    # The median warm compile by twill's own seconds.
    warm, d2, _ = sorted(warms, key=lambda w: twill_seconds(w[1]))[len(warms) // 2]
    return dict(kernel=name, cap=cap, triton=triton.__version__, loops=loops_of(d), kept=bool(d and d.scheduled),
                fallback=None if d is None or d.scheduled else (d.reason or ""), error=error,
                stock=stock, cold=cold - stock, warm=warm - stock,
                twill_cold=twill_seconds(d), twill_warm=twill_seconds(d2),
                twill_warms=[round(twill_seconds(w[1]), 4) for w in warms],
                cached=all(getattr(w[1], "cached", False) for w in warms))


def twill_seconds(d):
    """What twill itself spent in the compile (the hook's own clock: the
    attribute route's twill-opt call, the lowering call, the verification),
    without the compile-to-compile noise of a difference of two compiles."""
    if d is None:
        return 0.0
    return d.schedule_seconds + d.lowering_seconds + d.verify_seconds


def table(rows):
    print("| kernel | target | loops (scope=all) | kept | stock s | added cold s | added warm s "
          "| twill cold s | twill warm s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "stock" not in r:
            print(f"| {r['kernel']} | cuda:{r['cap']} | not compiled by stock Triton: {r['error']} | | | | |")
            continue
        kept = "yes" if r["kept"] else f"no: {(r['fallback'] or r['error'] or '')[:80]}"
        print(f"| {r['kernel']} | cuda:{r['cap']} | {', '.join(r['loops']) or 'no loop'} | {kept} | "
              f"{r['stock']:.2f} | {r['cold']:+.2f} | {r['warm']:+.2f} | {r['twill_cold']:.3f} | "
              f"{r['twill_warm']:.3f} |")
    timed = [r for r in rows if "stock" in r]
    for what in ("cold", "warm", "twill_cold", "twill_warm"):
        xs = [r[what] for r in timed]
        if xs:
            print(f"\nadded {what}: median {statistics.median(xs):+.3f} s, max {max(xs):+.3f} s over {len(xs)} compiles")


def merged(paths):
    """BENCHMARKS.md's coverage table: the rows of several `--json` runs
    (one per Triton) side by side, per kernel and target."""
    runs = []
    for path in paths:
        with open(path) as f:
            rows = json.load(f)
        label = next((r["triton"] for r in rows if r.get("triton")), os.path.basename(path))
        runs.append((label, {(r["kernel"], r["cap"]): r for r in rows}))
    head = "| kernel | target |" + "".join(f" Triton {t}: loops (scope=all); kernel | {t} twill s cold / warm |"
                                           for t, _ in runs)
    print(head)
    print("|---|---|" + "---|---|" * len(runs))
    keys = list(runs[0][1])
    keys += [k for _, rows in runs[1:] for k in rows if k not in keys]
    for kernel, cap in keys:
        cells = []
        for _, rows in runs:
            r = rows.get((kernel, cap))
            if r is None or "stock" not in r:
                cells += [f"not compiled: {r['error']}" if r else "not run", ""]
                continue
            kept = "kept" if r["kept"] else f"Triton's: {(r['fallback'] or r['error'] or '')[:60]}"
            cells += [f"{', '.join(r['loops']) or 'no loop'}; {kept}", f"{r['twill_cold']:.2f} / {r['twill_warm']:.3f}"]
        print(f"| {kernel} | cuda:{cap} | " + " | ".join(cells) + " |")
    for label, rows in runs:
        timed = [r for r in rows.values() if "stock" in r]
        kept = sum(1 for r in timed if r["kept"])
        cold = [r["twill_cold"] for r in timed]
        warm = [r["twill_warm"] for r in timed]
        print(f"\nTriton {label}: {kept} of {len(timed)} compiles keep twill's schedule; twill's own seconds cold "
              f"median {statistics.median(cold):.2f} max {max(cold):.2f}, warm median {statistics.median(warm):.3f} "
              f"max {max(warm):.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--caps", default="90,100")
    ap.add_argument("--only", default="", help="comma-separated substrings of kernel names")
    ap.add_argument("--json", default=None)
    ap.add_argument("--warm", type=int, default=3, help="warm compiles per kernel (their median counts)")
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="print the table of these --json runs and exit")
    a = ap.parse_args()
    if a.merge:
        merged(a.merge)
        return 0
    print(f"triton {triton.__version__}, {os.cpu_count()} CPUs", flush=True)
    rows = []
    for cap in (int(c) for c in a.caps.split(",")):
        for name, make in kernels():
            if a.only and not any(s in name for s in a.only.split(",")):
                continue
            rows.append(row(name, make, cap, a.warm))
            print(json.dumps(rows[-1]), flush=True)
    table(rows)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
