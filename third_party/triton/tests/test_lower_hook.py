"""The hook's lowering route (TWILL_LOWER=1, docs/ws-lowering.md 3.7), on
the CPU for cuda:90 on the installed Triton.

A new user's kernel: a warp-specialized TMA GEMM (`tl.range(...,
warp_specialize=True)`, num_warps=4) whose descriptors are made in the
kernel, with a bias + ReLU epilogue. Without the lowering, Triton's Hopper
warp specialization splits its loop before twill's step and strict mode
raises. With TWILL_LOWER=1 the hook runs twill-opt (`lower=only`) before
that pass: the loop becomes twill's warp-specialized code, proved by the
pipeline verifier before it is emitted, and the module Triton finishes is
verified again. Also the host-descriptor GEMM of kernels/matmul.py, a GEMM
whose K offset the loop carries, the FA forward at 8 warps, the sub-tiled
FA forward at 4 warps (two compute partitions, one per 64-row half), and
the causal sub-tiled FA forward at 4 warps (two loops, each a ws op with a
partition per half: the diagonal loop's mask columns are recomputed by the
half whose group does not compute them, and the second loop's worker
starts from the first loop's results through read-only buffers), and
kernels the lowering refuses, which keep today's route: the FA forward at
4 warps (its schedule splits the softmax and the PV wgmma between groups:
P would need a channel) and the sub-tiled FA forward at 8 warps (two
8-warp compute partitions would leave too few registers).

Needs twill-opt (TWILL_OPT, or target/release/twill-opt of this checkout).
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

import twill_triton  # noqa: E402
from kernels import fa_bwd, fa_fwd, matmul  # noqa: E402

TWILL_OPT = os.environ.get("TWILL_OPT") or str(REPO / "target" / "release" / "twill-opt")


@triton.jit
def gemm_carried_offset(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr):
    # The K offset is carried by the loop (as in Triton's tutorials): the
    # producer partition carries its own copy.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    off_k = 0
    for _ in tl.range(0, tl.cdiv(K, BLOCK_K), warp_specialize=True):
        a = a_desc.load([off_m, off_k])
        b = b_desc.load([off_n, off_k])
        acc = tl.dot(a, b.T, acc)
        off_k += BLOCK_K
    c_desc.store([off_m, off_n], acc.to(tl.float16))


def _carried_offset(cap):
    from triton.compiler import ASTSource

    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
           "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"}
    cx = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}
    attrs = {(i, ): [["tt.divisibility", 16]] for i in range(6)}
    return ASTSource(fn=gemm_carried_offset, signature=sig, constexprs=cx, attrs=attrs), dict(num_warps=8)


def _bias_relu(cap):
    from triton.compiler import ASTSource

    cx = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}
    attrs = {(i, ): [["tt.divisibility", 16]] for i in range(7)}
    return (ASTSource(fn=matmul.gemm_bias_relu, signature=matmul.BIAS_RELU_SIGNATURE, constexprs=cx, attrs=attrs),
            dict(num_warps=4, num_stages=3))


def _host_descriptors(cap):
    cfg = dict(matmul.DEFAULT_CONFIG, WARP_SPECIALIZE=True)
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages")}
    return matmul.make_ast_source(**cfg), dict(opts, num_warps=4)


def _fa_subtiled(cap, num_warps=8):
    kwargs, opts = fa_fwd.split_config(fa_fwd.CONFIGS["subtile"][cap])
    return fa_fwd.make_ast_source(**kwargs), dict(opts, num_warps=num_warps)


def _fa_subtiled_w4(cap):
    return _fa_subtiled(cap, 4)


def _fa_causal_subtiled_w4(cap):
    kwargs, opts = fa_fwd.split_config(fa_fwd.CONFIGS["causal_subtile"][cap])
    return fa_fwd.make_ast_source(**kwargs), dict(opts, num_warps=4)


def _fa_causal(cap):
    kwargs, opts = fa_fwd.split_config(fa_fwd.CONFIGS["causal"][cap])
    return fa_fwd.make_ast_source(**kwargs), opts


@pytest.fixture
def twill(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    dump = tmp_path / "dump"

    def on(**kw):
        twill_triton.enable(twill_opt=TWILL_OPT, dump_dir=str(dump), **kw)
        return dump

    yield on
    twill_triton.disable()


def src_warps(make):
    return make(90)[1]["num_warps"]


def _compile(make, cap=90):
    src, opts = make(cap)
    return triton.compile(src, target=GPUTarget("cuda", cap, 32), options=opts)


def _lowered_dump(d):
    """The dump subdirectory of the lowering call (the module twill-opt was
    given before Hopper warp specialization, and what it wrote)."""
    dirs = [p for p in Path(d.dump).parent.iterdir() if (p / "command.txt").exists()
            and "lower=only" in (p / "command.txt").read_text()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def _fa_forward(cap):
    kwargs, opts = fa_fwd.split_config(fa_fwd.CONFIGS["default"][cap])
    return fa_fwd.make_ast_source(**kwargs), opts


def _fa_forward_w4(cap):
    # Descriptors made in the kernel: the form Triton's Hopper warp
    # specialization compiles at 4 warps.
    kwargs, opts = fa_fwd.split_config(dict(fa_fwd.CONFIGS["default"][cap], DEVICE_DESC=True))
    return fa_fwd.make_ast_source(**kwargs), dict(opts, num_warps=4)


@pytest.mark.parametrize("make,partitions,waits", [(_bias_relu, 1, 2), (_host_descriptors, 1, 2),
                                                   (_carried_offset, 1, 2), (_fa_forward, 1, 4),
                                                   (_fa_subtiled_w4, 2, 4)],
                         ids=["device_descriptors", "host_descriptors", "carried_offset_8_warps", "fa_forward_8_warps",
                              "fa_subtiled_4_warps"])
def test_a_warp_specialized_gemm_is_lowered_by_twill_in_strict_mode(twill, make, partitions, waits):
    twill(strict=True, lower=True)
    k = _compile(make)
    d = twill_triton.decisions()[-1]
    assert d.scheduled, d.reason
    assert len(d.lowered()) == 1, d.remarks
    (rec, ) = [r for r in d.loop_records() if r["name"] in d.lowered()]
    low = rec["schedule"]["lowering"]
    assert low["lowered"] and low["verified"], low
    assert low["compute_partitions"] == partitions, low
    assert any("proved by the pipeline verifier" in r for r in d.remarks), d.remarks
    # The module Triton finished was proved again by the verifier.
    assert d.verification and all(r["verdict"] == "proved" for r in d.verification), d.verification
    ttgir = k.asm["ttgir"]
    assert ttgir.count("ttg.warp_specialize") >= 1 and "twill.lowered" in ttgir
    # GEMM: in the loop and after it; FA (PV issued a trip later): one in
    # the prologue, two in the loop (QK^T with PV in flight, then PV), one
    # in the epilogue; in every compute partition.
    assert ttgir.count("ttng.warp_group_dot_wait") == waits * partitions
    # The compute partitions' warps, and the producer's warp padded to a
    # group.
    assert k.metadata.num_warps == partitions * src_warps(make) + 4
    assert "setmaxnreg" in k.asm["ptx"]
    # What twill added to the compile, by step.
    assert d.lowering_seconds > 0 and d.verify_seconds > 0 and d.schedule_seconds >= 0


def test_both_loops_of_the_causal_forward_are_lowered_each_to_its_ws_op(twill):
    """The causal FA forward at 8 warps: the K blocks left of the diagonal,
    then the diagonal block under its mask, both marked warp_specialize.
    Each loop becomes a ws op of its own in two stages (Triton joins every
    warp of the CTA at the end of each ws op); the verifier proves each, and
    the module Triton finished again."""
    twill(strict=True, lower=True)
    k = _compile(_fa_causal)
    d = twill_triton.decisions()[-1]
    assert d.scheduled, d.reason
    assert len(d.lowered()) == 2, d.remarks
    assert sum("proved by the pipeline verifier" in r for r in d.remarks) == 2, d.remarks
    assert len(d.verification) == 2 and all(r["verdict"] == "proved" for r in d.verification), d.verification
    ttgir = k.asm["ttgir"]
    assert ttgir.count("twill.lowered = \"depth") == 2, ttgir.count("twill.lowered")
    # Four waits in the first ws op; the diagonal block is one trip, so
    # Triton folds its steady loop (no trip) away and keeps the prologue's
    # and the epilogue's wait.
    assert ttgir.count("ttng.warp_group_dot_wait") == 6
    assert k.metadata.num_warps == 12
    assert "setmaxnreg" in k.asm["ptx"]


def test_both_loops_of_the_causal_sub_tiled_forward_are_lowered_with_a_partition_per_half(twill):
    """The causal sub-tiled FA forward at 4 warps: each loop a ws op with
    the default region and a worker, one per 64-row half. The diagonal
    loop's worker recomputes the mask's key columns, which the schedule put
    in the other half's group, and starts from the first loop's results
    (read-only buffers written before its ws op); both are proved before
    emission and the module Triton finished again, down to a cubin."""
    twill(strict=True, lower=True)
    k = _compile(_fa_causal_subtiled_w4)
    d = twill_triton.decisions()[-1]
    assert d.scheduled, d.reason
    assert len(d.lowered()) == 2, d.remarks
    lows = [r["schedule"]["lowering"] for r in d.loop_records() if r["name"] in d.lowered()]
    assert all(low["lowered"] and low["verified"] and low["compute_partitions"] == 2 for low in lows), lows
    assert "initial-value buffers" not in lows[0]["text"] and "3 initial-value buffers" in lows[1]["text"], lows
    assert "ops of other groups recomputed" in lows[1]["text"], lows
    assert len(d.verification) == 2 and all(r["verdict"] == "proved" for r in d.verification), d.verification
    ttgir = k.asm["ttgir"]
    assert ttgir.count("twill.lowered = \"depth") == 2
    assert k.metadata.num_warps == 12 and k.metadata.shared <= 232448
    assert "setmaxnreg" in k.asm["ptx"]


def _fa_backward(cap):
    kwargs, opts = fa_bwd.split_config(fa_bwd.CONFIGS["hd64"][cap])
    return fa_bwd.make_ast_source(**kwargs), opts


def test_a_lowered_kernel_the_verifier_cannot_prove_takes_the_attribute_route(twill, caplog):
    """The FA backward at 8 warps: its dQ loop is lowered (one compute
    group; K read by two wgmmas, each reading every value of its ring),
    its dK/dV loop is not (pointer loads of M and Delta in the
    variable-latency group) and Triton pipelines it beside the ws op, which
    the verifier does not prove. The kernel is compiled again without the
    lowering: twill's schedule on both loops, proved, not Triton's own."""
    twill(lower=True)
    with caplog.at_level("WARNING", logger="twill"):
        k = _compile(_fa_backward)
    d = twill_triton.decisions()[-1]
    assert d.scheduled and not d.lowered(), d.reason
    assert d.lowering_abandoned and "beside a ttg.warp_specialize" in d.lowering_abandoned, d.lowering_abandoned
    assert d.verification and all(r["verdict"] == "proved" for r in d.verification), d.verification
    assert any("falls back to the attribute route" in m for m in caplog.messages), caplog.messages
    assert "twill.lowered" not in k.asm["ttgir"] and "ttg.warp_specialize" not in k.asm["ttgir"]


def test_without_the_lowering_tritons_hopper_ws_splits_the_loop(twill):
    twill(strict=False, lower=False)
    k = _compile(_bias_relu)
    d = twill_triton.decisions()[-1]
    assert not d.lowered() and not d.scheduled
    assert "twill.lowered" not in k.asm["ttgir"]


def test_the_dump_keeps_the_lowered_module_and_twill_opt_reproduces_it(twill):
    twill(strict=True, lower=True)
    _compile(_bias_relu)
    d = twill_triton.decisions()[-1]
    work = _lowered_dump(d)
    cmd = (work / "command.txt").read_text().strip()
    args = [a.strip("'") for a in re.findall(r"'[^']*'|\S+", cmd)]
    out = work / "again.mlir"
    args[args.index("-o") + 1] = str(out)
    subprocess.run(args, check=True, capture_output=True)
    assert out.read_text() == (work / "output.mlir").read_text()


@pytest.mark.parametrize("make,why", [(_fa_forward_w4, "channels between partitions are not supported"),
                                      (_fa_subtiled, "2 compute groups")], ids=["channel", "two_8_warp_groups"])
def test_a_loop_the_lowering_refuses_keeps_the_attribute_route(twill, make, why, caplog):
    twill(lower=True)
    with caplog.at_level("INFO", logger="twill"):
        _compile(make)
    d = twill_triton.decisions()[-1]
    assert not d.lowered()
    assert d.lowering is None or all(r["reason"] == "lowering_refused" for r in d.lowering["loops"]), d.lowering
    assert any("nothing lowered" in m and why in m for m in caplog.messages), caplog.messages
