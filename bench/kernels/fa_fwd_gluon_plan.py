"""twill's schedule of the sub-tiled FA forward loop -> the plan of the Gluon
kernel that realizes it (bench/kernels/fa_fwd_gluon.py).

The Gluon kernel lowers one family of schedules: a producer (the TMA loads)
and two consumer groups, one per 64-row sub-tile, each issuing its QK^T and
PV as asynchronous wgmmas. What varies is what twill decides:

* the turns: the tensor core takes the two groups in turns, each turn being
  one group's two wgmmas back to back (in the schedule's modular
  reservation table, each group's two TC ops are adjacent, cyclically).
  A capacity order, not a dependence: the kernel leaves it to the hardware
  unless asked to enforce it (PINGPONG; see `plan_from_schedule`);
* QK_FIRST: within a turn, QK^T of this iteration comes before PV of the
  previous one;
* INTRA: a group's exponentials run while its own PV is on the tensor core;
* STAGES: one more buffer per K / V ring than the loads' prefetch depth.

twill solves the loop with `--objective slack` (OBJECTIVE): at the minimum
I and as many stages as the shortest schedule, the largest slack for the
wgmmas' latencies. That schedule issues each group's QK^T of iteration j
before its PV of j - 1, with its softmax under that PV (QK_FIRST, INTRA:
FA3's intra-warpgroup order); the paper's objective (the shortest L) gives
the turn order with PV first and a softmax with 3 cycles of slack.

`plan_from_schedule` reads those off twill's JSON (`twill solve --json`) and
the graph it solved, and refuses (PlanError) a schedule outside the family,
e.g. both sub-tiles on one compute group, so that the kernel never claims a
schedule it does not follow.

The graph is the loop's own, exported by the pass from the kernel's TTGIR
(`twill-opt --twill-export-graph`), made to describe the Gluon kernel by
the pass's Gluon route (`gluon_graphs`): without the last-stage pins (a
rule of Triton 3.6's pipeliner, which cannot predicate a wgmma: Gluon
issues each wgmma where the schedule puts it) and with the per-thread
registers of a compute group of one warpgroup (the TTGIR's are for all the
CTA's warps).
"""

import json
import re
import subprocess
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None


class PlanError(ValueError):
    """The schedule is not one the Gluon kernel lowers."""


def export_graphs(twill_opt: str, ttgir: Path, out_dir: Path, arch: str = "sm90", scope: str = "ws",
                  target: str = "triton", gluon: tuple = ()) -> list:
    """The loop graphs twill's pass exports from a TTGIR module (one TOML per
    candidate loop; `scope` as the pass's: "ws" the loops marked
    tt.warp_specialize, "all" every loop). `target` "triton": the graphs the
    schedule pass solves; "gluon-sm90": as a Gluon kernel runs them (the
    pass's `target` option, src/backend/gluon.rs), with the optional changes
    named in `gluon` (keep-pins, fp16-crossings, complete-accumulators)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    options = f"dir={out_dir} arch={arch} scope={scope} target={target}"
    if gluon:
        options += f" gluon={','.join(gluon)}"
    r = subprocess.run([twill_opt, str(ttgir), f"--twill-export-graph={options}", "-o", "/dev/null"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise PlanError(f"twill-opt --twill-export-graph on {ttgir} failed (exit {r.returncode}): "
                        f"{r.stderr.strip()[-300:]}")
    def loop_number(path):  # NAME_loopK.toml, in program order (loop10 after loop9)
        m = re.search(r"_loop(\d+)\.toml$", path.name)
        return (int(m.group(1)) if m else 0, path.name)

    return sorted(out_dir.glob("*.toml"), key=loop_number)


def gluon_graphs(twill_opt: str, ttgir: Path, out_dir: Path, scope: str = "ws", pinned: bool = False) -> list:
    """The exported loop graphs as the Gluon kernel runs them (module doc):
    no `last_stage` pins (unless `pinned`: the same problem under Triton
    3.6's rule, for comparison), `regs` of a compute group of one warpgroup
    (the pass scales the CTA's per-thread registers by its warps over the
    machine's warp-group size, and refuses a CTA that does not split)."""
    return export_graphs(twill_opt, ttgir, out_dir, scope=scope, target="gluon-sm90",
                         gluon=("keep-pins",) if pinned else ())


# What twill optimizes after I for the Gluon kernel (`twill solve
# --objective`): the kernel writes its prologue and epilogue turns once, so
# the schedule's length L costs nothing per iteration, while the latency
# slack of the wgmmas (how late they may complete before they delay one
# another; src/joint/slack.rs) counts in every iteration.
OBJECTIVE = "slack"


def solve(twill: str, graph: Path, consumer_regs: int, groups: int = 2, u: int = 30, timeout: int = 120,
          objective: str = OBJECTIVE) -> dict:
    """twill's joint SWP + WS schedule of `graph` (JSON), with `groups`
    compute groups of at most `consumer_regs` registers per thread, under
    `objective` (`length`: the paper's shortest L; `slack`: see OBJECTIVE)."""
    r = subprocess.run([twill, "solve", str(graph), "--groups", str(groups), "--reg-limit", str(consumer_regs),
                        "--u", str(u), "--timeout", str(timeout), "--objective", objective, "--budget", "0",
                        "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise PlanError(f"twill solve {graph} failed (exit {r.returncode}): {r.stderr.strip()[-300:]}")
    return json.loads(r.stdout)


def same_iteration_edges(graph: dict):
    """(preds, succs) of `graph`'s dependences within one iteration
    (distance 0): {op: set of ops}."""
    preds, succs = {}, {}
    for e in graph.get("edge", []):
        if e.get("distance", 0) == 0:
            preds.setdefault(e["to"], set()).add(e["from"])
            succs.setdefault(e["from"], set()).add(e["to"])
    return preds, succs


def _ancestors(op, preds):
    """The ops `op` depends on, transitively (with `succs` for `preds`: the
    ops that depend on it)."""
    seen, todo = set(), [op]
    while todo:
        for p in preds.get(todo.pop(), ()):
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return seen


def _overlap(a0, a1, b0, b1, ii):
    """Whether [a0, a1) and [b0 + k * ii, b1 + k * ii) intersect for some
    integer k (two ops' executions in the steady state, any iterations)."""
    reach = (a1 - a0 + b1 - b0) // ii + 2
    return any(max(a0, b0 + k * ii) < min(a1, b1 + k * ii) for k in range(-reach - (b0 - a0) // ii,
                                                                          reach - (b0 - a0) // ii + 1))


def describe(schedule: dict, graph: dict) -> dict:
    """What twill's `schedule` (the JSON of `twill solve --json`) of `graph`
    (the parsed TOML) decides, in the kernel's terms: `groups` (the compute
    group of each sub-tile), `turns` (each group's two wgmmas adjacent on
    the tensor core, the groups alternating), `qk_first` (a turn starts with
    QK^T), `intra` (a group's exponentials under its own PV) and `prefetch`
    (iterations of prefetch of the loads); PlanError for a schedule outside
    the family the kernel lowers."""
    ii = schedule["ii"]
    if any("warp_group" not in o for o in schedule["ops"]):
        raise PlanError("the schedule has no warp groups (a modulo schedule alone; solve with --groups)")
    ops = {o["name"]: o for o in schedule["ops"]}
    variable = {o["name"] for o in graph.get("op", []) if o.get("variable_latency")}
    preds, succs = same_iteration_edges(graph)
    tc = [n for n, o in ops.items() if "TC" in o["units"]]
    if len(tc) != 4:
        raise PlanError(f"{len(tc)} tensor-core ops; the kernel has two sub-tiles of QK^T and PV")
    # PV consumes P, computed from the same iteration's QK^T; QK^T has no
    # tensor-core ancestor.
    qk_of = {}
    for t in tc:
        up = [a for a in _ancestors(t, preds) if a in tc]
        if len(up) > 1:
            raise PlanError(f"{t} depends on {len(up)} tensor-core ops")
        if up:
            qk_of[t] = up[0]
    pvs = sorted(qk_of)
    if len(pvs) != 2 or len(set(qk_of.values())) != 2:
        raise PlanError("the tensor-core ops do not form two QK^T -> PV sub-tiles")
    subtiles = [(qk_of[pv], pv) for pv in pvs]
    group = {}
    for qk, pv in subtiles:
        g = {ops[qk]["warp_group"], ops[pv]["warp_group"]}
        # Every op on a path from QK^T to PV (the softmax) runs in the group
        # too. Ops that feed a sub-tile's softmax without depending on its
        # QK^T (the causal mask's key positions, shared by both sub-tiles)
        # are not on such a path: the kernel computes them in each group.
        between = _ancestors(pv, preds) & _ancestors(qk, succs)
        g |= {ops[b]["warp_group"] for b in between if b in ops and b not in variable}
        if len(g) != 1 or 0 in g:
            raise PlanError(f"sub-tile {qk}/{pv} spans warp groups {sorted(g)}")
        group[(qk, pv)] = g.pop()
    if len(set(group.values())) != 2:
        raise PlanError("both sub-tiles are on one compute group; the kernel gives each its own")
    for o in schedule["ops"]:
        if "TMA" in o["units"] and o["warp_group"] != 0:
            raise PlanError(f"load {o['name']} is not on the producer")

    # The tensor core's order in the steady state: (slot, group, kind).
    seq = sorted((ops[t]["cycle"] % ii, group[st], "qk" if t == st[0] else "pv")
                 for st in subtiles for t in st)
    gs = [g for _, g, _ in seq]
    # Turns: each group's two wgmmas adjacent in that order (cyclically),
    # i.e. the group changes exactly twice around the cycle.
    turns = sum(gs[i] != gs[i - 1] for i in range(4)) == 2
    qk_first = None
    if turns:
        firsts = [seq[i][2] for i in range(4) if gs[i] != gs[i - 1]]
        if len(set(firsts)) != 1:
            raise PlanError("the two groups' turns start with different wgmmas")
        qk_first = firsts[0] == "qk"
        # The kernel's turn j holds QK^T of iteration j and PV of iteration
        # j - 1: those two start less than one interval apart.
        for qk, pv in subtiles:
            delta = ops[qk]["cycle"] + ii - ops[pv]["cycle"]
            if not -ii < delta < ii:
                raise PlanError(f"the turn of {qk}/{pv} does not pair QK^T of one iteration with PV of the one "
                                f"before")
    # INTRA: the group's largest SFU op (the exponentials of P) overlaps its
    # own PV on the tensor core.
    intra = []
    for (qk, pv), g in group.items():
        sfu = [o for o in schedule["ops"] if "SFU" in o["units"] and o["warp_group"] == g]
        if not sfu:
            raise PlanError(f"no SFU op on group {g}")
        e = max(sfu, key=lambda o: o["cycles"])
        p = ops[pv]
        intra.append(_overlap(e["cycle"], e["cycle"] + e["cycles"], p["cycle"], p["cycle"] + p["cycles"], ii))
    if len(set(intra)) != 1:
        raise PlanError("the groups differ in whether the softmax overlaps their own PV")
    prefetch = max((s["prefetch"] for s in schedule["warp_specialization"]["streaming"]), default=0)
    qk_first = bool(qk_first) if turns else intra[0]
    if intra[0] and not qk_first:
        raise PlanError("a softmax under its own PV needs QK^T first in the turn")
    return dict(groups={f"{qk}/{pv}": g for (qk, pv), g in group.items()}, turns=turns, qk_first=qk_first,
                intra=intra[0], prefetch=prefetch, tc_order=[f"{kind}@{slot} group {g}" for slot, g, kind in seq])


def plan_from_schedule(schedule: dict, graph: dict, enforce_turns: bool = False) -> dict:
    """The kernel constexprs (PINGPONG, QK_FIRST, INTRA, STAGES) that lower
    twill's `schedule` of `graph` (see `describe`), or PlanError.

    Every data dependence of the schedule becomes a barrier or a wgmma wait.
    The order of the two groups on the tensor core is not a dependence but a
    consequence of its capacity: the tensor core runs one group's wgmmas
    after the other's whatever the issue order, and Hopper's warp schedulers
    interleave the groups as they become ready. By default it is left to the
    hardware; `enforce_turns` makes the groups hand the turn on through
    mbarriers (PINGPONG) where the schedule alternates them. Measured on the
    H100 at N = 16k (BENCHMARKS.md, 2026-11-24, medians of 7 interleaved
    rounds): 605.5 TFLOPS with the turns enforced, 608.0 without."""
    facts = describe(schedule, graph)
    return dict(PINGPONG=bool(enforce_turns and facts["turns"]), QK_FIRST=facts["qk_first"],
                INTRA=facts["intra"], STAGES=facts["prefetch"] + 1)


def load_graph(path: Path) -> dict:
    if tomllib is None:
        raise RuntimeError("reading graphs needs Python >= 3.11 (tomllib)")
    with open(path, "rb") as f:
        return tomllib.load(f)


# ---------------------------------------------------------------------------
# CTAs per SM: the occupancy of the plan, chosen by twill's configuration
# model (twill_triton.configure) as for a Triton kernel.
# ---------------------------------------------------------------------------

def cycle_scale(schedule: dict) -> float:
    """Cycles per normalized unit of `schedule`, as the pass reports I and L
    in cycles: the largest raw cost over its normalized value."""
    last = schedule["normalization"]["costs"][-1]
    return last["original"] / last["normalized"]


def cta_cycles(schedule: dict, outside: float, iterations: int, unit_cycles: float) -> float:
    """One CTA alone on the SM (configure.score's T): its code outside the
    loop, then the loop: `iterations` iterations at I apart, the last
    taking L, or the busiest unit's `unit_cycles` per iteration where that
    is longer."""
    from twill_triton import configure

    scale = cycle_scale(schedule)
    alone = configure.loop_alone_cycles(iterations, schedule["ii"] * scale, schedule["length"] * scale)
    return outside + max(alone, iterations * unit_cycles)


def occupancy_model(options: dict, unit_cycles: float, outside: float, problems: dict, sms: int) -> dict:
    """Modeled cycles of the plan at each occupancy in `options` ({CTAs per
    SM: the schedule solved within that occupancy's registers}) for each
    problem in `problems` ({name: (CTAs launched, iterations per CTA)}),
    with configure's grid model: c CTAs share an SM for max(T, c x S),
    S = iterations x `unit_cycles` (the busiest unit's raw cycles per
    iteration). Returns {name: {"cycles": {c: cycles}, "ctas": the choice}}:
    the first of configure's ordering (`configure.ordered`): the least
    modeled time, and within its MODEL_TOLERANCE the most CTAs per SM
    (stalls the model leaves out are hidden behind another CTA's work)."""
    from twill_triton import configure

    if not options:
        raise ValueError("no occupancy to choose from: the plan fits at no CTAs-per-SM tried")
    out = {}
    for name, (grid, iterations) in problems.items():
        cycles = {c: configure.grid_cycles(grid, sms, c, cta_cycles(s, outside, iterations, unit_cycles),
                                           iterations * unit_cycles) for c, s in options.items()}
        first = configure.ordered([configure.Scored(candidate=dict(ctas=c), scheduled=True, ctas_per_sm=c, time=t)
                                   for c, t in cycles.items()])[0]
        out[name] = dict(cycles=cycles, ctas=first.ctas_per_sm)
    return out
