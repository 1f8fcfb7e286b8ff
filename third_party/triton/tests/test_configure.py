"""twill_triton.configure: configuration choice by twill's model, on the CPU."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

triton = pytest.importorskip("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402

import twill_triton  # noqa: E402
from kernels import matmul  # noqa: E402
from twill_triton import configure  # noqa: E402

TWILL_OPT = os.environ.get("TWILL_OPT") or str(REPO / "target" / "release" / "twill-opt")
def _scheduled(ii=527, resource=500, length=790, prefetch=(("a", 2, 0),), loads=None, units=(), group=None, ctas=1):
    """A scheduled loop's record (twill.schedule-report/1): I, its busiest
    unit and L in cycles, streaming loads as (op, depth, extra), `loads` as
    (placement, lead cycles[, the loop whose rotation applies])."""
    where = None
    if loads:
        where = dict(placement=loads[0], lead_cycles=loads[1], rotated_by=loads[2] if len(loads) > 2 else None)
    return dict(index=0, name="k_loop1", function="k", location="loc", warp_specialize=group, decision="scheduled",
                reason=None, text="", bounds=dict(resource_cycles=resource, sequential_cycles=2 * length),
                units=[dict(unit=u, cycles=c) for u, c in units], solve_seconds=0.04,
                schedule=dict(ii=2, ii_cycles=ii, length=3, length_cycles=length, stages=3, warp_groups=1,
                              partitions=dict(code="none_not_marked", count=None, text="no partitions"), ops=3,
                              proof=dict(checker_accepted=True, ii_proven=True, length_proven=True,
                                         under_partition_rules=False),
                              prefetch=[dict(op=op, depth=d, extra=x, last=bool(where and where["placement"] == "last"))
                                        for op, d, x in prefetch],
                              loads=where, objective="length", latency_slack=None, ctas=ctas,
                              sharing=None if ctas == 1 else dict(regs_per_thread=255, smem_bytes=115712,
                                                                  iteration_cycles=1054)))


def _skipped(bounds=(1686, 3478), units=(), reason="no_schedule", text="no schedule: no warp-specialized schedule"):
    """A skipped loop's record; `bounds` (resource, sequential) or None."""
    return dict(index=0, name="k_loop1", function="k", location="loc", warp_specialize=None, decision="skipped",
                reason=reason, text=text, schedule=None, solve_seconds=0.1,
                bounds=dict(resource_cycles=bounds[0], sequential_cycles=bounds[1]) if bounds else None,
                units=[dict(unit=u, cycles=c) for u, c in units])


def _report(*loops, outside=None):
    """A twill.schedule-report/1 document."""
    functions = [] if outside is None else [dict(function="k", location="loc", outside_cycles=outside,
                                                 outside_error=None)]
    return dict(schema="twill.schedule-report/1", loops=list(loops), functions=functions)


def test_records_give_each_loop_its_cycles():
    # A skipped loop without bounds (not priced) gives nothing; one with
    # bounds counts as its ops back to back.
    loops = configure.loops_of(_report(_scheduled(), _skipped(bounds=None, reason="not_extracted", text="why"),
                                       _scheduled(ii=600), _skipped()))
    assert [(lp.ii, lp.resource, lp.length, lp.scheduled) for lp in loops] == [
        (527, 500, 790, True), (600, 500, 790, True), (3478, 1686, 3478, False)]
    assert configure.loops_of(None) == [] and configure.outside_cycles(None) == 0
    with pytest.raises(ValueError, match="schema"):
        configure.loops_of(dict(_report(), schema="twill.schedule-report/2"))


def test_loops_of_one_warp_specialize_are_one_concurrent_phase(monkeypatch):
    # Triton's Hopper warp specialization leaves a producer loop and two
    # consumer loops (one ttg.warp_specialize): one phase, the slowest loop's
    # time, the sum of their unit cycles. A loop after it is a phase of its own.
    producer = _scheduled(ii=8, resource=8, length=8, group=0)
    consumer = _scheduled(ii=1965, resource=1000, length=1965, group=0)
    loops = configure.loops_of(_report(producer, consumer, consumer, _scheduled()))
    assert [lp.group for lp in loops] == [0, 0, 0, None]
    assert [len(run) for run in configure.phases(loops)] == [3, 1]

    class Kernel:
        class metadata:
            shared = 197 * 1024
            num_warps = 12
        asm = {"cubin": b""}

    class Decision:
        scheduled = True
        reason = ""
        report = _report(producer, consumer, consumer, _scheduled())

    occ = configure.machine_occupancy("h100")
    monkeypatch.setattr(configure, "cubin_resources", lambda cubin: (168, 0))
    s = configure.score({}, Kernel, Decision, [64, 10], 132, occ)
    assert s.scheduled and s.ctas_per_sm == 1
    # Without per-unit cycles a phase needs the sum of its
    # loops' busiest units; alone on the SM it takes the slower of that and
    # its slowest loop: the warp-specialized phase is unit-bound here, the
    # loop after it latency-bound.
    assert s.unit_cycles == 64 * (8 + 1000 + 1000) + 10 * 500
    assert s.cta_cycles == 64 * (8 + 1000 + 1000) + (9 * 527 + 790)
    # Iteration counts are per phase: one per loop would not match.
    assert not configure.score({}, Kernel, Decision, [64, 64, 64, 10], 132, occ).scheduled

    # With per-unit cycles the partitions add up unit by unit: the producer's
    # TMA time does not add to the consumers' tensor-core time.
    units_c = (("ALU", 393), ("LSU", 1000), ("SFU", 516), ("TC", 1024))
    consumer = _scheduled(ii=1965, resource=1000, length=1965, group=0, units=units_c)
    Decision.report = _report(_scheduled(ii=1024, group=0, units=(("ALU", 6), ("TMA", 1024))), consumer, consumer,
                              _scheduled(units=(("TC", 500),)), outside=1800)
    loops = configure.loops_of(Decision.report)
    assert loops[0].units == {"ALU": 6, "TMA": 1024}
    assert configure.phase_unit_cycles(loops[:3]) == 2048  # TC 1024 + 1024
    s = configure.score({}, Kernel, Decision, [64, 10], 132, occ)
    assert s.outside_cycles == 1800
    assert s.unit_cycles == 64 * 2048 + 10 * 500
    assert s.cta_cycles == 1800 + 64 * 2048 + (9 * 527 + 790)


def test_ctas_per_sm_follow_the_tightest_limit():
    occ = configure.machine_occupancy("h100")
    assert (occ.sms, occ.smem_per_sm, occ.max_warps_per_sm) == (132, 233472, 64)
    kb = 1024
    assert occ.ctas(96 * kb, 128, 4) == 2           # shared memory: 2 x 97 KB of 228
    assert occ.ctas(224 * kb, 128, 4) == 1
    assert occ.ctas(228 * kb, 128, 4) == 0          # more than one CTA may have
    assert occ.ctas(16 * kb, 255, 8) == 1           # registers: 256 x 32 x 8 of 64K
    assert occ.ctas(16 * kb, 64, 8) == 4
    assert occ.ctas(0, 32, 32) == 2                 # warps: 64 per SM


def test_gemm_candidates_are_ranked_by_the_model(tmp_path, monkeypatch):
    """The GEMM with its loads first and last: twill schedules both, the
    cubin gives registers, the loads-last kernel needs less shared memory,
    and the ranking is by modeled time."""
    base = dict(matmul.DEFAULT_CONFIG)
    opts = {k: base.pop(k) for k in ("num_warps", "num_stages")}
    cands = [dict(label="first", extra=""), dict(label="last", extra="loads=last")]

    def compile_with_twill(cand):
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / cand["label"]))
        twill_triton.enable(twill_opt=TWILL_OPT, scope="all", extra_options=cand["extra"])
        try:
            k = triton.compile(matmul.make_ast_source(**base), target=GPUTarget("cuda", 90, 32), options=opts)
        finally:
            twill_triton.disable()
        return k, twill_triton.decisions()[-1]

    size = 4096
    ranking = configure.choose(cands, compile_with_twill, lambda c: [size // base["BLOCK_K"]],
                               lambda c: (size // base["BLOCK_M"]) * (size // base["BLOCK_N"]))
    by = {r.candidate["label"]: r for r in ranking}
    assert all(r.scheduled and len(r.loops) == 1 and 0 < r.regs <= 255 for r in ranking), ranking
    assert by["last"].shared < by["first"].shared
    assert all(r.ctas_per_sm >= 1 and r.time < float("inf") for r in ranking)
    assert ranking[0].time <= ranking[1].time
    # The modeled time follows the module doc: waves of max(T, c * S).
    r = ranking[0]
    lp = r.loops[0]
    n = size // base["BLOCK_K"]
    busiest = max(lp.units.values())
    assert lp.units and busiest <= lp.resource  # raw, not rounded up by normalization
    assert r.outside_cycles > 0  # the output tile's store at least
    assert r.unit_cycles == n * busiest
    assert r.cta_cycles == r.outside_cycles + max((n - 1) * lp.ii + lp.length, n * busiest)
    # Full waves of c CTAs per SM, then a last partial wave whose busiest
    # SM holds ceil(rest / 132) CTAs.
    full, rest = divmod((size // 128) ** 2, 132 * r.ctas_per_sm)
    last = max(r.cta_cycles, -(-rest // 132) * r.unit_cycles) if rest else 0
    assert r.time == full * max(r.cta_cycles, r.ctas_per_sm * r.unit_cycles) + last


def test_a_candidate_that_fails_ranks_last():
    def compile_with_twill(cand):
        raise RuntimeError("does not compile")

    ranking = configure.choose([dict(label="bad")], compile_with_twill, lambda c: [1], lambda c: 1)
    assert not ranking[0].scheduled and "does not compile" in ranking[0].reason
    # Behind every candidate with a modeled time, even one that spills; a
    # spilling one behind those that do not, whatever their times.
    S = configure.Scored
    cands = [S(candidate=dict(label="failed"), scheduled=False),
             S(candidate=dict(label="spills"), scheduled=True, spill_bytes=72, time=5.0),
             S(candidate=dict(label="slow"), scheduled=True, spill_bytes=16, time=9.0),
             S(candidate=dict(label="fast"), scheduled=True, time=7.0),
             S(candidate=dict(label="unfit"), scheduled=True, reason="does not fit on an SM")]
    assert [r.candidate["label"] for r in configure.ordered(cands)] == ["fast", "slow", "spills", "failed", "unfit"]


def test_near_ties_go_to_more_ctas_per_sm():
    # Within MODEL_TOLERANCE of the best modeled time, more CTAs per SM first;
    # beyond it, the modeled time decides. A spilling kernel never profits.
    S = configure.Scored
    tol = configure.MODEL_TOLERANCE
    cands = [S(candidate=dict(label="alone"), scheduled=True, ctas_per_sm=1, time=100.0),
             S(candidate=dict(label="shared"), scheduled=True, ctas_per_sm=2, time=100.0 * (1 + tol / 2)),
             S(candidate=dict(label="shared, spills"), scheduled=True, ctas_per_sm=3, spill_bytes=64, time=99.0),
             S(candidate=dict(label="three, too slow"), scheduled=True, ctas_per_sm=3, time=100.0 * (1 + 2 * tol))]
    assert [r.candidate["label"] for r in configure.ordered(cands)] == [
        "shared", "alone", "three, too slow", "shared, spills"]
    cands[1].time = 100.0 * (1 + 2 * tol)
    assert [r.candidate["label"] for r in configure.ordered(cands)][0] == "alone"


def test_equal_models_go_to_fewer_spilled_bytes():
    # Candidates the model cannot tell apart (the two rotations of
    # `loads=auto`: the same modeled time, CTAs per SM and coverage) are
    # ordered by what ptxas made of them: fewer spilled bytes first (Triton
    # 3.6 spills 16 bytes of the hd128 backward rotated as a whole kernel,
    # none of it rotated per loop). Otherwise the given order holds.
    S = configure.Scored
    cands = [S(candidate=dict(label="kernel"), scheduled=True, ctas_per_sm=1, spill_bytes=16, time=100.0),
             S(candidate=dict(label="loop"), scheduled=True, ctas_per_sm=1, time=100.0),
             S(candidate=dict(label="faster, spills"), scheduled=True, ctas_per_sm=1, spill_bytes=16, time=99.9)]
    assert [r.candidate["label"] for r in configure.ordered(cands)] == ["faster, spills", "loop", "kernel"]
    cands[0].spill_bytes = 0
    assert [r.candidate["label"] for r in configure.ordered(cands)][1:] == ["kernel", "loop"]


def test_extra_prefetch_is_read_per_loop():
    # "prefetch 2+1": the modeled depth 2 and one extra stage; a kernel has
    # the fewest extra stages over its loops with streaming loads (a loop
    # without them does not count; a loop twill skipped counts as none).
    extra = _scheduled(prefetch=(("a", 2, 1), ("b", 1, 1)))
    uneven = _scheduled(prefetch=(("a", 2, 1), ("b", 1, 0)))
    loops = configure.loops_of(_report(extra, _scheduled(prefetch=()), _scheduled(), uneven))
    assert [lp.extra_prefetch for lp in loops] == [1, None, 0, 0]
    loops = loops[:3]
    S = configure.Scored
    assert S(candidate={}, scheduled=True, loops=loops[:2]).extra_prefetch == 1
    assert S(candidate={}, scheduled=True, loops=loops).extra_prefetch == 0
    kept = configure.loops_of(_report(_skipped()))
    assert S(candidate={}, scheduled=True, loops=loops[:1] + kept).extra_prefetch == 0
    assert S(candidate={}, scheduled=True, loops=loops[1:2]).extra_prefetch == 0


def test_near_ties_take_covered_loads_first():
    # Within MODEL_TOLERANCE, after CTAs per SM: loads that cover their
    # modeled time (every loop's lead >= 0) first, then the modeled time
    # (the four placements of bwd_loads.py). Covering never outranks a CTA
    # per SM, nor a candidate beyond the tolerance.
    tol = configure.MODEL_TOLERANCE

    def loop(where, slack, extra=0):
        return configure.loops_of(_report(_scheduled(prefetch=(("a", 2, extra),), loads=(where, slack))))[0]

    first, first1 = loop("first", 298), loop("first", 825, 1)
    last, last1 = loop("last", -229), loop("last", 298, 1)
    assert (last.loads_last, last.load_slack, last1.extra_prefetch) == (True, -229, 1)
    # Pointer loads placed apart (pointer-loads=last): not all last, and the
    # lead still read.
    split = loop("first_and_last", 120, 1)
    assert (split.loads_last, split.load_slack) == (False, 120)

    def cand(label, ctas, time, *loops):
        return configure.Scored(candidate=dict(label=label), scheduled=True, ctas_per_sm=ctas, time=time,
                                loops=list(loops))

    cands = [cand("first", 2, 100.0, first), cand("first +1", 2, 100.0, first1),
             cand("last", 2, 100.0 * (1 - tol / 2), last), cand("last +1", 2, 100.0 * (1 + tol / 4), last1),
             cand("last +1, one per SM", 1, 99.5, last1), cand("last +1, too slow", 2, 100.0 * (1 + 2 * tol), last1)]
    assert [r.candidate["label"] for r in configure.ordered(cands)] == [
        "first", "first +1", "last +1", "last", "last +1, one per SM", "last +1, too slow"]
    # A kernel covers its loads only if every loop does, and issues them last
    # only if every loop with streaming loads does.
    assert not cand("mixed", 2, 100.0, last1, last).loads_covered
    assert not cand("mixed", 2, 100.0, last1, first).loads_last
    no_loads = configure.loops_of(_report(_scheduled(prefetch=())))[0]
    assert cand("one loop without", 2, 100.0, last1, no_loads).loads_last
    assert cand("none", 2, 100.0, no_loads).loads_covered and not cand("none", 2, 100.0, no_loads).loads_last


def test_rotated_and_shared_loops_are_read_from_the_record():
    # `loads=auto` rotated a mixed loop: its "+1" is the rotation's stage,
    # not extra prefetch. A loop solved for 2 CTAs per SM (`ctas=2`) covers
    # its loads only where the compiled kernel gets 2 CTAs per SM.
    rotated = configure.loops_of(_report(_scheduled(prefetch=(("a", 2, 1), ("b", 1, 1)),
                                                    loads=("last", 96, "k_loop1"))))[0]
    assert (rotated.extra_prefetch, rotated.loads_last, rotated.ctas) == (0, True, 1)
    shared = configure.loops_of(_report(_scheduled(loads=("first", 298), ctas=2)))[0]
    assert (shared.ctas, shared.load_slack) == (2, 298)
    S = configure.Scored
    assert S(candidate={}, scheduled=True, ctas_per_sm=2, loops=[shared]).loads_covered
    assert not S(candidate={}, scheduled=True, ctas_per_sm=1, loops=[shared]).loads_covered


def test_panels_beyond_the_l2_rank_after_those_that_fit():
    # The 8k GEMM of the H100 probe (NOTES.md): 2 CTAs per SM model ahead
    # (within MODEL_TOLERANCE: a near tie, which would go to more CTAs per
    # SM), but their running tiles share panels far beyond the L2; 1 CTA per
    # SM exceeds it by one step and wins. Within one step the modeled time
    # decides; when every candidate fits, the near tie goes to more CTAs per
    # SM again. A spilling kernel stays last.
    occ = configure.machine_occupancy("h100")
    assert occ.l2_bytes == 50 * 2**20
    tol = configure.MODEL_TOLERANCE
    S = configure.Scored
    cands = [S(candidate=dict(label="two per SM"), scheduled=True, ctas_per_sm=2, time=100.0 * (1 - tol / 2),
               l2_excess=0.82),
             S(candidate=dict(label="one per SM, slower"), scheduled=True, ctas_per_sm=1, time=120.0,
               l2_excess=0.080),
             S(candidate=dict(label="one per SM"), scheduled=True, ctas_per_sm=1, time=100.0, l2_excess=0.086),
             S(candidate=dict(label="spills, fits"), scheduled=True, ctas_per_sm=1, spill_bytes=96, time=50.0)]
    assert [r.candidate["label"] for r in configure.ordered(cands)] == [
        "one per SM", "one per SM, slower", "two per SM", "spills, fits"]
    for c in cands:
        c.l2_excess = 0.0
    assert [r.candidate["label"] for r in configure.ordered(cands)][:3] == [
        "two per SM", "one per SM", "one per SM, slower"]
    cands[0].time = 100.0 * (1 + tol / 2)
    assert [r.candidate["label"] for r in configure.ordered(cands)][0] == "two per SM"


def test_scored_panels_come_from_the_callers_footprint(monkeypatch):
    # score() asks for the panels of the CTAs that run at once (the grid,
    # or SMs x CTAs per SM when the grid is larger) and compares with the L2.
    occ = configure.machine_occupancy("h100")
    asked = []

    def panels(cand, running):
        asked.append(running)
        return 2 * occ.l2_bytes if running > occ.sms else occ.l2_bytes // 2

    class K:
        metadata = type("M", (), dict(shared=96 * 1024, num_warps=4))
        asm = {"cubin": b""}

    class D:
        scheduled = True
        reason = ""
        report = _report(_scheduled())

    monkeypatch.setattr(configure, "cubin_resources", lambda cubin: (128, 0))
    big = configure.score(dict(label="x"), K, D, [64], 4096, occ, panels)
    small = configure.score(dict(label="x"), K, D, [64], 100, occ, panels)
    assert asked == [2 * occ.sms, 100]
    assert big.ctas_per_sm == 2 and big.l2_excess == 1.0 and big.panel_bytes == 2 * occ.l2_bytes
    assert small.l2_excess == 0.0 and "panels 25 MB" in small.summary()


def test_grid_cycles_count_full_waves_and_the_tail():
    # 264 CTAs, 132 SMs, 2 per SM: one full wave of max(T, 2S).
    assert configure.grid_cycles(264, 132, 2, 100.0, 80.0) == 160.0
    # 132 CTAs at 2 per SM: one CTA per SM, max(T, S).
    assert configure.grid_cycles(132, 132, 2, 100.0, 80.0) == 100.0
    # 300 CTAs: a full wave (264) and 36 more, one per SM.
    assert configure.grid_cycles(300, 132, 2, 100.0, 80.0) == 160.0 + 100.0
