"""bench/gpu/run.py's summaries, on the CPU: twill's configuration of a
kernel is the Gluon plan where twill has one (the FA forward kinds, the
head-dim-128 backward and the GEMM) and the Triton-path choice elsewhere, fixed per kernel; the faster
of twill's two rows is never picked; a run is summarized with the routes
it was measured under. Checked on synthetic runs."""


import pytest

pytest.importorskip("triton")
from bench.gpu import run  # noqa: E402


def _row(kernel, size, variant, tflops, correct=True, note=""):
    return dict(kernel=kernel, size=size, variant=variant, ms=1.0, tflops=tflops, correct=correct, max_err=0.0,
                note=note)


def test_routes_are_fixed_per_kernel():
    """Every kernel's twill configuration goes through Gluon; a run that
    recorded no route for a kernel is summarized on the Triton path."""
    for kernel in ("fa_fwd", "fa_fwd_causal", "fa_fwd_subtile", "fa_fwd_hd64", "matmul", "fa_bwd_hd128",
                   "fa_bwd_hd64"):
        assert run.CONFIG_ROUTE[kernel] == "gluon", kernel
    old = {"config_route": {k: v for k, v in run.CONFIG_ROUTE.items() if k != "fa_bwd_hd64"}}
    assert "fa_bwd_hd64" not in run.config_route(old)


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


def test_missing_rows_are_shown():
    """A kernel with a stock row but no row of twill's configuration (no
    recorded plan, a failed compile) is listed as missing, not dropped."""
    results = {"rows": [_row("fa_fwd_causal", 1024, "triton BN64 w4 s2", 300.0),
                        _row("fa_fwd_causal", 1024, "twill choice BN64 w4 s2", 301.0)]}
    run.summarize(results)
    (c,) = results["summary_config"]
    assert c["missing"] and c["route"] == "gluon" and c["ratio"] is None
