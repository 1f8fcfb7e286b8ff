"""twill's joint schedule of the sub-tiled GEMM loop -> the plan of the
warp-specialized Gluon GEMM (bench/kernels/matmul_gluon.py).

The loop is `matmul.matmul_tma_subtile_kernel`'s (per K step: the A tile's two
64-row halves and the B tile by TMA, one wgmma per half), exported by twill's
pass from its TTGIR and solved as the joint SWP + WS problem
(`twill solve --groups 2`). The paper's Variable Latency rule puts the TMA
loads on a warp group of their own: they are streaming (no incoming
dependence), so that group runs ahead of the pipeline by the prefetch depth
twill reports, and the schedule's I is the tensor core's (proven). Triton
cannot build that: its own Hopper warp specialization fails on this GEMM at
4 warps (3.6.0: "tensor descriptor block and tensor types must match"; 3.9.0:
"descriptor block and tensor must have the same number of elements") and
leaves it unspecialized at 8, and its pipeliner keeps the loads in the warps
that issue the wgmmas. The Gluon kernel lowers the family of such schedules:

* CONSUMERS: the compute groups that issue the two halves' wgmmas (twill's
  symmetry breaking puts both on one group where the two are equivalent);
* STAGES: ring slots; the schedule needs its prefetch depth + 2 (the
  consumer holds the slot its last wgmma reads and the one it issues from
  while the producer fills the next `prefetch`). The paper leaves a
  streaming op's depth to an external tuner (section 5.3); here it is as
  deep as the shared memory holds at the plan's occupancy (`deepest_ring`,
  the ring being the CTA's only other use of it), never less than the
  schedule's need: no tuning on the GPU;
* PERSISTENT (the kernel template's, not a decision of the schedule, which
  covers one tile's loop): the streaming loads continue across output
  tiles: a CTA per SM walks the tiles, and its producer fills the next
  tile's slots during the current tile's last steps and epilogue, where a
  CTA per tile starts each tile with an empty ring.

`plan_from_schedule` refuses (PlanError) a schedule outside the family (a
load off the producer, a wgmma on it, other than two wgmmas).
"""

from bench.kernels.fa_fwd_gluon_plan import PlanError, gluon_graphs, load_graph, solve

# The graph's preparation and the solve are the FA plan's (one warpgroup per
# compute group, no last-stage pins).
__all__ = ["PlanError", "gluon_graphs", "load_graph", "solve", "describe", "plan_from_schedule", "deepest_ring"]


def describe(schedule: dict, graph: dict) -> dict:
    """What twill's `schedule` (`twill solve --json`) of the sub-tiled GEMM
    loop decides in the kernel's terms: `consumers` (compute groups of the
    two wgmmas), `prefetch` (steps the loads run ahead), `groups` (each
    wgmma's group)."""
    if any("warp_group" not in o for o in schedule["ops"]):
        raise PlanError("the schedule has no warp groups (a modulo schedule alone; solve with --groups)")
    variable = {o["name"] for o in graph.get("op", []) if o.get("variable_latency")}
    tc = [o for o in schedule["ops"] if "TC" in o["units"]]
    if len(tc) != 2:
        raise PlanError(f"{len(tc)} tensor-core ops; the kernel has two halves, one wgmma each")
    for o in schedule["ops"]:
        loads = "TMA" in o["units"] or o["name"] in variable
        if loads and o["warp_group"] != 0:
            raise PlanError(f"load {o['name']} is not on the producer")
        if not loads and o["warp_group"] == 0:
            raise PlanError(f"{o['name']} is on the producer")
    streaming = schedule["warp_specialization"].get("streaming", [])
    if not streaming:
        raise PlanError("no streaming loads in the schedule")
    groups = {o["name"]: o["warp_group"] for o in tc}
    return dict(consumers=len(set(groups.values())), prefetch=max(s["prefetch"] for s in streaming),
                groups=groups)


def plan_from_schedule(schedule: dict, graph: dict) -> dict:
    """The kernel flags: CONSUMERS and MIN_STAGES (the ring slots the
    schedule needs; `deepest_ring` then chooses STAGES at an occupancy) from
    twill's schedule, PERSISTENT from the template (module doc)."""
    facts = describe(schedule, graph)
    return dict(CONSUMERS=facts["consumers"], PERSISTENT=True, MIN_STAGES=facts["prefetch"] + 2)


def deepest_ring(fits, min_stages: int, most: int = 16) -> int:
    """The most ring slots s <= `most` with fits(s) (the kernel at s slots
    compiles without spills and fits its occupancy), or PlanError where even
    `min_stages` does not."""
    best = 0
    for s in range(min_stages, most + 1):
        if not fits(s):
            break
        best = s
    if not best:
        raise PlanError(f"the ring of {min_stages} slots the schedule needs does not fit")
    return best


# ---------------------------------------------------------------------------
# The tile: twill's plans of the 128 x 128 and 128 x 256 loops, compared by
# configure's grid model for a persistent kernel.
# ---------------------------------------------------------------------------

def iteration_cycles(schedule: dict, unit_cycles: float) -> float:
    """Cycles per iteration in the steady state: at I = ResMII (a schedule
    bound by its busiest unit, proven) the unit's raw cycles, of which the
    normalized I is a rounded image (the 128 x 256 loop: I = 8 units, 1054
    cycles, for 1024 raw: the normalization's rounding, not the schedule);
    otherwise I in cycles (at least the unit's). The FA plans' occupancy
    model (fa_fwd_gluon_plan.cta_cycles) takes I in cycles: there I is above
    ResMII's raw bound at one CTA per SM (930 against 520 cycles), a latency
    the rounding does not explain."""
    from bench.kernels.fa_fwd_gluon_plan import cycle_scale

    if schedule["ii"] == schedule["res_mii"]:
        return unit_cycles
    return max(schedule["ii"] * cycle_scale(schedule), unit_cycles)


def persistent_cycles(schedule: dict, unit_cycles: float, outside: float, tiles: int, iterations: int, sms: int,
                      ctas: int = 1) -> float:
    """Modeled cycles of the persistent kernel: `ctas` CTAs per SM share it,
    each walks ceil(tiles / (sms x ctas)) tiles of `iterations` iterations.
    The producer streams across tiles, so the pipeline fills once (L - I);
    the code outside the loop (the Triton kernel's, `outside`: the tile's
    offsets, its epilogue) counts once per tile, since the consumers drain
    their wgmmas and store the tile before they start the next."""
    from bench.kernels.fa_fwd_gluon_plan import cycle_scale

    fill = (schedule["length"] - schedule["ii"]) * cycle_scale(schedule)
    rounds = -(-tiles // (sms * ctas))
    return fill + rounds * (iterations * iteration_cycles(schedule, unit_cycles) * ctas + outside)


def headroom(units: dict) -> float:
    """1 - the second-busiest unit's cycles per iteration over the busiest's:
    how far the other units are from becoming the bottleneck (0: two units
    at the bound)."""
    loads = sorted(units.values(), reverse=True)
    return 1.0 - (loads[1] / loads[0] if len(loads) > 1 and loads[0] else 0.0)


def choose_tile(modeled: dict, headrooms: dict, tolerance: float) -> int:
    """The tile of the least modeled cycles (`modeled`: {tile: cycles});
    within `tolerance` of it (configure.MODEL_TOLERANCE) the one whose other
    units have the most headroom: the model's rates leave the loads'
    variable latency out, and a plan that loads two units to the bound has
    no slack for it (the TMA rate of the machine model is an uncalibrated
    estimate; machines/h100.toml). Written after the H100 had run the
    128 x 256 plan faster (2026-11-25): the model alone ties the two tiles, and this rule
    (like the raw unit bound in `iteration_cycles`) is what picks one."""
    best = min(modeled.values())
    tied = [t for t, c in modeled.items() if c <= best * (1 + tolerance)]
    return max(tied, key=lambda t: (headrooms[t], -modeled[t], -t))
