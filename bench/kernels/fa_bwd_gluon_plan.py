"""twill's schedules of the FA backward's two loops -> the plan of the Gluon
backward (bench/kernels/fa_bwd_gluon.py).

The loops are `fa_bwd.attn_bwd_kernel`'s own (its TTGIR, exported by the
pass), solved as the Gluon kernel runs them (`gluon_bwd_graphs`: no
last-stage pins, registers of a 4-warp group) with two compute groups.
What the kernel's SPLIT = "function" lowers, and `describe` checks:

* dK/dV loop, split by function (SPLIT1 = "function"): S^T and dV on one
  compute group (group P), dP^T and dK on the other (group dS); every op
  between S^T and dV (the exponentials of P^T) on group P, every op
  between dP^T and dK that does not feed dV (the dS^T arithmetic) on
  group dS; each group issues its first wgmma of iteration j + 1 before
  its second of iteration j (the kernel's order);
* or the cut twill made at head dim 64 before its model had a
  shared-memory bandwidth unit (2026-11-26; SPLIT1 = "elementwise"): S^T
  and everything from it to P^T and to dS^T on group E, dP^T, dV and dK
  (and dP^T - Delta) on group W, in the kernel's order
  (`_describe_elementwise`). The kernel lowers it; it runs at 0.73-0.82 of
  stock Triton (H100, 2026-11-26). Since the model charges shared-memory
  bandwidth (machines/h100.toml SMEM) its three crossings do not fit
  I = 14 and twill's head-dim-64 plan is the function split;
* dQ loop: S and dP on group P, dQ on the other group; or, for the loop
  sub-tiled into two halves of 64 query rows (fa_bwd's DQ_SUBTILE), each
  half's S, dP and dQ (and everything between) on a group of its own, dQ of
  block j issued before S of block j + 1 (SPLIT2 = "rows"; the graph the
  solver reads says so: `gluon_bwd_graphs`);
* the loads on the producer (group 0).

The wgmmas are found by their role, the name of the value they compute in
fa_bwd.py (the `origin` the pass exports: qkT, dv, dpT, dk; qk, dp, dq).

The plan's ring depths come from the schedule too, but not as the
forward's "prefetch + 1": a ring slot is written when the producer issues
the load (its `prefetch` iterations ahead of the load's cycle) and freed
when the load's last reader of that iteration completes; the slots a ring
needs are the intervals that span covers (`ring_slots`). In the dK/dV loop
Q is read by S^T in stage 0 and again by dK in stage 1, so one iteration of
prefetch needs 3 slots, not 2; measured on the H100 (2026-11-25), 2-slot
rings run the kernel at 0.82-0.91 of its 3-slot speed (head dim 128).

A schedule outside this family (e.g. both wgmmas of a chain on one group)
is refused with PlanError, so that the kernel never claims a schedule it
does not follow.
"""

import math

from bench.kernels.fa_fwd_gluon_plan import PlanError, _ancestors, same_iteration_edges

# The wgmmas of each loop by the fa_bwd.py value they compute ("dq_rows":
# the dQ loop with DQ_SUBTILE, each half's values suffixed _0 and _1).
ROLES = {"dkdv": {"qkT": "S", "dv": "dV", "dpT": "dP", "dk": "dK"},
         "dq": {"qk": "S", "dp": "dP", "dq": "dQ"},
         "dq_rows": {f"{v}_{h}": f"{r}{h}" for h in (0, 1) for v, r in (("qk", "S"), ("dp", "dP"), ("dq", "dQ"))}}


def _origin_name(op):
    """The name of the value an op computes: its location's name, inside a
    call site where the op is in a helper function."""
    origin = op.get("origin", "")
    for prefix in ('loc("', 'loc(callsite("'):
        if origin.startswith(prefix):
            return origin[len(prefix):].split('"')[0]
    return None


def dq_loop_kind(graph: dict) -> str:
    """"dq_rows" for the sub-tiled dQ loop (DQ_SUBTILE), else "dq"."""
    names = {_origin_name(o) for o in graph.get("op", [])}
    return "dq_rows" if "dq_0" in names else "dq"


def tensor_core_roles(graph: dict, loop: str) -> dict:
    """{role: op name} of the loop's wgmmas (ROLES[loop]), or PlanError."""
    want = ROLES[loop]
    found = {}
    for o in graph.get("op", []):
        if o.get("cost", {}).get("class") == "mma":
            role = want.get(_origin_name(o))
            if role is None or role in found:
                raise PlanError(f"wgmma {o['name']} ({_origin_name(o)!r}) is not one of {loop}'s {sorted(want)}")
            found[role] = o["name"]
    if set(found) != set(want.values()):
        raise PlanError(f"{loop} loop: wgmmas {sorted(found)} found, {sorted(want.values())} expected")
    return found


def ring_slots(schedule: dict, graph: dict, load: str) -> int:
    """Ring slots the `load`'s buffer needs: from the producer's issue of
    iteration i's load (its cycle minus `prefetch` intervals) to the
    completion of the last op of iteration i that reads it, in whole
    intervals."""
    ii = schedule["ii"]
    ops = {o["name"]: o for o in schedule["ops"]}
    prefetch = {s["op"]: s["prefetch"] for s in schedule["warp_specialization"]["streaming"]}.get(load, 0)
    readers = [e["to"] for e in graph.get("edge", []) if e["from"] == load and e.get("distance", 0) == 0]
    if not readers:
        raise PlanError(f"load {load} has no reader in its iteration")
    write = ops[load]["cycle"] - prefetch * ii
    free = max(ops[r]["cycle"] + ops[r]["cycles"] for r in readers)
    return max(1, math.ceil((free - write) / ii))


def describe(schedule: dict, graph: dict, loop: str) -> dict:
    """What twill's `schedule` of the `loop` ("dkdv" or "dq") decides in the
    kernel's terms: the group of each wgmma role, the value that crosses
    between the groups, and the slots of each load's ring; PlanError for a
    schedule outside the family the kernel lowers (module doc)."""
    if any("warp_group" not in o for o in schedule["ops"]):
        raise PlanError("the schedule has no warp groups (a modulo schedule alone; solve with --groups)")
    ii = schedule["ii"]
    ops = {o["name"]: o for o in schedule["ops"]}
    roles = tensor_core_roles(graph, loop)
    group = {r: ops[n]["warp_group"] for r, n in roles.items()}
    cycle = {r: ops[n]["cycle"] for r, n in roles.items()}
    loads = [o["name"] for o in graph["op"] if o.get("variable_latency")]
    for name in loads:
        if ops[name]["warp_group"] != 0:
            raise PlanError(f"load {name} is not on the producer")
    if 0 in group.values():
        raise PlanError("a wgmma on the producer")
    preds, succs = same_iteration_edges(graph)
    compute = [n for n in ops if n not in loads]

    def on_paths(src, dst):
        return (_ancestors(roles[dst], preds) & _ancestors(roles[src], succs)) | {roles[src], roles[dst]}

    if loop == "dq_rows":
        # Each half's chain (S, P, dP, dS, dQ) on a compute group of its
        # own, issued in the kernel's order: dQ of block j before S of
        # block j + 1.
        sides = {}
        for h in (0, 1):
            g = {group[f"S{h}"], group[f"dP{h}"], group[f"dQ{h}"]}
            if len(g) != 1:
                raise PlanError(f"half {h}'s wgmmas span groups {sorted(g)}")
            if not cycle[f"dQ{h}"] < cycle[f"S{h}"] + ii:
                raise PlanError(f"half {h}: dQ at {cycle[f'dQ{h}']} after S of the next block "
                                f"({cycle[f'S{h}']} + {ii}): not the kernel's order")
            sides[g.pop()] = on_paths(f"S{h}", f"dQ{h}") | on_paths(f"dP{h}", f"dQ{h}")
        if len(sides) != 2:
            raise PlanError("both halves of the dQ loop on one compute group; the kernel gives each its own")
        crossing = sorted({o for g, m in sides.items() for o in m for t in succs.get(o, ())
                           if t in compute and ops[t]["warp_group"] != g})
        slots = {"STAGES2": max(ring_slots(schedule, graph, n) for n in loads if _feeds_tc(n, graph))}
    elif loop == "dkdv" and group["dV"] == group["dP"] == group["dK"] != group["S"]:
        return _describe_elementwise(schedule, graph, roles, group, cycle, preds, succs, loads, compute)
    elif loop == "dkdv":
        p_ops = on_paths("S", "dV")
        ds_ops = (on_paths("dP", "dK") | on_paths("S", "dK")) - p_ops
        if group["S"] != group["dV"] or group["dP"] != group["dK"] or group["S"] == group["dP"]:
            raise PlanError(f"dK/dV wgmmas on groups {group}: neither S^T, dV on one group and dP^T, dK on the "
                            f"other, nor S^T alone")
        # The kernel's order: a group issues its first wgmma of iteration
        # j + 1 before its second of iteration j, and that second before
        # its first of iteration j + 2.
        for first, second in (("S", "dV"), ("dP", "dK")):
            if not cycle[first] + ii <= cycle[second] < cycle[first] + 2 * ii:
                raise PlanError(f"{first} at {cycle[first]} and {second} at {cycle[second]} (I = {ii}): not the "
                                f"kernel's order ({first} of j + 1, then {second} of j)")
        sides = {group["S"]: p_ops, group["dP"]: ds_ops}
        crossing = sorted({o for o in p_ops for s in succs.get(o, ()) if s in ds_ops})
        slots = {"SPLIT1": "function",
                 "STAGES1": max(ring_slots(schedule, graph, n) for n in loads if _feeds_tc(n, graph))}
    else:
        p_ops = on_paths("S", "dQ") | on_paths("dP", "dQ")
        p_ops -= {roles["dQ"]}
        if group["S"] != group["dP"] or group["dQ"] == group["S"]:
            raise PlanError(f"dQ wgmmas on groups {group}: not S, dP on one group and dQ on the other")
        # Group P's ALU chain up to dS on group P; what converts dS for dQ's
        # operand may sit on either side (the kernel stores fp16 dS).
        chain = {n for n in p_ops if ops[n]["units"].keys() & {"SFU"} or n in (roles["S"], roles["dP"])}
        sides = {group["S"]: chain, group["dQ"]: {roles["dQ"]}}
        crossing = sorted({o for o in p_ops if ops[o]["warp_group"] == group["S"]
                           for s in succs.get(o, ()) if ops[s]["warp_group"] == group["dQ"]})
        slots = {"STAGES2": max(ring_slots(schedule, graph, n) for n in loads if _feeds_tc(n, graph))}
    for g, members in sides.items():
        off = sorted(n for n in members if n in compute and ops[n]["warp_group"] != g)
        if off:
            raise PlanError(f"{off} not on group {g} with their chain")
    return dict(groups={r: group[r] for r in sorted(group)}, crossing=crossing, **slots)


def _describe_elementwise(schedule, graph, roles, group, cycle, preds, succs, loads, compute):
    """`describe` for twill's other dK/dV cut (SPLIT1 = "elementwise"):
    S^T on group E with every op from it to P^T and to dS^T (the product
    that joins the S^T and dP^T paths); dP^T, dV and dK on group W with the
    ops of the dP^T path before that join (dP^T - Delta). What converts P^T
    or dS^T into dV's or dK's operand may sit on either side (the kernel
    hands both over in shared memory). The kernel's order: group W issues
    dP^T of j, then dV and dK of j - 1; group E issues S^T of j, forms
    dS^T of j - 1, then P^T of j."""
    ii = schedule["ii"]
    ops = {o["name"]: o for o in schedule["ops"]}
    e_group, w_group = group["S"], group["dP"]
    down = {r: _ancestors(roles[r], succs) for r in ("S", "dP")}
    up = {r: _ancestors(roles[r], preds) for r in ("dV", "dK")}
    handoff = (preds.get(roles["dV"], set()) | preds.get(roles["dK"], set())) - set(roles.values()) - set(loads)
    join = (down["S"] & down["dP"] & up["dK"]) - handoff
    e_ops = (((down["S"] & up["dV"]) | join) - handoff) | {roles["S"]}
    w_ops = ((down["dP"] & up["dK"]) - down["S"] - handoff) | {roles[r] for r in ("dP", "dV", "dK")}
    if not join:
        raise PlanError("no op joins the S^T and dP^T paths before dK")
    for g, members in ((e_group, e_ops), (w_group, w_ops)):
        off = sorted(n for n in members if n in compute and ops[n]["warp_group"] != g)
        if off:
            raise PlanError(f"{off} not on group {g} with their chain")
    if not cycle["dP"] + ii < cycle["dV"] < cycle["dK"] < cycle["dP"] + 2 * ii:
        raise PlanError(f"dP^T at {cycle['dP']}, dV at {cycle['dV']}, dK at {cycle['dK']} (I = {ii}): not the "
                        f"kernel's order (dP^T of j, then dV and dK of j - 1)")
    sfu = [ops[n]["cycle"] for n in e_ops if "SFU" in ops[n]["units"]]
    first_exp = min(sfu) if sfu else cycle["S"] + ii
    late = sorted(n for n in join if not cycle["S"] + ii <= ops[n]["cycle"] < first_exp + ii)
    if late:
        raise PlanError(f"{late} not between S^T of the next block and its exponentials: not the kernel's order")
    crossing = sorted({o for o in e_ops | w_ops | handoff for t in succs.get(o, ())
                       if t in compute and ops[t]["warp_group"] != ops[o]["warp_group"]})
    return dict(groups={r: group[r] for r in sorted(group)}, crossing=crossing, SPLIT1="elementwise",
                STAGES1=max(ring_slots(schedule, graph, n) for n in loads if _feeds_tc(n, graph)))


def _feeds_tc(load, graph):
    """Whether `load` is read by a wgmma (the TMA tiles; M and Delta are
    pointer loads the kernel's groups issue themselves)."""
    mma = {o["name"] for o in graph["op"] if o.get("cost", {}).get("class") == "mma"}
    return any(e["from"] == load and e["to"] in mma for e in graph.get("edge", []))


def gluon_bwd_graphs(twill_opt: str, ttgir, out_dir) -> dict:
    """The backward's two loop graphs ({"dkdv": path, "dq": path}) as the
    Gluon kernel runs them, exported by the pass's Gluon route
    (`fa_fwd_gluon_plan.gluon_graphs`: no last-stage pins, registers of a
    4-warp group) with the changes the kernel's code makes
    (src/backend/gluon.rs): the dK/dV loop's fp32 tiles truncated for a
    wgmma cross the groups in fp16 (`gluon=fp16-crossings`: P^T's crossing
    in the function split; in fp32 the crossings cost the elementwise cut
    10 of its 14 ms); the sub-tiled dQ loop's accumulating wgmmas complete
    within their iteration (`gluon=complete-accumulators`: kept in flight
    across the rows kernel's back edge, ptxas serializes every wgmma,
    C7515, DQ_INFLIGHT). Not for the dK/dV loop: its kernel issues S^T
    (and dP^T) of j + 1 before dV (dK) of j, so there the accumulators
    complete within the kernel's rotated iteration, and `describe` checks
    that order."""
    from bench.kernels.fa_fwd_gluon_plan import export_graphs, load_graph

    def loops(name, *changes):
        graphs = export_graphs(twill_opt, ttgir, out_dir / name, scope="all", target="gluon-sm90", gluon=changes)
        if len(graphs) != 2:
            raise PlanError(f"expected the backward's 2 loop graphs, got {len(graphs)}")
        return graphs

    out = {"dkdv": loops("dkdv", "fp16-crossings")[0], "dq": loops("dq")[1]}
    if dq_loop_kind(load_graph(out["dq"])) == "dq_rows":
        out["dq"] = loops("dq_rows", "complete-accumulators")[1]
    return out


def launch_plan(plan: dict, fits) -> dict:
    """The plan with its launch (not a schedule choice: the loops'
    schedules are the same): each loop's kernel on a persistent grid with
    two buffers of its tile's own operands (PERSIST1: K and V, PERSIST2: Q
    and dO) where the kernel still fits the SM's shared memory (`fits`, a
    test of a configuration), and the dQ kernel on a second stream beside
    the dK/dV kernel (CONCURRENT): the loops share no result. Measured at
    head dim 64 (H100, 2026-11-26): the per-tile grids run 0.90 / 1.00 / 1.01 of
    stock Triton at 1k / 4k / 16k, this launch 1.01 / 1.06 / 1.04."""
    out = dict(plan, CONCURRENT=True)
    for key in ("PERSIST1", "PERSIST2"):
        trial = dict(out, **{key: 2})
        if fits(trial):
            out = trial
    return out


def plan_from_schedules(dkdv_schedule: dict, dkdv_graph: dict, dq_schedule: dict, dq_graph: dict) -> dict:
    """The kernel constexprs (SPLIT1, SPLIT2, STAGES1, STAGES2) that lower
    twill's schedules of the two loops, or PlanError: the dK/dV loop split
    by function or elementwise; the dQ loop by function, or by rows where
    twill read it sub-tiled (DQ_SUBTILE) and gave each half a group."""
    a = describe(dkdv_schedule, dkdv_graph, "dkdv")
    kind = dq_loop_kind(dq_graph)
    b = describe(dq_schedule, dq_graph, kind)
    return dict(SPLIT1=a["SPLIT1"], SPLIT2="rows" if kind == "dq_rows" else "function", STAGES1=a["STAGES1"],
                STAGES2=b["STAGES2"])
