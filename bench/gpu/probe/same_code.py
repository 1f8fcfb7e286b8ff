"""Which paired rows of a GPU run compare a kernel with itself (CPU only).

For every paired row of a run's results.json, compiles twill's choice from
the model's choice (bench/gpu/plans/<triton>/choice.json), scheduled live, and the stock
configuration it was paired with, and compares them with `run.same_code`
(the same instructions and launch). The H100 bench run on Triton 3.6 of
2026-11-24 16:16 UTC recorded the comparison of cubin bytes, which differ in the line tables' source path
even for the same code; this recomputes it. Valid only while the recorded
choices are the ones the run used: a row whose twill label differs from
the recorded choice is refused. Needs the Triton version (and, for 3.9,
the ptxas) of the run: see bench/gpu/plans.sh.

    python -m bench.gpu.probe.same_code RESULTS_JSON [--out FILE]
"""
import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path


import triton  # noqa: E402

from bench.gpu import run  # noqa: E402

# The result rows' kernel names -> run.py's kinds (the names bench_all
# gives its rows).
KINDS = {**{row: kind for kind, row in run.FA_ROWS.items()}, **{"fa_" + kind: kind for kind in run.BWD_KINDS},
         "matmul": "gemm"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--out")
    a = ap.parse_args()
    raw = Path(a.results).read_bytes()
    # Past runs' results.json are stored gzipped (results.json.gz).
    res = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    if not res["triton"].startswith(triton.__version__.rsplit(".", 1)[0]):
        sys.exit(f"the run used Triton {res['triton']}, this is {triton.__version__}")
    choice = run.load_choice()
    grids = {kind: grid for kind, (_, grid) in run.kinds()}
    rows = []
    for p in res["paired"]:
        kind, size = KINDS[p["kernel"]], p["size"]
        ch = choice[kind][str(size)]
        if p["twill"] != f"twill choice {ch['label']}":
            sys.exit(f"{p['kernel']} {size}: the run's twill row is {p['twill']!r}, the recorded choice "
                     f"{ch['label']!r}: the recording changed since the run")
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="same-code-")
        ours, _ = run.twill_compile(kind, ch["cx"], ch["opts"], ch["extra"])
        stock = p["stock"][len("triton "):]
        cx, opts = next((cx, o) for cx, o in grids[kind] if run.name_of(kind, cx, o) == stock)
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="same-code-")
        same = run.same_code(ours, run.compile_kernel(kind, cx, opts))
        rows.append(dict(kernel=p["kernel"], size=size, stock=p["stock"], twill=p["twill"], ratio=p["ratio"],
                         recorded_same_code=p.get("same_code"), same_code=same))
        print(f"{p['kernel']:15s} {size:>6} {p['ratio']:.3f} same code: {same} (recorded: {p.get('same_code')})",
              flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(dict(
            results=a.results, triton=triton.__version__, date=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            command=" ".join(["python", "-m", "bench.gpu.probe.same_code"] + sys.argv[1:]), rows=rows), indent=1))


if __name__ == "__main__":
    main()
