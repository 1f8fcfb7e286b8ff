"""twill's Hopper FA forward schedule lowered to Gluon (bench/kernels/
fa_fwd_gluon.py) and the plan derived from twill's JSON
(bench/kernels/fa_fwd_gluon_plan.py), on the CPU:

* the kernel compiles for sm_90a in every plan the template lowers, with no
  spills and without ptxas serializing its wgmmas (which it does, with one
  WARPGROUP.DEPBAR per HGMMA, when an in-flight accumulator is read or the
  registers do not suffice);
* twill's joint schedule of the real sub-tiled loop (exported by the pass
  from captured Triton 3.6 TTGIR) with the largest latency slack gives the
  plan the kernel defaults to (QK^T before PV, the softmax under its own PV:
  FA3's intra-warpgroup order, the groups' order on the tensor core left to
  the hardware); the paper's objective (the shortest L) gives the turn order
  with PV first and less slack at the same I; and twill proves that Triton
  3.6's last-stage rule costs a larger I;
* schedules outside the family the kernel lowers are refused.
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

from bench.kernels import fa_fwd_gluon  # noqa: E402
from bench.kernels import fa_fwd_gluon_plan as P  # noqa: E402
from twill_triton import configure  # noqa: E402



def expected_plans(sub):
    """(Triton version, plan) of the Gluon plan `sub` (bench/gpu/run.py
    --plans) that bench/gpu/expected holds for each Triton version."""
    out = []
    for path in sorted((REPO / "bench" / "gpu" / "expected").glob("*.json")):
        plans = json.loads(path.read_text()).get("gluon") or {}
        if sub in plans:
            out.append((path.stem, plans[sub]))
    return out


TWILL_OPT = os.environ.get("TWILL_OPT") or str(REPO / "target" / "release" / "twill-opt")
TWILL = str(Path(TWILL_OPT).with_name("twill"))
SUBTILE_TTGIR = REPO / "test" / "Inputs" / "triton36" / "fa_fwd_subtile_sm90.before.mlir"
CAUSAL_TTGIR = REPO / "test" / "Inputs" / "triton36" / "fa_fwd_causal_subtile_sm90.before.mlir"
PLAN_KEYS = ("PINGPONG", "QK_FIRST", "INTRA", "STAGES")
PLANS = {
    "twill": {},
    "turns enforced": dict(PINGPONG=True),
    "objective length": dict(PINGPONG=False, QK_FIRST=False, INTRA=False),
    "objective length, turns enforced": dict(PINGPONG=True, QK_FIRST=False, INTRA=False),
    "QK first, no softmax under PV": dict(QK_FIRST=True, INTRA=False),
    "3 stages": dict(STAGES=3),
}


def _sass(cubin: bytes, tmp_path) -> str:
    nvdisasm = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    return subprocess.run([str(nvdisasm), "-c", str(path)], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("plan", list(PLANS))
def test_kernel_compiles_with_async_wgmma(plan, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    k = fa_fwd_gluon.compile_for(GPUTarget("cuda", 90, 32), **PLANS[plan])
    regs, frame = configure.cubin_resources(k.asm["cubin"])
    assert frame == 0, f"{plan}: {frame} bytes of stack (spills)"
    assert k.metadata.shared <= 232448, f"{plan}: {k.metadata.shared} bytes of shared memory"
    assert k.metadata.num_warps == 12  # two consumer warpgroups and the producer's
    sass = _sass(k.asm["cubin"], tmp_path)
    hgmma = len(re.findall(r"\bHGMMA\.64x128x16\.F32", sass))
    depbar = len(re.findall(r"WARPGROUP\.DEPBAR", sass))
    # QK^T and PV of both groups in the prologue turn, the loop and the last
    # turn (16 HGMMA of k = 16 each per group, twice over).
    assert hgmma == 64
    # One wait per turn, not one per wgmma (ptxas's serialization).
    assert depbar <= 8, f"{plan}: {depbar} WARPGROUP.DEPBAR for {hgmma} HGMMA: wgmmas serialized"
    # PV reads P from registers: HGMMA with a register A operand.
    assert re.search(r"HGMMA\.64x128x16\.F32 R\d+, R\d+, gdesc", sass)
    # The register split of the partitions (setmaxnreg), as asked.
    ptx = k.asm["ptx"]
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+240", ptx)
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+24", ptx)


def test_causal_kernel_compiles_with_async_wgmma(tmp_path, monkeypatch):
    """CAUSAL: the K blocks left of the diagonal in the non-causal kernel's
    loop, the diagonal block's iterations masked in a second copy of the
    loop body: twice 16 more HGMMA (a group's QK^T and PV, both groups),
    still one wait per turn, no spills, the same shared memory."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    target = GPUTarget("cuda", 90, 32)
    k = fa_fwd_gluon.compile_for(target, CAUSAL=True)
    regs, frame = configure.cubin_resources(k.asm["cubin"])
    assert frame == 0
    base = fa_fwd_gluon.compile_for(target)
    assert k.metadata.shared == base.metadata.shared
    sass = _sass(k.asm["cubin"], tmp_path)
    assert len(re.findall(r"\bHGMMA\.64x128x16\.F32", sass)) == 64 + 32
    assert len(re.findall(r"WARPGROUP\.DEPBAR", sass)) <= 12
    # The mask: selects of scores against -inf. A group's 64 x 128 scores
    # are 64 per thread, masked in turn 0 and in the masked loop; ptxas
    # folds some of them, but at least one site's worth per group remains
    # above the non-causal kernel's few (its initial running max).
    masked = re.compile(r"FSEL R\d+, R\d+, -INF")
    assert len(masked.findall(sass)) >= len(masked.findall(_sass(base.asm["cubin"], tmp_path))) + 2 * 64


def _twill_available():
    return os.path.exists(TWILL_OPT) and os.path.exists(TWILL)


needs_twill = pytest.mark.skipif(not _twill_available(), reason="twill-opt / twill not built")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    if not _twill_available():
        pytest.skip("twill-opt / twill not built")
    d = tmp_path_factory.mktemp("graphs")
    free = P.gluon_graphs(TWILL_OPT, SUBTILE_TTGIR, d / "gluon")
    pinned = P.gluon_graphs(TWILL_OPT, SUBTILE_TTGIR, d / "pinned", pinned=True)
    assert len(free) == len(pinned) == 1
    return free[0], pinned[0]


@needs_twill
def test_twill_schedule_gives_the_kernel_plan(exported):
    free, pinned = exported
    regs = fa_fwd_gluon.DEFAULT_CONFIG["CONSUMER_REGS"]
    sched = P.solve(TWILL, free, regs)
    assert P.OBJECTIVE == "slack"
    assert sched["proven"] and sched["ii"] == sched["res_mii"]  # tensor-core bound, proven
    graph = P.load_graph(free)
    facts = P.describe(sched, graph)
    # Each sub-tile on a group of its own, QK^T of iteration j before PV of
    # j - 1, the softmax under its own PV, one iteration of prefetch; the
    # groups' wgmmas are not in turns (both QK^T, then both PV).
    assert len(set(facts["groups"].values())) == 2
    assert not facts["turns"] and facts["qk_first"] and facts["intra"] and facts["prefetch"] == 1
    plan = P.plan_from_schedule(sched, graph)
    assert plan == {k: fa_fwd_gluon.DEFAULT_CONFIG[k] for k in PLAN_KEYS}
    assert not plan["PINGPONG"]
    slack = sched["warp_specialization"]["latency_slack"]
    assert slack["proven"] and slack["objective"] == "slack"
    # The paper's objective: the same I with the shortest L (fewer cycles
    # than the slack schedule's, as many stages), the turn order with PV
    # first, and the latency slack the slack objective started from.
    short = P.solve(TWILL, free, regs, objective="length")
    assert short["ii"] == sched["ii"] and short["stages"] == sched["stages"]
    assert short["length"] == slack["shortest_length"] < sched["length"]
    s_facts = P.describe(short, graph)
    assert s_facts["turns"] and not s_facts["qk_first"] and not s_facts["intra"]
    s_slack = short["warp_specialization"]["latency_slack"]
    assert s_slack["objective"] == "length" and not s_slack["proven"]
    assert s_slack["cycles"] == slack["at_shortest_length"] < slack["cycles"]
    assert P.plan_from_schedule(short, graph, enforce_turns=True)["PINGPONG"]
    # Under Triton 3.6's rule (every wgmma in the last stage) twill proves a
    # larger minimum I for the same loop.
    held = P.solve(TWILL, pinned, regs)
    assert held["ii_proven"] and held["ii"] > sched["ii"]


@needs_twill
def test_schedules_outside_the_family_are_refused(exported, tmp_path):
    free, _ = exported
    graph = P.load_graph(free)
    r = subprocess.run([TWILL, "solve", str(free), "--modulo-only", "--u", "30", "--json"], capture_output=True,
                       text=True, check=True)
    with pytest.raises(P.PlanError, match="no warp groups"):
        P.plan_from_schedule(json.loads(r.stdout), graph)
    one = P.solve(TWILL, free, fa_fwd_gluon.DEFAULT_CONFIG["CONSUMER_REGS"], groups=1)
    with pytest.raises(P.PlanError, match="one compute group"):
        P.plan_from_schedule(one, graph)
    # A sub-tile's softmax (its exponentials, on the path from its QK^T to
    # its PV) moved to the other compute group: the kernel keeps a
    # sub-tile's chain on one group, so the schedule is refused.
    two = P.solve(TWILL, free, fa_fwd_gluon.DEFAULT_CONFIG["CONSUMER_REGS"])
    exp = max((o for o in two["ops"] if "SFU" in o["units"]), key=lambda o: o["cycles"])
    exp["warp_group"] = 3 - exp["warp_group"]  # groups 1 and 2
    with pytest.raises(P.PlanError, match="spans warp groups"):
        P.plan_from_schedule(two, graph)


def test_recorded_plans_are_the_kernel_default():
    """The plans bench/gpu/run.py --plans makes for the GPU run
    (one per Triton version) are the kernel's default configuration, and
    their ablation is the paper's objective's plan."""
    recorded = expected_plans("")
    assert recorded
    for path, plan in recorded:
        assert plan["plan"] == {k: fa_fwd_gluon.DEFAULT_CONFIG[k] for k in PLAN_KEYS + ("HEAD_DIM", "BLOCK_N")}, path
        assert plan["schedule"]["ii"] < plan["triton36_rule"]["ii"], path
        assert plan["schedule"]["latency_slack"]["proven"], path
        short = plan["objective_length"]
        assert short["plan"] == dict(plan["plan"], QK_FIRST=False, INTRA=False), path
        assert short["schedule"]["ii"] == plan["schedule"]["ii"], path


def test_recorded_head_dim_64_plans():
    """The head-dim-64 plans (bench/gpu/probe/fa_gluon_probe.py --head-dim
    64): the loop's own shape, below Triton 3.6's rule in I, PV before QK^T
    with the softmax apart from its PV under both Tritons; the shortest-L
    schedule is either lowered the same way or refused with the reason."""
    recorded = expected_plans("hd64")
    assert recorded and len(recorded) == len(expected_plans(""))
    for path, plan in recorded:
        assert plan["plan"] == dict(HEAD_DIM=64, BLOCK_N=64, PINGPONG=False, QK_FIRST=False, INTRA=False,
                                    STAGES=2), path
        assert plan["kernel_config"]["HEAD_DIM"] == 64 and plan["kernel_config"]["BLOCK_N"] == 64, path
        assert plan["schedule"]["ii"] < plan["triton36_rule"]["ii"], path
        short = plan["objective_length"]
        assert short["plan"] == plan["plan"] or (short["plan"] is None and "turns" in short["refused"]), path
        assert short["schedule"]["ii"] == plan["schedule"]["ii"], path
        # twill's model runs it at two CTAs per SM at every size: the same
        # schedule within the two-CTA register split, half the waves.
        occ = plan["occupancy"]
        two = occ["options"]["2"]
        assert "refused" not in two and two["ii"] == plan["schedule"]["ii"] and two["spill_bytes"] == 0, path
        assert two["config"] == fa_fwd_gluon.register_split(2)[0], path
        assert {m["ctas"] for m in occ["model"].values()} == {2}, path


def test_recorded_head_dim_128_plans_run_one_cta_per_sm():
    """The head-dim-128 plan does not fit twice on an SM (the kernel does
    not compile in the two-CTA register split): one CTA per SM at every
    size."""
    recorded = expected_plans("")
    assert recorded
    for path, plan in recorded:
        occ = plan["occupancy"]
        assert "refused" not in occ["options"]["1"], path
        assert "Insufficient registers" in occ["options"]["2"]["refused"], path
        assert {m["ctas"] for m in occ["model"].values()} == {1}, path


def test_register_split():
    """Registers per thread at launch and per partition for 1 and 2 CTAs per
    SM: one CTA is Triton's own choice (168 at launch, 240 per consumer
    group); two fit 2 x 12 warps x 80 in the register file, and the
    partitions' budgets fill the CTA's share."""
    one, limit1 = fa_fwd_gluon.register_split(1)
    assert one == dict(MAXNREG=None, CONSUMER_REGS=240, PRODUCER_REGS=24) and limit1 == 240
    assert {k: fa_fwd_gluon.DEFAULT_CONFIG[k] for k in one} == one
    two, limit2 = fa_fwd_gluon.register_split(2)
    assert two == dict(MAXNREG=80, CONSUMER_REGS=104, PRODUCER_REGS=24) and limit2 == 104
    for c, (cfg, limit) in ((1, (one, limit1)), (2, (two, limit2))):
        launch = cfg["MAXNREG"] or 168
        assert c * fa_fwd_gluon.CTA_WARPS * 32 * launch <= 64 * 1024
        # The default partition gets what the workers leave (Triton's
        # AllocateWarpGroups), at least the consumer worker's budget - 8.
        default = (3 * launch - cfg["PRODUCER_REGS"] - cfg["CONSUMER_REGS"]) // 8 * 8
        assert limit == min(default, cfg["CONSUMER_REGS"]) and abs(default - cfg["CONSUMER_REGS"]) <= 8


def test_head_dim_64_kernel_fits_twice_on_an_sm(tmp_path, monkeypatch):
    """At two CTAs per SM the head-dim-64 plan (BLOCK_N 64) compiles with 80
    registers at launch, no spills, the consumer worker at 104 and the
    default partition at 112 (setmaxnreg; the default partition sets up
    the CTA with more and then hands them back), and two CTAs fit on an SM;
    the head-dim-128 kernel does not compile in that budget (its scores
    alone take 64 registers)."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    two, _ = fa_fwd_gluon.register_split(2)
    plan = dict(HEAD_DIM=64, BLOCK_N=64, PINGPONG=False, QK_FIRST=False, INTRA=False, STAGES=2)
    k = fa_fwd_gluon.compile_for(GPUTarget("cuda", 90, 32), **plan, **two)
    regs, frame = configure.cubin_resources(k.asm["cubin"])
    assert (regs, frame) == (80, 0)
    occ = configure.machine_occupancy("h100")
    assert occ.ctas(int(k.metadata.shared), regs, fa_fwd_gluon.CTA_WARPS) == 2
    ptx = k.asm["ptx"]
    assert re.search(r"\.maxnreg 80\b", ptx)
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+112\b", ptx)
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+104\b", ptx)
    with pytest.raises(Exception, match="Insufficient registers"):
        fa_fwd_gluon.compile_for(GPUTarget("cuda", 90, 32), **two)


def _schedule(ii, length, raw=286, normalized=8):
    return dict(ii=ii, length=length, normalization=dict(costs=[dict(original=raw, normalized=normalized)]))


def test_occupancy_model():
    """configure's grid model over the plan's schedule: at one CTA per SM the
    loop runs at I (normalized cycles) alone; at two the SM's busiest unit
    bounds the pair, and the waves halve. The numbers are the head-dim-64
    plan's at N = 1k (1024 CTAs, 16 iterations, SFU 520 raw cycles per
    iteration, 892 cycles outside the loop), worked by hand."""
    s = _schedule(26, 52)
    assert P.cycle_scale(s) == 35.75
    t = P.cta_cycles(s, 892, 16, 520)
    assert t == 892 + 15 * 26 * 35.75 + 52 * 35.75
    # configure.score's T: the loop takes at least its unit cycles.
    assert P.cta_cycles(s, 892, 16, 2000) == 892 + 16 * 2000
    m = P.occupancy_model({1: s, 2: s}, 520, 892, {"1k": (1024, 16)}, sms=132)["1k"]
    # 1024 CTAs: 8 waves of one CTA per SM (7 full, 100 left), 4 of two.
    assert m["cycles"][1] == 8 * t
    assert m["cycles"][2] == 3 * max(t, 2 * 16 * 520) + max(t, 2 * 16 * 520)
    assert m["ctas"] == 2
    # Resource bound at both occupancies (a long loop whose I is the unit
    # bound): a tie goes to more CTAs per SM (configure's ordering, within
    # its MODEL_TOLERANCE of 1%).
    bound = _schedule(520, 520, raw=1, normalized=1)
    tie = P.occupancy_model({1: bound, 2: bound}, 520, 0, {"n": (264, 1000)}, sms=132)["n"]
    assert tie["cycles"][1] == tie["cycles"][2] and tie["ctas"] == 2
    # Near ties too: two CTAs 0.5% slower in the model (a longer I within
    # the smaller register budget) are still chosen; 2% slower are not.
    assert configure.MODEL_TOLERANCE == 0.01
    for slower, ctas in ((1.005, 2), (1.02, 1)):
        worse = _schedule(520 * slower, 520 * slower, raw=1, normalized=1)
        m = P.occupancy_model({1: bound, 2: worse}, 0, 0, {"n": (132, 1000)}, sms=132)["n"]
        assert m["cycles"][2] == pytest.approx(slower * m["cycles"][1]) and m["ctas"] == ctas, slower
    # Only the occupancies offered count, and there must be one.
    assert P.occupancy_model({1: s}, 520, 892, {"1k": (1024, 16)}, sms=132)["1k"]["ctas"] == 1
    with pytest.raises(ValueError, match="no occupancy"):
        P.occupancy_model({}, 520, 892, {"1k": (1024, 16)}, sms=132)


def test_modular_overlap():
    """Two executions overlap in the steady state if some iterations of them
    intersect, at any offset of whole intervals (I = 16 here)."""
    assert not P._overlap(0, 8, 8, 16, 16)  # back to back
    assert P._overlap(0, 8, 14, 24, 16)  # [14, 24) wraps into [0, 8)
    assert not P._overlap(30, 32, 0, 4, 16)  # [30, 32) is [14, 16)
    assert not P._overlap(18, 20, 0, 2, 16)  # [18, 20) is [2, 4)
    assert P._overlap(17, 18, 0, 2, 16)  # [17, 18) is [1, 2)
    assert P._overlap(5, 6, 0, 40, 16)  # longer than I: overlaps everything


@needs_twill
def test_causal_loops_give_the_plan(tmp_path):
    """The causal sub-tiled kernel has two loops (captured Triton 3.6
    TTGIR). The first, the K blocks left of the diagonal, is the non-causal
    loop: twill's schedule of it is the kernel's default plan at the same
    I. The second, the diagonal block, is masked: the key positions of its
    mask feed both sub-tiles' softmax without depending on either QK^T, so
    they are not part of a sub-tile's chain (the kernel computes them in
    each group), and `describe` does not count them."""
    paths = P.gluon_graphs(TWILL_OPT, CAUSAL_TTGIR, tmp_path / "graphs")
    assert len(paths) == 2
    regs = fa_fwd_gluon.DEFAULT_CONFIG["CONSUMER_REGS"]
    first = P.solve(TWILL, paths[0], regs)
    assert first["proven"] and first["ii"] == first["res_mii"]
    assert P.plan_from_schedule(first, P.load_graph(paths[0])) == {k: fa_fwd_gluon.DEFAULT_CONFIG[k]
                                                                   for k in PLAN_KEYS}
    # The diagonal loop: an op that feeds both sub-tiles' PV and depends on
    # no tensor-core op (the mask's key positions).
    graph = P.load_graph(paths[1])
    preds, _ = P.same_iteration_edges(graph)
    tc = [o["name"] for o in graph["op"] if o["cost"].get("class") == "mma"]
    pvs = [t for t in tc if any(a in tc for a in P._ancestors(t, preds))]
    assert len(pvs) == 2
    shared = set.intersection(*(P._ancestors(pv, preds) for pv in pvs))
    shared = {a for a in shared if not any(t in P._ancestors(a, preds) for t in tc)
              and not graph_op(graph, a).get("variable_latency")}
    assert shared, "no op shared by both sub-tiles' softmax"
    diag = P.solve(TWILL, paths[1], regs)
    try:
        P.describe(diag, graph)
    except P.PlanError as e:
        assert "spans warp groups" not in str(e), e


def graph_op(graph, name):
    return next(o for o in graph["op"] if o["name"] == name)


def test_recorded_causal_plans():
    """The causal plans run.py --plans makes (one per Triton
    version): the kernel's default flags with CAUSAL, at the non-causal
    plan's I, below Triton 3.6's rule; the diagonal loop's schedule is
    recorded next to it with its one iteration per CTA; one CTA per SM."""
    recorded = expected_plans("causal")
    assert recorded and len(recorded) == len(expected_plans(""))
    for path, plan in recorded:
        default = dict(expected_plans(""))[path]
        assert plan["plan"] == dict(default["plan"], CAUSAL=True), path
        assert plan["kernel_config"]["CAUSAL"] and plan["kernel_config"]["SUBTILE"], path
        assert plan["schedule"]["ii"] == default["schedule"]["ii"] < plan["triton36_rule"]["ii"], path
        assert plan["diagonal"]["iterations_per_cta"] == 1, path
        # The diagonal loop's own schedule: on 3.6 outside the family (its
        # groups differ in whether the softmax runs under their PV), on 3.9
        # the same flags as the first loop's.
        if plan["triton"] == "3.6.0":
            assert plan["diagonal"]["plan"] is None and "softmax" in plan["diagonal"]["refused"], path
        else:
            assert plan["diagonal"]["plan"] == plan["plan"], path
        assert {m["ctas"] for m in plan["occupancy"]["model"].values()} == {1}, path
