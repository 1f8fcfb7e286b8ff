"""twill's joint schedule of the GEMM loop lowered to Gluon (bench/kernels/
matmul_gluon.py) and its plan (bench/kernels/matmul_gluon_plan.py), on the
CPU:

* Triton cannot build a warp-specialized form of this GEMM on Hopper: its own
  warp specialization fails at 4 warps and leaves the loop alone at 8 (the
  reason the plan is lowered through Gluon);
* the sub-tiled loop the pass exports is the recorded graph, and twill's
  joint schedule of it puts the loads on the producer and both wgmmas on one
  compute group at I = ResMII (proven), with two steps of prefetch;
* the kernel compiles at the recorded plan (one consumer group, 6 ring
  slots, one CTA per SM, persistent) without spills, with asynchronous
  wgmmas; the plan's two-CTA option is refused because the ring the schedule
  needs does not fit;
* schedules outside the family are refused, and the plan's arithmetic
  (register split, deepest ring) is what it says.
"""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

triton = pytest.importorskip("triton")
pytest.importorskip("triton.experimental.gluon")
from triton.backends.compiler import GPUTarget  # noqa: E402

from bench.kernels import matmul_gluon  # noqa: E402
from bench.kernels import matmul_gluon_plan as P  # noqa: E402
from third_party.triton.tests.kernels import matmul  # noqa: E402
from twill_triton import configure  # noqa: E402

TWILL_OPT = os.environ.get("TWILL_OPT") or str(REPO / "target" / "release" / "twill-opt")
TWILL = str(Path(TWILL_OPT).with_name("twill"))
SM90 = GPUTarget("cuda", 90, 32)
BASE = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8)
# The GEMM plan of each Triton version (bench/gpu/expected, made by
# bench/gpu/run.py --plans) and the graphs it was solved from (data/gemm_plan).
EXPECTED = REPO / "bench" / "gpu" / "expected"
GRAPHS = Path(__file__).resolve().parent / "data" / "gemm_plan"
needs_twill = pytest.mark.skipif(not (os.path.exists(TWILL_OPT) and os.path.exists(TWILL)),
                                 reason="twill-opt / twill not built")


def _recorded_here():
    """(the directory of this Triton version's GEMM graphs, its GEMM plan)."""
    path = EXPECTED / f"{triton.__version__}.json"
    if not path.exists():
        pytest.skip(f"no expected GEMM plan for Triton {triton.__version__}")
    return GRAPHS / triton.__version__, json.loads(path.read_text())["gluon"]["gemm"]


# Per tile width: the Triton path's warps, and what twill's schedule fixes
# (both halves on one group at 128 columns; at 256 the two accumulators,
# 128 registers each, exceed one group's limit).
TILES = {128: dict(warps=4, consumers=1, prefetch=2, min_stages=4, stages=6),
         256: dict(warps=8, consumers=2, prefetch=1, min_stages=3, stages=3)}


# Triton's own Hopper warp specialization on this GEMM at 4 warps: what it
# reports (3.6.0; 3.9.0), after splitting the tile for two consumers.
WS_ERRORS = ("tensor descriptor block and tensor types must match",
             "descriptor block and tensor must have the same number of elements")


def test_triton_cannot_warp_specialize_this_gemm(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    src = matmul.make_ast_source(**BASE, WARP_SPECIALIZE=True)
    with pytest.raises(Exception, match="PassManager::run failed"):
        triton.compile(src, target=SM90, options=dict(num_warps=4, num_stages=3))
    err = capfd.readouterr().err
    assert any(m in err for m in WS_ERRORS), err[-2000:]
    # At 8 warps (128 and 256 columns) it leaves the loop unspecialized.
    for block_n in (128, 256):
        k = triton.compile(matmul.make_ast_source(**dict(BASE, BLOCK_N=block_n), WARP_SPECIALIZE=True),
                           target=SM90, options=dict(num_warps=8, num_stages=3))
        assert "ttg.warp_specialize" not in k.asm["ttgir"] and "async_task_id" not in k.asm["ttgir"]


def _shape(toml_text):
    """A graph without its source locations (paths differ between checkouts)."""
    return [ln for ln in toml_text.splitlines() if not ln.startswith(("origin", "description"))]


@needs_twill
@pytest.mark.parametrize("block_n", list(TILES))
def test_exported_loop_is_the_recorded_graph(block_n, tmp_path, monkeypatch):
    import twill_triton
    from bench.kernels import fa_fwd_gluon_plan

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TWILL_OPT", TWILL_OPT)
    twill_triton.enable(scope="all", dump_dir=str(tmp_path / "dump"))
    try:
        triton.compile(matmul.make_ast_source(**dict(BASE, BLOCK_N=block_n), SUBTILE=True), target=SM90,
                       options=dict(num_warps=TILES[block_n]["warps"], num_stages=3))
    finally:
        twill_triton.disable()
    d = twill_triton.decisions()[-1]
    graphs = fa_fwd_gluon_plan.gluon_graphs(TWILL_OPT, Path(d.dump) / "input.mlir", tmp_path / "g", scope="all")
    assert len(graphs) == 1
    text = graphs[0].read_text()
    ops = re.findall(r'^cost = \{ class = "(\w+)", shape = \[([\d, ]+)\]', text, flags=re.M)
    assert ops == [("tma_load", "64, 64"), ("tma_load", "64, 64"), ("tma_load", f"{block_n}, 64"),
                   ("mma", f"64, {block_n}, 64"), ("mma", f"64, {block_n}, 64")]
    # Registers per thread of a 4-warp group: the 64 x block_n accumulator.
    assert re.findall(r"^regs = (\d+)$", text, flags=re.M) == [str(block_n // 2)] * 2
    path, _ = _recorded_here()
    assert _shape(text) == _shape((path / f"bn{block_n}" / "graph.toml").read_text())


@needs_twill
@pytest.mark.parametrize("block_n", list(TILES))
def test_twill_schedule_gives_the_recorded_plan(block_n):
    path, rec = _recorded_here()
    cand, want = rec["candidates"][str(block_n)], TILES[block_n]
    graph_path = path / f"bn{block_n}" / "graph.toml"
    sched = P.solve(TWILL, graph_path, cand["consumer_regs"])
    assert sched["proven"] and sched["ii"] == sched["res_mii"]
    graph = P.load_graph(graph_path)
    facts = P.describe(sched, graph)
    assert (facts["consumers"], facts["prefetch"]) == (want["consumers"], want["prefetch"])
    assert facts == cand["schedule_facts"]
    assert P.plan_from_schedule(sched, graph) == dict(CONSUMERS=want["consumers"], PERSISTENT=True,
                                                      MIN_STAGES=want["min_stages"])
    # A modulo schedule alone (no groups) is not a plan.
    r = subprocess.run([TWILL, "solve", str(graph_path), "--modulo-only", "--json"], capture_output=True, text=True,
                       check=True)
    with pytest.raises(P.PlanError, match="no warp groups"):
        P.plan_from_schedule(json.loads(r.stdout), graph)


def _schedule(groups, tc=2):
    ops = [dict(name="descriptor_load_1", units={"TMA": 1}, warp_group=groups[0]),
           dict(name="descriptor_load_5", units={"TMA": 1}, warp_group=0)]
    ops += [dict(name=f"warp_group_dot_{i}", units={"TC": 1}, warp_group=groups[1 + i % 2]) for i in range(tc)]
    return dict(ii=16, ops=ops, warp_specialization=dict(streaming=[dict(op="descriptor_load_1", prefetch=3)]))


def test_schedules_outside_the_family_are_refused():
    graph = {"op": [{"name": "descriptor_load_1", "variable_latency": True}]}
    assert P.describe(_schedule([0, 1, 2]), graph)["consumers"] == 2
    assert P.plan_from_schedule(_schedule([0, 1, 1]), graph) == dict(CONSUMERS=1, PERSISTENT=True, MIN_STAGES=5)
    with pytest.raises(P.PlanError, match="not on the producer"):
        P.describe(_schedule([1, 1, 1]), graph)
    with pytest.raises(P.PlanError, match="is on the producer"):
        P.describe(_schedule([0, 0, 1]), graph)
    with pytest.raises(P.PlanError, match="3 tensor-core ops"):
        P.describe(_schedule([0, 1, 1], tc=3), graph)
    no_stream = dict(_schedule([0, 1, 1]), warp_specialization=dict(streaming=[]))
    with pytest.raises(P.PlanError, match="no streaming"):
        P.describe(no_stream, graph)


def test_deepest_ring():
    assert P.deepest_ring(lambda s: s <= 6, 4) == 6
    assert P.deepest_ring(lambda s: s <= 4, 4) == 4
    with pytest.raises(P.PlanError, match="4 slots"):
        P.deepest_ring(lambda s: s <= 3, 4)


def test_register_split():
    # One consumer group: 8 warps; at one CTA Triton's own launch budget.
    assert matmul_gluon.register_split(1) == (dict(MAXNREG=None, CONSUMER_REGS=256, PRODUCER_REGS=24), 256)
    # Two CTAs: 65536 / (2 x 8 x 32) = 128 at launch; the default partition
    # (the consumer) gets what the producer's warpgroup leaves of 2 x 128.
    assert matmul_gluon.register_split(2) == (dict(MAXNREG=128, CONSUMER_REGS=232, PRODUCER_REGS=24), 232)
    # Two consumer groups: 12 warps, as fa_fwd_gluon.register_split.
    assert matmul_gluon.register_split(1, consumers=2) == (dict(MAXNREG=None, CONSUMER_REGS=240,
                                                                PRODUCER_REGS=24), 240)
    assert matmul_gluon.cta_warps(1) == 8 and matmul_gluon.cta_warps(2) == 12


def _sass(cubin: bytes, tmp_path) -> str:
    nvdisasm = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    return subprocess.run([str(nvdisasm), "-c", str(path)], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("block_n", list(TILES))
def test_recorded_plan_compiles_once_per_sm_without_spills(block_n, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    _, rec = _recorded_here()
    cand, want = rec["candidates"][str(block_n)], TILES[block_n]
    plan = cand["plan"]
    split, _ = matmul_gluon.register_split(1, consumers=want["consumers"])
    assert plan == dict(BLOCK_N=block_n, BLOCK_K=64, GROUP_M=8, CONSUMERS=want["consumers"], PERSISTENT=True,
                        STAGES=want["stages"], CTAS=1, **split)
    k = matmul_gluon.compile_for(SM90, **plan)
    regs, frame = configure.cubin_resources(k.asm["cubin"])
    assert frame == 0
    occ = configure.machine_occupancy("h100")
    assert occ.ctas(int(k.metadata.shared), regs, matmul_gluon.cta_warps(want["consumers"])) == 1
    assert abs(int(k.metadata.shared) - matmul_gluon.shared_bytes(**plan)) < 1024
    # The recording tried one slot more, which does not fit.
    assert cand["occupancy"]["1"]["tried"][str(want["stages"] + 1)]["ctas_fit"] == 0
    # Two CTAs per SM: the ring the schedule needs does not fit twice.
    assert f"{want['min_stages']} slots" in cand["occupancy"]["2"]["refused"]
    sass = _sass(k.asm["cubin"], tmp_path)
    # Two m64 wgmmas per k16 (the two halves) over BLOCK_K = 64.
    assert len(re.findall(rf"\bHGMMA\.64x{block_n}x16\.F32", sass)) == 8
    # One wait per K step and group, not one per wgmma (ptxas serializing them).
    assert 1 <= len(re.findall(r"WARPGROUP\.DEPBAR", sass)) <= 3 * want["consumers"]
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+24", k.asm["ptx"])


def test_tile_model():
    """matmul_gluon_plan's persistent model, worked by hand, and the recorded
    choice recomputed from the recorded candidates and schedules: the 128 x 128
    plan is bound by shared-memory bandwidth (per iteration its wgmmas read B
    once per 64 rows and its TMA writes both tiles: 20% more than the tensor
    core's time), the 128 x 256 plan is not, so the model ranks it first by
    cycles (before shared-memory bandwidth entered the model, 2026-11-26, the
    two tied and the TMA's headroom chose)."""
    sched = dict(ii=16, res_mii=16, length=20, normalization=dict(costs=[dict(original=512, normalized=8)]))
    # 1024 tiles on 132 SMs: 8 rounds of 64 iterations at 512 cycles and 500
    # cycles outside the loop per tile; the fill (L - I = 4 units of 64
    # cycles) once.
    assert P.persistent_cycles(sched, 512, 500, 1024, 64, 132) == 4 * 64 + 8 * (64 * 512 + 500)
    # Not at ResMII: I in cycles.
    assert P.iteration_cycles(dict(sched, ii=17), 512) == 17 * 64
    assert P.headroom(dict(TC=1024, TMA=768)) == 0.25 and P.headroom(dict(TC=512, TMA=512)) == 0.0
    assert P.choose_tile({128: 100.0, 256: 100.5}, {128: 0.0, 256: 0.25}, 0.01) == 256
    assert P.choose_tile({128: 100.0, 256: 102.0}, {128: 0.0, 256: 0.25}, 0.01) == 128
    assert P.choose_tile({128: 100.0, 256: 100.0}, {128: 0.1, 256: 0.1}, 0.01) == 128
    path, rec = _recorded_here()
    sms = configure.machine_occupancy("h100").sms
    for size, m in rec["model"].items():
        n = int(size)
        cycles, rooms = {}, {}
        for t, c in rec["candidates"].items():
            sched = json.loads((path / f"bn{t}" / "schedule.json").read_text())
            cycles[int(t)] = P.persistent_cycles(sched, c["unit_cycles"], c["outside_cycles"],
                                                 (n // 128) * (n // int(t)), n // 64, sms, c["plan"]["CTAS"])
            rooms[int(t)] = P.headroom(c["units"])
        assert {int(t): v for t, v in m["cycles"].items()} == pytest.approx(cycles), size
        assert cycles[128] > cycles[256] * (1 + configure.MODEL_TOLERANCE), size
        assert P.choose_tile(cycles, rooms, configure.MODEL_TOLERANCE) == m["tile"] == 256, size
