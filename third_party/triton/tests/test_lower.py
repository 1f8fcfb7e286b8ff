"""`lower=force` output through the rest of Triton's compile, on the CPU.

twill-opt lowers the TMA GEMM (test/Inputs/triton36/gemm_sm90.before.mlir)
to a `ttg.warp_specialize` (docs/ws-lowering.md, milestone 1); the module,
with the aliases restored as the hook does, goes through the passes of
`make_ttgir` that follow the hook's point (Hopper WS onwards, the recorded
list test/Inputs/triton36/passes_cuda90.txt), then `make_llir`, `make_ptx`
and `make_cubin` for cuda:90. The lowering must survive them: one ws op,
still exactly the two wgmma waits twill placed (pendings 1 in the loop, 0
after it; `tt.num_stages = 0` keeps `add_pipeline` from serializing the
wgmma), 8 warps (4 compute + the producer's warp group), shared memory
within the H100's, and register reallocation in the PTX.

On Triton 3.9 the same 3.6 capture is used with its descriptor types
respelled for 3.9's parser (`!tt.tensordesc<tensor<T>>` becomes
`!tt.tensordesc<T>`) before twill runs with `triton=3.9`, which puts the
captures on `ttg.warp_specialize.partitions` and gives the TMA copies their
operand segments (docs/ws-lowering.md, 1.1 and 1.3); the tail is 3.9's
(compiler.py: no prefetch, plus tmem_load_reduce and
hoist_mbarrier_lifecycle).

Needs twill-opt (TWILL_OPT, or target/release/twill-opt of this checkout).
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

triton = pytest.importorskip("triton")
from triton._C.libtriton import ir, nvidia, passes  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.backends.nvidia.compiler import CUDABackend  # noqa: E402

from twill_triton import hook  # noqa: E402

TWILL_OPT = os.environ.get("TWILL_OPT") or str(REPO / "target" / "release" / "twill-opt")
INPUTS = REPO / "test" / "Inputs" / "triton36"
CAP = 90
SMEM = 232448

P, N = passes, nvidia.passes

# The rest of make_ttgir from the hook's point, with Triton 3.6's arguments.
TAIL36 = [
    ("nvidia.passes.hopper.add_hopper_warpspec", lambda pm: N.hopper.add_hopper_warpspec(pm, 3, False)),
    ("passes.ttgpuir.add_assign_latencies", lambda pm: P.ttgpuir.add_assign_latencies(pm, 3)),
    ("passes.ttgpuir.add_schedule_loops", P.ttgpuir.add_schedule_loops),
    ("passes.ttgpuir.add_pipeline", lambda pm: P.ttgpuir.add_pipeline(pm, 3, False)),
    ("passes.common.add_canonicalizer", P.common.add_canonicalizer),
    ("passes.ttir.add_loop_aware_cse", P.ttir.add_loop_aware_cse),
    ("passes.ttgpuir.add_prefetch", P.ttgpuir.add_prefetch),
    ("passes.ttgpuir.add_optimize_dot_operands", lambda pm: P.ttgpuir.add_optimize_dot_operands(pm, True)),
    ("passes.ttgpuir.add_coalesce_async_copy", P.ttgpuir.add_coalesce_async_copy),
    ("nvidia.passes.ttnvgpuir.add_optimize_tmem_layouts", N.ttnvgpuir.add_optimize_tmem_layouts),
    ("nvidia.passes.ttnvgpuir.add_tma_lowering", N.ttnvgpuir.add_tma_lowering),
    ("passes.ttgpuir.add_remove_layout_conversions", P.ttgpuir.add_remove_layout_conversions),
    ("nvidia.passes.ttnvgpuir.add_interleave_tmem", N.ttnvgpuir.add_interleave_tmem),
    ("passes.ttgpuir.add_reduce_data_duplication", P.ttgpuir.add_reduce_data_duplication),
    ("passes.ttgpuir.add_reorder_instructions", P.ttgpuir.add_reorder_instructions),
    ("passes.ttir.add_loop_aware_cse", P.ttir.add_loop_aware_cse),
    ("passes.common.add_symbol_dce", P.common.add_symbol_dce),
    ("nvidia.passes.ttnvgpuir.add_fence_insertion", lambda pm: N.ttnvgpuir.add_fence_insertion(pm, CAP)),
    ("nvidia.passes.ttnvgpuir.add_lower_mma", N.ttnvgpuir.add_lower_mma),
    ("passes.common.add_sccp", P.common.add_sccp),
    ("passes.common.add_cse", P.common.add_cse),
    ("passes.common.add_canonicalizer", P.common.add_canonicalizer),
]


def _tail39():
    return [
        lambda pm: N.hopper.add_hopper_warpspec(pm, 3, False),
        lambda pm: P.ttgpuir.add_assign_latencies(pm, 3),
        P.ttgpuir.add_schedule_loops,
        lambda pm: P.ttgpuir.add_pipeline(pm, 3, False),
        P.common.add_canonicalizer,
        P.ttir.add_loop_aware_cse,
        lambda pm: P.ttgpuir.add_optimize_dot_operands(pm, True),
        P.ttgpuir.add_coalesce_async_copy,
        N.ttnvgpuir.add_optimize_tmem_layouts,
        N.ttnvgpuir.add_tmem_load_reduce,
        N.ttnvgpuir.add_tma_lowering,
        P.ttgpuir.add_remove_layout_conversions,
        N.ttnvgpuir.add_interleave_tmem,
        P.ttgpuir.add_reduce_data_duplication,
        P.ttgpuir.add_reorder_instructions,
        P.ttir.add_loop_aware_cse,
        P.common.add_symbol_dce,
        lambda pm: N.ttnvgpuir.add_fence_insertion(pm, CAP),
        N.ttnvgpuir.add_lower_mma,
        lambda pm: N.ttnvgpuir.add_hoist_mbarrier_lifecycle(pm, CAP),
        P.common.add_sccp,
        P.common.add_cse,
        P.common.add_canonicalizer,
    ]


V36 = triton.__version__.startswith("3.6")
V39 = triton.__version__.startswith("3.9")
pytestmark = pytest.mark.skipif(not (V36 or V39), reason="Triton 3.6 and 3.9 only")


@pytest.mark.skipif(not V36, reason="the recorded list is Triton 3.6's")
def test_the_tail_is_the_recorded_one():
    recorded = (INPUTS / "passes_cuda90.txt").read_text().split()
    start = recorded.index("nvidia.passes.hopper.add_hopper_warpspec")
    assert [name for name, _ in TAIL36] == recorded[start:]


def _lowered(tmp_path, name="gemm_sm90", scope="all", partitions="1+1"):
    before = (INPUTS / f"{name}.before.mlir").read_text()
    version = "3.6"
    if V39:
        before = re.sub(r"!tt\.tensordesc<tensor<([^>]*)>>", r"!tt.tensordesc<\1>", before)
        version = "3.9"
    src = tmp_path / "before.mlir"
    src.write_text(before)
    out = tmp_path / "lowered.mlir"
    run = subprocess.run(
        [TWILL_OPT, str(src), "-mlir-print-debuginfo",
         f"--twill-schedule=lower=force scope={scope} arch=sm90 triton={version}", "-o", str(out)],
        capture_output=True, text=True, check=True,
    )
    assert f"twill: lowered to {partitions} partitions" in run.stderr, run.stderr
    text = hook._restore_aliases(before, out.read_text())
    path = tmp_path / "restored.mlir"
    path.write_text(text)
    return path


def _tail(path):
    """The module at `path` through the rest of make_ttgir: (backend, module)."""
    backend = CUDABackend(GPUTarget("cuda", CAP, 32))
    ctx = ir.context()
    ir.load_dialects(ctx)
    backend.load_dialects(ctx)
    mod = ir.parse_mlir_module(str(path), ctx)
    mod.context = ctx
    pm = ir.pass_manager(ctx)
    pm.enable_debug()
    for add in [add for _, add in TAIL36] if V36 else _tail39():
        add(pm)
    pm.run(mod, "twill-lower-tail")
    return backend, mod


def test_the_lowered_fa_forward_compiles(tmp_path):
    """The FA forward (8 warps, two wgmmas, a softmax between them, the K/V
    offset carried by the loop): the producer carries the offset; PV
    (register A) is issued one trip later, right after the next QK, whose
    wait (pendings 1) leaves it in flight under the softmax; a prologue
    (first QK and softmax) and an epilogue (last PV) wait for all."""
    backend, mod = _tail(_lowered(tmp_path, "fa_fwd_sm90", "ws"))
    ttgir = mod.str()
    assert ttgir.count("ttg.warp_specialize(") + ttgir.count('"ttg.warp_specialize"(') == 1
    waits = re.findall(r"ttng\.warp_group_dot_wait .*?\{pendings = (\d+) : i32\}", ttgir)
    assert waits == ["0", "1", "0", "0"], waits
    opts = backend.parse_options(dict(num_warps=8, num_stages=2))
    md = {}
    llir = backend.make_llir(mod, md, opts, CAP)
    assert md["num_warps"] == 12
    assert md["shared"] <= SMEM
    ptx = backend.make_ptx(llir, md, opts, backend.target.arch)
    assert "setmaxnreg.dec" in ptx and "setmaxnreg.inc" in ptx
    assert len(backend.make_cubin(ptx, md, opts, backend.target.arch)) > 0


def test_the_lowered_subtiled_fa_forward_compiles(tmp_path):
    """The sub-tiled FA forward at 4 warps: one compute partition per
    64-row half (the default region and a 4-warp worker), both reading the
    K/V rings; the worker's accumulator, row sums and maxima reach the code
    after the loop through result buffers."""
    backend, mod = _tail(_lowered(tmp_path, "fa_fwd_subtile_sm90_w4", "ws", "1+2"))
    ttgir = mod.str()
    assert ttgir.count("ttg.warp_specialize(") + ttgir.count('"ttg.warp_specialize"(') == 1
    assert ttgir.count("ttg.local_store") >= 3
    waits = re.findall(r"ttng\.warp_group_dot_wait .*?\{pendings = (\d+) : i32\}", ttgir)
    assert waits == ["0", "1", "0", "0"] * 2, waits
    opts = backend.parse_options(dict(num_warps=4, num_stages=2))
    md = {}
    llir = backend.make_llir(mod, md, opts, CAP)
    assert md["num_warps"] == 12
    assert md["shared"] <= SMEM
    ptx = backend.make_ptx(llir, md, opts, backend.target.arch)
    # The worker asks for 240 registers; the default region gets the same
    # from what is left, the producer's warp group 24.
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+24;", ptx)
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+240;", ptx)
    assert len(backend.make_cubin(ptx, md, opts, backend.target.arch)) > 0


def test_the_lowered_gemm_compiles_with_its_waits(tmp_path):
    backend, mod = _tail(_lowered(tmp_path))
    ttgir = mod.str()
    assert ttgir.count("ttg.warp_specialize(") + ttgir.count('"ttg.warp_specialize"(') == 1
    waits = re.findall(r"ttng\.warp_group_dot_wait .*?\{pendings = (\d+) : i32\}", ttgir)
    assert sorted(waits) == ["0", "1"], waits
    opts = backend.parse_options(dict(num_warps=4, num_stages=3))
    md = {}
    llir = backend.make_llir(mod, md, opts, CAP)
    assert md["num_warps"] == 8
    assert md["shared"] <= SMEM
    ptx = backend.make_ptx(llir, md, opts, backend.target.arch)
    assert "setmaxnreg.dec" in ptx and "setmaxnreg.inc" in ptx
    assert len(re.findall(r"wgmma\.wait_group\.sync\.aligned", ptx)) == 2
    cubin = backend.make_cubin(ptx, md, opts, backend.target.arch)
    assert len(cubin) > 0
