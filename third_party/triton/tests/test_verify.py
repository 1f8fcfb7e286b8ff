"""The pipeline-protocol verifier in the hook: no pipeline built from a twill
schedule reaches make_llir without its proof.

* Pointer-load (cp.async) kernels written by others' pattern (the tutorial-03
  style matmul, its bias + ReLU variant, a tutorial-06 style attention
  backward) and the TMA kernels of kernels/ compile with twill
  (scope=all) for cuda:90: every loop twill scheduled is in the verifier's
  records, proved, at its source location.
* A racy schedule (twill's schedule of the matmul as the pre-fix back end
  wrote it: the loads in the wgmma's cluster, replayed) is rejected: the
  kernel falls back to Triton's own schedule with the verifier's reason in
  the decision and the warning, and strict mode raises.
* TWILL_VERIFY_TRITON: where twill falls back, Triton's own pipeline is
  verified too and its records are in the decision.

Needs twill-opt (TWILL_OPT, or target/release/twill-opt of this checkout).
"""

import logging
import os
import re
import shutil
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402

import twill_triton  # noqa: E402
from kernels import load  # noqa: E402
from twill_triton import hook  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
TWILL_OPT = os.environ.get("TWILL_OPT") or str(REPO / "target" / "release" / "twill-opt")
KERNELS = Path(__file__).parent / "kernels"

pytestmark = pytest.mark.skipif(not Path(TWILL_OPT).exists(), reason="twill-opt not built")


pointer_matmul = load("twill_verify_pointer_matmul", KERNELS / "pointer_matmul.py")
attention_bwd = load("twill_verify_attention_bwd", KERNELS / "pointer_attention_bwd.py")
tma_matmul = load("twill_verify_tma_matmul", KERNELS / "matmul.py")
loop_with_if = load("twill_verify_loop_with_if", REPO / "test" / "Inputs" / "triton36" / "test_kernels.py")


def _tma():
    cfg = dict(tma_matmul.DEFAULT_CONFIG)
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages")}
    return tma_matmul.make_ast_source(**cfg), opts


def _loop_with_if():
    cfg = dict(loop_with_if.LOOP_WITH_IF_CONFIG)
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages")}
    return loop_with_if.make_ast_source(**cfg), opts


CASES = {f"matmul_{name}": (lambda c=c: pointer_matmul.ast_source("matmul", **c))
         for name, c in pointer_matmul.CONFIGS.items()}
CASES.update({f"bias_relu_{name}": (lambda c=c: pointer_matmul.ast_source("bias_relu", **c))
              for name, c in pointer_matmul.BIAS_CONFIGS.items()})
CASES.update({f"attention_bwd_{name}": (lambda c=c: attention_bwd.ast_source("bwd", **c))
              for name, c in attention_bwd.CONFIGS.items()})
CASES["tma_matmul"] = _tma


@pytest.fixture
def twill(tmp_path, monkeypatch):
    """twill enabled (scope=all) with a Triton cache of its own; yields a
    function that compiles (src, opts) for cuda:90 and returns its decision."""
    # A cache of this test's own (twill's cache directory goes under it).
    # Triton's knobs read TRITON_CACHE_DIR when asked; setting the knob
    # itself would leave an override behind for the tests that follow.
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("TWILL_REPLAY_DIR", "TWILL_DUMP_DIR", "TWILL_OPTIONS", "TWILL_STRICT", "TWILL_VERIFY_TRITON"):
        monkeypatch.delenv(var, raising=False)

    def compile_(args, **enable):
        src, opts = args
        enable.setdefault("scope", "all")
        twill_triton.enable(twill_opt=TWILL_OPT, **enable)
        try:
            before = len(hook.decisions())
            compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)
            new = hook.decisions()[before:]
            assert len(new) == 1, new
            return compiled, new[0]
        finally:
            twill_triton.disable()

    return compile_


_REMARK_LOC = re.compile(r":(\d+):(\d+): remark: twill: scheduled ")
_LOOP_LOC = re.compile(r'":(\d+):(\d+)\)')


def _scheduled_lines(decision):
    """(line, column) of every loop twill scheduled, from its remarks."""
    return sorted(tuple(map(int, m.groups())) for r in decision.remarks for m in [_REMARK_LOC.search(r)] if m)


def _record_lines(decision):
    """(line, column) of every proved loop in the verifier's records: the
    innermost file location of the loop (its first `"file":L:C)`)."""
    out = []
    for r in decision.verification:
        assert r["verdict"] == "proved", hook._verdict_text(r)
        m = _LOOP_LOC.search(r["loc"])
        out.append(tuple(map(int, m.groups())))
    return sorted(out)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_scheduled_loop_is_proved(twill, case):
    _, d = twill(CASES[case]())
    assert d.scheduled, d.reason
    scheduled = _scheduled_lines(d)
    assert scheduled, d.remarks
    # The verifier saw every pipelined loop of the module: each loop twill
    # scheduled is among them, proved.
    records = _record_lines(d)
    assert all(loc in records for loc in scheduled), (scheduled, records)


def _racy(text):
    """twill's schedule as the pre-fix back end wrote it for the tutorial-style
    matmul: every body op in cluster 0, so the cp.async copies share the
    wgmma's cluster and come before its wait."""
    racy = re.sub(r"loop\.cluster = \d+ : i32", "loop.cluster = 0 : i32", text)
    assert racy != text
    return racy


def test_a_racy_schedule_falls_back_with_the_verifiers_reason(twill, tmp_path, monkeypatch, caplog):
    args = CASES["matmul_128x64x64_w4_s4"]
    # Record twill's schedule, then replay it made racy.
    dump = tmp_path / "dump"
    monkeypatch.setenv("TWILL_DUMP_DIR", str(dump))
    _, d = twill(args())
    assert d.scheduled
    monkeypatch.delenv("TWILL_DUMP_DIR")
    for f in dump.rglob("scheduled.mlir"):
        f.write_text(_racy(f.read_text()))
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)
    monkeypatch.setenv("TWILL_REPLAY_DIR", str(dump))
    with caplog.at_level(logging.WARNING, logger="twill"):
        compiled, d = twill(args())
    assert not d.scheduled
    assert "the pipeline verifier did not prove" in d.reason
    assert "rule write-while-read" in d.reason and "ttng.warp_group_dot" in d.reason, d.reason
    rejected = [r for r in d.verification if r["verdict"] == "rejected"]
    assert rejected and rejected[0]["violations"][0]["rule"] == "write-while-read"
    assert any("the pipeline verifier did not prove" in m for m in caplog.messages)
    # What reached make_llir is Triton's own pipeline: the copies after the
    # wgmma wait, into rings of 4 slots.
    ttgir = compiled.asm["ttgir"]
    assert "4x128x64xf16" in ttgir
    # Strict mode raises instead.
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)
    with pytest.raises(twill_triton.TwillError, match="pipeline verifier did not prove"):
        twill(args(), strict=True)


def test_triton_own_pipelines_are_verified_on_request(twill, tmp_path):
    # scope=ws: twill leaves the TMA matmul's loop (not marked) to Triton,
    # which pipelines it.
    _, d = twill(_tma(), scope="ws", verify_triton=True)
    assert not d.scheduled and not d.verification
    assert d.triton_verification, "Triton's own pipeline was not verified"
    assert all(r["verdict"] == "proved" for r in d.triton_verification), [
        hook._verdict_text(r) for r in d.triton_verification]
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)
    _, d = twill(_tma(), scope="ws")
    assert not d.triton_verification
