"""The GPU benchmark's lowered variants (bench.gpu.run.lowered_variants,
hook `lower=True`) and the lowered GEMMs' correctness sweep
(bench.gpu.sweep), compiled for cuda:90 on the CPU: every GEMM variant and
every twill case of the sweep is lowered with the verifier's proof, and its
loop summaries are the expected ones (bench/gpu/expected/<triton>.json,
keys `twill_lowered_.../<kind>`; TWILL_BLESS=1 adds them). The other kinds'
lowered variants (refused today, and minutes of solving on the CPU) are
compiled with TWILL_BENCH_LOWERED_ALL=1. The sweep's hang guard is checked
with a stand-in child process.
"""

import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
triton = pytest.importorskip("triton")
pytest.importorskip("triton.experimental.gluon")

from bench.gpu import expected, run, sweep  # noqa: E402

TWILL_OPT = os.environ.get("TWILL_OPT") or str(REPO / "target" / "release" / "twill-opt")
needs_twill = pytest.mark.skipif(not os.path.exists(TWILL_OPT), reason="twill-opt not built")


def _lowered():
    kinds = [k for k, _ in run.kinds_configs()] if os.environ.get("TWILL_BENCH_LOWERED_ALL") == "1" else ["gemm"]
    return [(kind, variant, cx, opts) for kind in kinds for variant, cx, opts in run.lowered_variants(kind)]


@needs_twill
@pytest.mark.parametrize("kind,variant,cx,opts", _lowered(), ids=lambda v: v if isinstance(v, str) else "")
def test_lowered_variant(kind, variant, cx, opts, tmp_path, monkeypatch):
    monkeypatch.setenv("TWILL_OPT", TWILL_OPT)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    _, d, rec, note = run.lowered_compile(kind, cx, opts)
    if kind == "gemm":
        assert rec["ok"] and rec["lowered"] and all(rec["lowered_verified"]), note
    key, got = run.variant_key(kind, variant), expected.summaries(d)
    if os.environ.get("TWILL_BLESS") == "1":
        data = expected.load()
        if key not in data["schedules"]:  # new keys only
            data["schedules"][key] = [got]
            expected.save(data)
        return
    assert expected.compare(expected.load(), key, got) is None


def test_gemm_has_at_most_three_lowered_candidates():
    assert 1 <= len(run.lowered_variants("gemm")) <= 3
    assert all(v.startswith(run.LOWERED_ROW) for v, _, _ in run.lowered_variants("gemm"))


@needs_twill
def test_every_sweep_case_compiles_lowered(monkeypatch):
    monkeypatch.setenv("TWILL_OPT", TWILL_OPT)
    assert sweep.compile_only() == []


# A stand-in for the sweep's child: case 0 passes, case 1 hangs in its
# launch, case 2 passes, case 3's process dies before its result.
FAKE_CHILD = """
import json, sys, time
for i, _ in json.loads(sys.argv[1])["cases"]:
    print("COMPILE", i, flush=True)
    print("LAUNCH", i, flush=True)
    if i == 1:
        time.sleep(60)
    if i == 3:
        sys.exit(3)
    print("RESULT", json.dumps(dict(index=i, status="pass", err=0.0, note="")), flush=True)
"""


def test_the_hang_guard_reports_a_hang_and_goes_on(monkeypatch):
    monkeypatch.setattr(sweep, "HANG_S", 2)
    cases = [(i, (200, 136, 64)) for i in range(4)]
    import time

    got = sweep.run_child("host", "twill lowered", cases, time.time() + 60, [sys.executable, "-c", FAKE_CHILD])
    assert [got[i]["status"] for i in range(4)] == ["pass", "hang", "pass", "error"]


def test_a_sweep_passes_only_on_results():
    row = dict(kernel="host", M=200, N=136, K=0)
    both_refused = [dict(row, route=r, status="unsupported size") for r in sweep.ROUTES]
    assert sweep.verdict(both_refused)
    assert not sweep.verdict([dict(row, route="stock", status="pass"),
                              dict(row, route="twill lowered", status="unsupported size")])
    assert not sweep.verdict([dict(row, route="stock", status="pass"), dict(row, route="twill lowered", status="hang")])
    assert json.dumps(sweep.SHAPES)


def test_the_lowered_summary_takes_the_fastest_proved_variant():
    def row(variant, tflops):
        return dict(kernel="matmul", size=4096, variant=variant, ms=1.0, tflops=tflops, correct=True, max_err=0.0,
                    note="")

    results = dict(rows=[row("triton w4 s3", 500.0), row("twill lowered w4 s3", 520.0),
                         row("twill lowered ws w4 s3", 600.0), row("cublas (torch)", 650.0)],
                   lowered={"gemm twill lowered w4 s3": dict(ok=True), "gemm twill lowered ws w4 s3": dict(ok=False)},
                   paired_lowered=[dict(kernel="matmul", size=4096, ratio=1.04)])
    run.summarize_lowered(results)
    (s, ) = results["summary_lowered"]
    assert s["lowered"] == "twill lowered w4 s3" and s["ratio"] == 520.0 / 500.0 and s["paired_ratio"] == 1.04
    assert s["reference"] == "cublas (torch)" and s["vs_reference"] == 520.0 / 650.0
