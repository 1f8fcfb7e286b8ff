"""The user's num_stages through the hook, on the CPU (Triton 3.6.0 / 3.9.0).

The hook passes Triton's `num_stages` to `--twill-schedule` (`num-stages=`);
by default it bounds the stages twill writes, and a loop's own
`tl.range(num_stages=...)` (the exported loop's `tt.num_stages`) wins for
that loop. Each kernel is compiled to cubin for cuda:90 and cuda:100 under
scope=all, and the report of twill's call is read back.

Needs twill-opt (TWILL_OPT, or target/release/twill-opt of this checkout).
"""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

import twill_triton  # noqa: E402
from kernels import matmul  # noqa: E402

TWILL_OPT = os.environ.get("TWILL_OPT") or str(REPO / "target" / "release" / "twill-opt")
# What a loop left to Triton under the bound may say (the remark's reason).
BOUNDED_SKIPS = {"same_as_triton", "no_schedule", "num_stages_exceeded"}


@triton.jit
def matmul_loop_stages_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                              BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """kernels/matmul.py's GEMM with its loop's own num_stages (2)."""
    pid = tl.program_id(axis=0)
    off_m = (pid % tl.cdiv(M, BLOCK_M)) * BLOCK_M
    off_n = (pid // tl.cdiv(M, BLOCK_M)) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_K), num_stages=2):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([off_n, k * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([off_m, off_n], acc.to(tl.float16))


@pytest.fixture
def twill(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    twill_triton.enable(twill_opt=TWILL_OPT, scope="all", timeout=20, dump_dir=str(tmp_path / "dump"))
    yield
    twill_triton.disable()


def _gemm_source(loop_stages=False):
    from triton.compiler import ASTSource

    cfg = {k: v for k, v in matmul.DEFAULT_CONFIG.items() if k not in ("num_warps", "num_stages")}
    if not loop_stages:
        return matmul.make_ast_source(**cfg)
    signature, constexprs, attrs = matmul.ast_source_args(**cfg)
    return ASTSource(fn=matmul_loop_stages_kernel, signature=signature, constexprs=constexprs, attrs=attrs)


def _loops(src, cap, num_stages):
    """The loop records of twill's call for `src` compiled at `num_stages`."""
    before = len(twill_triton.decisions())
    triton.compile(src, target=GPUTarget("cuda", cap, 32), options=dict(num_warps=4, num_stages=num_stages))
    made = twill_triton.decisions()[before:]
    assert len(made) == 1, made
    assert made[0].report is not None, made[0].reason
    return made[0].report["loops"]


# What becomes of the GEMM's loop per (cuda capability, num_stages): on sm90
# twill's schedule (2 stages, the loads issued first); on sm100 within 3
# stages twill's best is Triton's own assignment, and within 2 none exists
# (the load placed after its tcgen05 reader takes a stage of its own).
GEMM = {(90, 2): "scheduled", (90, 3): "scheduled", (100, 3): "same_as_triton", (100, 2): "no_schedule"}


@pytest.mark.parametrize("cap", [90, 100])
@pytest.mark.parametrize("num_stages", [2, 3])
def test_the_schedule_keeps_within_triton_num_stages(twill, cap, num_stages):
    loops = _loops(_gemm_source(), cap, num_stages)
    assert len(loops) == 1
    r = loops[0]
    assert (r["reason"] or r["decision"]) == GEMM[(cap, num_stages)], r
    if r["decision"] == "skipped":
        assert r["reason"] in BOUNDED_SKIPS
        assert f"num_stages={num_stages}" in r["text"] or f"within {num_stages} stages" in r["text"], r["text"]
        return
    s = r["schedule"]
    assert s["stages"] <= num_stages, r
    assert s["num_stages"]["requested"] == num_stages
    assert (s["num_stages"]["source"], s["num_stages"]["mode"]) == ("option", "bound")
    if s["stages"] < num_stages:
        assert "fewer" in s["num_stages"]["text"], s["num_stages"]


def test_a_loops_own_num_stages_wins(twill):
    # Compiled at num_stages=4; the loop asks for 2.
    loops = _loops(_gemm_source(loop_stages=True), 90, 4)
    assert len(loops) == 1
    r = loops[0]
    assert r["decision"] == "scheduled", r
    s = r["schedule"]
    assert s["num_stages"]["requested"] == 2 and s["num_stages"]["source"] == "loop", s["num_stages"]
    assert s["stages"] <= 2


def test_stages_free_reports_the_bound_without_keeping_it(twill, monkeypatch):
    twill_triton.disable()
    twill_triton.enable(twill_opt=TWILL_OPT, scope="all", timeout=20, extra_options="stages=free")
    # On cuda:100 the free optimum of the GEMM takes 4 stages (I = 2), more
    # than num_stages=3 allows.
    loops = _loops(_gemm_source(), 100, 3)
    s = loops[0]["schedule"]
    assert s["num_stages"]["mode"] == "free"
    assert s["stages"] == 4 and "above it" in s["num_stages"]["text"], s
