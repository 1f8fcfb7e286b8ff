"""bench/gpu/run.py's summaries, on the CPU: twill's configuration of a
kernel is the Gluon plan where twill has one (the FA forward kinds, the
head-dim-128 backward and the GEMM) and the Triton-path choice elsewhere, fixed per kernel; the faster
of twill's two rows is never picked; a run is summarized with the routes
it was measured under. Checked on synthetic runs and on the H100 runs
recorded in bench/gpu/results (2026-11-25 and 2026-11-26)."""

import gzip
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("triton")
from bench.gpu import run  # noqa: E402


def _row(kernel, size, variant, tflops, correct=True, note=""):
    return dict(kernel=kernel, size=size, variant=variant, ms=1.0, tflops=tflops, correct=correct, max_err=0.0,
                note=note)


def _summarized(name):
    """The recorded H100 run bench/gpu/results/NAME, summarized."""
    with gzip.open(REPO / "bench" / "gpu" / "results" / name / "results.json.gz", "rt") as f:
        results = json.load(f)
    run.summarize(results)
    return results


def test_routes_are_fixed_per_kernel():
    """Every kernel's twill configuration goes through Gluon since
    shared-memory bandwidth entered the model (2026-11-26: the head-dim-64
    backward's plan is no longer refused); the runs of that morning recorded
    theirs with that backward on the Triton path."""
    for kernel in ("fa_fwd", "fa_fwd_causal", "fa_fwd_subtile", "fa_fwd_hd64", "matmul", "fa_bwd_hd128",
                   "fa_bwd_hd64"):
        assert run.CONFIG_ROUTE[kernel] == "gluon", kernel
    for old in ("2026-11-26-h100-run40-triton36", "2026-11-26-h100-run41-triton39"):
        with gzip.open(REPO / "bench" / "gpu" / "results" / old / "results.json.gz", "rt") as f:
            assert "fa_bwd_hd64" not in run.config_route(json.load(f)), old


def test_a_run_is_summarized_with_the_routes_it_recorded():
    """A run records its routes; one recorded before that (the H100 runs up to
    2026-11-25) had the backward on the Triton path and is summarized so."""
    rows = [_row("fa_bwd_hd128", 1024, "triton w8 s3", 400.0),
            _row("fa_bwd_hd128", 1024, "twill choice w8 s2", 398.0),
            _row("fa_bwd_hd128", 1024, run.GLUON_ROW, 430.0)]
    new = {"rows": list(rows), "config_route": dict(run.CONFIG_ROUTE)}
    run.summarize(new)
    (c,) = new["summary_config"]
    assert c["route"] == "gluon" and c["twill"] == run.GLUON_ROW and c["ratio"] == pytest.approx(430 / 400)
    old = {"rows": list(rows)}
    run.summarize(old)
    (c,) = old["summary_config"]
    assert c["route"] == "triton" and c["twill"].startswith("twill choice")
    assert c["ratio"] == pytest.approx(398 / 400)


def test_configuration_summary_takes_the_route_not_the_faster_row(capsys):
    """A Gluon kernel whose Triton-path row is faster than its Gluon row
    still reports the Gluon row; a wrong Gluon row reports no ratio; a
    kernel without a Gluon plan reports the Triton-path choice."""
    results = {"rows": [
        _row("fa_fwd", 1024, "triton BN64 w4 s2", 400.0),
        _row("fa_fwd", 1024, "twill choice BN64 w4 s2", 450.0),
        _row("fa_fwd", 1024, run.GLUON_ROW, 420.0),
        _row("fa_fwd_causal", 1024, "triton BN64 w4 s2", 300.0),
        _row("fa_fwd_causal", 1024, run.GLUON_ROW, 900.0, correct=False),
        _row("fa_bwd_hd64", 1024, "triton b32 w4 s3", 300.0),
        _row("fa_bwd_hd64", 1024, "twill choice b32 w4 s2", 297.0),
    ], "paired_gluon": [dict(kernel="fa_fwd", size=1024, ratio=1.04, same_code=None)],
        "paired": [dict(kernel="fa_bwd_hd64", size=1024, ratio=0.995, same_code=True)]}
    run.summarize(results)
    got = {(c["kernel"], c["size"]): c for c in results["summary_config"]}
    fwd = got[("fa_fwd", 1024)]
    assert fwd["route"] == "gluon" and fwd["twill"] == run.GLUON_ROW
    assert fwd["ratio"] == pytest.approx(420 / 400) and fwd["paired_ratio"] == 1.04
    causal = got[("fa_fwd_causal", 1024)]
    assert causal["route"] == "gluon" and not causal["correct"] and causal["ratio"] is None
    bwd = got[("fa_bwd_hd64", 1024)]
    assert bwd["route"] == "triton" and bwd["twill"].startswith("twill choice") and bwd["same_code"]
    assert bwd["ratio"] == pytest.approx(0.99)
    assert "twill's configuration of each kernel" in capsys.readouterr().out


def test_recorded_run_without_routes():
    """The H100 run of 2026-11-25 on Triton 3.6.0, before runs recorded their
    routes: every kernel at every size has twill's configuration, correct; each
    Gluon plan's paired ratio is above 1.01; the rows whose paired ratio is
    below 1 are the backward's, on the Triton path, within 1.5% of 1."""
    config = _summarized("2026-11-25-h100-run38-triton36")["summary_config"]
    assert len(config) == 20 and all(c["correct"] for c in config)
    for c in config:
        if c["route"] == "gluon":
            assert c["paired_ratio"] > 1.01, c
        else:
            assert c["kernel"].startswith("fa_bwd"), c
    below = [c for c in config if c["paired_ratio"] < 1]
    assert below and all(c["route"] == "triton" and c["paired_ratio"] > 0.985 for c in below), below


@pytest.mark.parametrize("name", ["2026-11-26-h100-run40-triton36", "2026-11-26-h100-run41-triton39"])
def test_recorded_runs_with_the_hd128_backward_through_gluon(name):
    """The H100 runs of 2026-11-26 before shared-memory bandwidth entered the
    model (Triton 3.6.0 and 3.9.0), which recorded their routes: the backward
    at head dim 128 through Gluon, every kernel at every size correct in
    twill's configuration, every Gluon plan's paired ratio above 1.01; the only
    rows below 1 are the head-dim-64 backward's, on the Triton path, within 1%
    of 1."""
    results = _summarized(name)
    assert results["config_route"]["fa_bwd_hd128"] == "gluon"
    config = results["summary_config"]
    assert len(config) == 20 and all(c["correct"] for c in config)
    for c in config:
        if c["route"] == "gluon":
            assert c["paired_ratio"] > 1.01, c
        else:
            assert c["kernel"] == "fa_bwd_hd64", c
    below = [c for c in config if c["paired_ratio"] < 1]
    assert all(c["kernel"] == "fa_bwd_hd64" and c["paired_ratio"] > 0.99 for c in below), below


@pytest.mark.parametrize("name", ["2026-11-26-h100-run42-triton36", "2026-11-26-h100-run43-triton39",
                                  "2026-11-26-h100-run44-triton36", "2026-11-26-h100-run45-triton36"])
def test_recorded_runs_every_kernel_through_gluon(name):
    """The H100 runs of 2026-11-26 after shared-memory bandwidth entered the
    model (three on Triton 3.6.0, the H100's own; one on 3.9.0, carried): every
    kernel's twill configuration is a Gluon plan and correct at every size. On
    3.6 every one reaches the best stock configuration paired, and the FA
    forward runs above 600 TFLOPS at 16k; by the first pass's ratio too, except
    in the last of them (at commit 5e8f617) the head-dim-64 backward at 4k
    (0.977 against b32 w4 s5, the fastest of the grid in that pass; paired
    1.038). On 3.9 the rows below 1 are the head-dim-64 backward's at 1k and 4k
    (paired 0.972 and 0.983) and the head-dim-128 backward's ratio at 4k
    (paired 1.083)."""
    results = _summarized(name)
    config = results["summary_config"]
    assert len(config) == 20 and all(c["correct"] and c["route"] == "gluon" for c in config)
    fwd16k = next(c for c in config if c["kernel"] == "fa_fwd" and c["size"] == 16384)
    if name.endswith("triton36"):
        assert all(c["paired_ratio"] >= 1 for c in config), config
        below = {(c["kernel"], c["size"]) for c in config if c["ratio"] < 1}
        assert below == ({("fa_bwd_hd64", 4096)} if "run45" in name else set()), below
        assert fwd16k["twill_tflops"] > 600
    else:
        below = {(c["kernel"], c["size"]) for c in config if min(c["ratio"], c["paired_ratio"]) < 1}
        assert below == {("fa_bwd_hd64", 1024), ("fa_bwd_hd64", 4096), ("fa_bwd_hd128", 4096)}, below
        assert all(c["paired_ratio"] > 0.97 for c in config)


def test_missing_rows_are_shown():
    """A kernel with a stock row but no row of twill's configuration (no
    recorded plan, a failed compile) is listed as missing, not dropped."""
    results = {"rows": [_row("fa_fwd_causal", 1024, "triton BN64 w4 s2", 300.0),
                        _row("fa_fwd_causal", 1024, "twill choice BN64 w4 s2", 301.0)]}
    run.summarize(results)
    (c,) = results["summary_config"]
    assert c["missing"] and c["route"] == "gluon" and c["ratio"] is None
