"""Kernel configuration chosen by twill's model, without a GPU.

twill solves one loop at one configuration (tile sizes, warps); which
configuration to launch is a second question: a smaller tile or one buffer
fewer can let two CTAs share an SM, which the per-CTA schedule does not see.
`choose` compiles every candidate with twill (on the CPU, for an explicit
target) and ranks them by modeled time:

* per loop, from twill's report (`Decision.report`, schema
  twill.schedule-report/1, docs/report-schema.md): I (`ii_cycles`: cycles
  per iteration of one CTA alone on the SM), L (`length_cycles`: one
  iteration from first issue to last completion) and the raw cycles one
  iteration keeps each unit busy (`units`; where a record has none, only R,
  `bounds.resource_cycles`, the busiest unit's cycles after
  normalization); a loop twill skipped for want of a schedule keeps
  Triton's and counts pessimistically, I = L = its ops back to back
  (`bounds.sequential_cycles`);
* a phase is a loop on its own, or the loops of one `ttg.warp_specialize`
  (a loop Triton has already split into partitions, as its Hopper warp
  specialization does before twill runs; the record's `warp_specialize`),
  which run at the same time. A phase of n
  iterations needs S = n * (its busiest unit's cycles per iteration, the
  loops' cycles added up unit by unit: partitions share the SM's units) and
  takes, alone on the SM, max((n - 1) * I + L of its slowest loop, S);
* one CTA runs its phases back to back after and before its code outside
  the loops (the report's `functions[].outside_cycles`: the critical path of the
  prologue and epilogue, e.g. the Q tile load and the output store):
  T = outside + sum over phases; it needs S = sum over phases of the
  phases' S on the units;
* CTAs per SM, c, from the compiled kernel (shared memory from Triton's
  metadata, registers from the cubin, warps) and the machine's `[occupancy]`
  table (machines/*.toml); a kernel whose registers spill (a stack frame in
  the cubin larger than SPILL_TOLERANCE) ranks after all that do not, since
  the schedules assume values in registers;
* c CTAs share an SM for max(T, c * S) cycles; the grid takes
  floor(grid / (SMs * c)) such waves and a last partial one.

* the operand panels the running CTAs share (given per problem by the
  caller: the A and B panels a GEMM's concurrently running tiles read, the
  K and V of the heads an attention kernel's running CTAs cover) must fit
  in the L2 (the machine's `l2_bytes`): co-resident CTAs drift out of phase
  (measured on the H100: 2 CTAs per SM from the second wave on), and then
  only what the L2 holds is reused; the 8k GEMM at 2 CTAs per SM, whose
  running tiles share 91 MB of panels, ran 1.23x slower per CTA after the
  first wave, at 1 CTA per SM (54 MB) 1.006x. A candidate whose panels
  exceed the L2 ranks after those whose panels fit, and among such the
  smaller excess first, in steps of L2_EXCESS_STEP of the L2 (within a step
  the modeled time decides).

Among the candidates that do not spill and whose panels fit (or, when none
fit, exceed the L2 by the fewest steps), the one with the smallest modeled
time wins; within MODEL_TOLERANCE of it, the one with more CTAs per SM, then
one whose streaming loads are issued far enough ahead to cover their
modeled time (the record's `loads.lead_cycles` >= 0 in every loop; a loop
solved for N CTAs per SM, `ctas`, only where the kernel gets N), then the smaller modeled time (then: the
earlier candidate). The model's time does not price an exposed load: loads
last in the body at the modeled depth are issued at its end, one iteration
less ahead. Measured on the H100 (probe bench/gpu/probe/bwd_loads.py,
2026-11-24, both Tritons, 5 interleaved rounds): such uncovered loads ran
at 0.84-0.89 of Triton's 3-stage schedule on the hd64 backward (32-row
steps, 4 warps, 2 CTAs per SM in every placement). Among covered
placements (loads first, with or without an extra stage; loads last with
one) no order held across kernels: loads last with an extra stage led by
1.5-2.5% on that backward and trailed by 4-5% on the 4k GEMM, and the
loads-first rows of an earlier run led it by 1-3% on the hd128 backward and the
hd64 forward; so the candidates' order decides.
Every number is returned, so a benchmark can show the model's ranking next
to measured times.
"""

import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from .hook import REPORT_SCHEMA as SCHEMA
from .hook import checkouts

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

# Stack-frame bytes per thread up to which a kernel still counts as keeping
# its values in registers. Measured on the H100 (2026-11-23): FA hd128 at
# BLOCK_N 64 / 4 warps with the loads last spills 16 bytes and matches the
# best stock configuration; the causal
# forward at that configuration (Triton 3.6.0's own kernel) spills 40 bytes
# and is the best stock configuration at every size; the sub-tiled forward
# at BLOCK_N 128 / 8 warps spills 72 bytes and runs at 0.58 of it.
SPILL_TOLERANCE = 48

# Modeled times this close to the best count as a tie, broken towards more
# CTAs per SM: stalls the model leaves out (pipeline fill and drain, barrier
# waits, the CTA's launch and teardown) are exposed when a CTA has the SM to
# itself and hidden behind another CTA's work otherwise. Measured on the H100
# (2026-11-23): the FA forward at 1k, where Triton's Hopper warp
# specialization (1 CTA/SM) models 0.4% ahead of BLOCK_N 64 with 2 CTAs/SM,
# runs 4-5% behind it; at 4k (2.3% ahead in the model) and 16k (3.6%) the
# two are even or warp specialization leads by 1%.
MODEL_TOLERANCE = 0.01

# Panels beyond the L2 are compared in steps of this fraction of it: 54 MB
# and 91 MB against the H100's 50 MB (the 8k GEMM at 1 and 2 CTAs per SM)
# are one and nine steps over; within one step the modeled time decides.
L2_EXCESS_STEP = 0.1


@dataclass
class Occupancy:
    """Per-SM limits that decide how many CTAs share an SM."""
    sms: int
    smem_per_sm: int
    smem_reserved_per_cta: int
    max_smem_per_cta: int
    regs_per_sm: int
    reg_granularity: int
    max_warps_per_sm: int
    max_ctas_per_sm: int
    threads_per_warp: int
    # L2 bytes (None: the description does not give them; nothing is checked).
    l2_bytes: Optional[int] = None

    def ctas(self, shared: int, regs_per_thread: int, num_warps: int) -> int:
        """CTAs of one kernel that fit on one SM at once (0: none)."""
        if shared > self.max_smem_per_cta:
            return 0
        by_smem = self.smem_per_sm // (shared + self.smem_reserved_per_cta)
        per_warp = (math.ceil(max(regs_per_thread, 1) * self.threads_per_warp / self.reg_granularity)
                    * self.reg_granularity)
        by_regs = self.regs_per_sm // (per_warp * num_warps)
        by_warps = self.max_warps_per_sm // num_warps
        return max(0, min(by_smem, by_regs, by_warps, self.max_ctas_per_sm))


def machine_occupancy(machine: str = "h100", machines_dir: Optional[Path] = None) -> Occupancy:
    """The `sms` and `[occupancy]` table of a bundled machine description."""
    if tomllib is None:
        raise RuntimeError("reading machine descriptions needs Python >= 3.11 (tomllib)")
    dirs = ([Path(machines_dir)] if machines_dir else []) + [repo / "machines" for repo in checkouts()]
    path = next((d / f"{machine}.toml" for d in dirs if (d / f"{machine}.toml").exists()), None)
    if path is None:
        raise FileNotFoundError(f"no machine description {machine}.toml in {', '.join(map(str, dirs))}")
    with open(path, "rb") as f:
        m = tomllib.load(f)
    o = m["occupancy"]
    return Occupancy(sms=m["sms"], smem_per_sm=o["smem_per_sm"],
                     smem_reserved_per_cta=o["smem_reserved_per_cta"],
                     max_smem_per_cta=m["memory"]["smem"]["capacity"], regs_per_sm=m["memory"]["regs"]["capacity"],
                     reg_granularity=o["reg_granularity"], max_warps_per_sm=o["max_warps_per_sm"],
                     max_ctas_per_sm=o["max_ctas_per_sm"], threads_per_warp=m["warps"]["threads_per_warp"],
                     l2_bytes=o.get("l2_bytes"))


def cubin_resources(cubin: bytes):
    """(registers per thread, stack frame bytes) of the kernel of a cubin:
    the EIATTR_REGCOUNT and EIATTR_FRAME_SIZE attributes of its `.nv.info`
    sections (ELF64). A frame means local memory: spilled registers."""
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names_at = sections[shstrndx][4]
    regs = frame = 0
    for name, _typ, _flags, _addr, offset, size in sections:
        end = cubin.index(b"\0", names_at + name)
        if not cubin[names_at + name:end].startswith(b".nv.info"):
            continue
        data, p = cubin[offset:offset + size], 0
        while p + 4 <= len(data):
            fmt, attr = data[p], data[p + 1]
            if fmt == 0x04:  # EIFMT_SVAL: a 16-bit size and a value
                sz = struct.unpack_from("<H", data, p + 2)[0]
                if sz >= 8 and attr in (0x2F, 0x11):  # (function, value)
                    value = struct.unpack_from("<II", data, p + 4)[1]
                    if attr == 0x2F:  # EIATTR_REGCOUNT
                        regs = max(regs, value)
                    else:  # EIATTR_FRAME_SIZE
                        frame = max(frame, value)
                p += 4 + sz
            else:  # EIFMT_NVAL / EIFMT_BVAL / EIFMT_HVAL: no payload beyond 4 bytes
                p += 4
    if regs == 0:
        raise ValueError("no EIATTR_REGCOUNT in the cubin")
    return regs, frame


@dataclass
class Loop:
    ii: int          # cycles per iteration of one CTA alone on the SM
    resource: int    # busiest unit's cycles per iteration
    length: int      # cycles of one iteration, first issue to last completion
    scheduled: bool = True  # False: twill skipped it; ii = length = ops back to back
    group: Optional[int] = None  # the ttg.warp_specialize it is a partition of
    units: Dict[str, int] = field(default_factory=dict)  # raw cycles per unit per iteration
    # Extra stages of prefetch of its streaming loads (None: no streaming
    # load, or a loop twill skipped).
    extra_prefetch: Optional[int] = None
    # Its streaming loads come last in the body, and their least lead over
    # their modeled time, cycles (None: no streaming load, or not reported).
    loads_last: Optional[bool] = None
    load_slack: Optional[int] = None
    # The CTAs per SM its schedule was solved for (the pass's `ctas`).
    ctas: int = 1


def _units(record: dict) -> Dict[str, int]:
    return {u["unit"]: int(u["cycles"]) for u in record.get("units") or []}


def _records(report: Optional[dict], key: str) -> List[dict]:
    """The `key` records of a twill.schedule-report/1 document (none for a
    missing report)."""
    if not report:
        return []
    schema = report.get("schema", "")
    if schema != SCHEMA:
        raise ValueError(f"unsupported twill report schema {schema!r} (this package reads {SCHEMA})")
    return list(report.get(key) or [])


def outside_cycles(report: Optional[dict]) -> int:
    """Cycles each CTA spends outside its loops (twill's estimate of the
    kernel's prologue and epilogue; 0 where the report gives none)."""
    return sum(int(f["outside_cycles"]) for f in _records(report, "functions") if f.get("outside_cycles") is not None)


def _scheduled_loop(record: dict, group: Optional[int]) -> Loop:
    s = record["schedule"]
    prefetch = s.get("prefetch") or []
    loads = s.get("loads")
    # The stage `loads=auto` adds to a rotated loop is not extra prefetch.
    rotated = 1 if loads and loads.get("rotated_by") else 0
    extra = min((p["extra"] - rotated for p in prefetch), default=None)
    return Loop(ii=int(s["ii_cycles"]), resource=int(record["bounds"]["resource_cycles"]),
                length=int(s["length_cycles"]), group=group, units=_units(record), extra_prefetch=extra,
                loads_last=(loads["placement"] == "last") if loads else None,
                load_slack=int(loads["lead_cycles"]) if loads else None, ctas=int(s.get("ctas", 1)))


def loops_of(report: Optional[dict]) -> List[Loop]:
    """The candidate loops, in program order, from twill's report
    (twill.schedule-report/1, docs/report-schema.md): twill's schedules,
    and for loops twill skipped (Triton schedules them) the pessimistic
    bound of no overlap, where the record gives it (a loop the solver found
    no schedule for)."""
    out = []
    for r in _records(report, "loops"):
        group = r.get("warp_specialize")
        if r["decision"] == "scheduled":
            out.append(_scheduled_loop(r, group))
        elif r.get("bounds"):
            seq = int(r["bounds"]["sequential_cycles"])
            out.append(Loop(ii=seq, resource=int(r["bounds"]["resource_cycles"]), length=seq, scheduled=False,
                            group=group, units=_units(r)))
    return out


def phases(loops: Sequence[Loop]) -> List[List[Loop]]:
    """Loops grouped into what one CTA runs one after the other: a loop on
    its own, or the loops of one ttg.warp_specialize together (adjacent in
    program order), which run concurrently."""
    out: List[List[Loop]] = []
    for lp in loops:
        if lp.group is not None and out and out[-1][0].group == lp.group:
            out[-1].append(lp)
        else:
            out.append([lp])
    return out


@dataclass
class Scored:
    """One candidate with its model numbers (cycles)."""
    candidate: dict
    scheduled: bool
    reason: str = ""
    loops: List[Loop] = field(default_factory=list)
    shared: int = 0
    regs: int = 0
    spill_bytes: int = 0
    ctas_per_sm: int = 0
    outside_cycles: int = 0
    cta_cycles: float = 0.0
    unit_cycles: float = 0.0
    time: float = math.inf
    # Operand panels the running CTAs share, bytes (0: not given), and how
    # far they exceed the L2: panels / l2_bytes - 1, 0 when they fit.
    panel_bytes: int = 0
    l2_excess: float = 0.0

    @property
    def extra_prefetch(self) -> int:
        """Extra stages of prefetch every streaming load of the kernel has
        (the fewest over its loops; 0 when a loop has none, or was skipped)."""
        depths = [lp.extra_prefetch if lp.scheduled else 0 for lp in self.loops
                  if lp.extra_prefetch is not None or not lp.scheduled]
        return min(depths, default=0)

    @property
    def loads_covered(self) -> bool:
        """Every reported streaming load of its scheduled loops is issued at
        least its modeled time ahead of its use, and a loop solved for N CTAs
        per SM (whose lead assumes the SM shared by N) gets them."""
        return all(lp.load_slack >= 0 and lp.ctas <= self.ctas_per_sm
                   for lp in self.loops if lp.scheduled and lp.load_slack is not None)

    @property
    def loads_last(self) -> bool:
        """Its scheduled loops with streaming loads (at least one) issue them
        last in the body."""
        flags = [lp.loads_last for lp in self.loops if lp.scheduled and lp.loads_last is not None]
        return bool(flags) and all(flags)

    def summary(self) -> str:
        if not self.scheduled:
            return f"not scheduled ({self.reason[:80]})"
        spills = f", {self.spill_bytes} B spilled" if self.spill_bytes else ""
        skipped = sum(1 for lp in self.loops if not lp.scheduled)
        spills += f", {skipped} loop(s) Triton's, bounded" if skipped else ""
        spills += f", prefetch +{self.extra_prefetch}" if self.extra_prefetch else ""
        if any(lp.load_slack is not None for lp in self.loops):
            flags = [lp.loads_last for lp in self.loops if lp.scheduled and lp.loads_last is not None]
            if self.loads_last:
                place = "last"
            elif any(flags):
                place = f"last in {sum(flags)} of {len(flags)} loops"
            else:
                place = "first"
            spills += f", loads {place}" + (
                "" if self.loads_covered else ", load latency exposed")
        if self.panel_bytes:
            spills += f", panels {self.panel_bytes / 2**20:.0f} MB" + (
                f" ({self.l2_excess:+.0%} over the L2)" if self.l2_excess > 0 else "")
        return (f"{self.ctas_per_sm} CTA/SM (smem {self.shared // 1024} KB, {self.regs} regs{spills}), "
                f"CTA {self.cta_cycles:.0f} cycles, units {self.unit_cycles:.0f}, model {self.time:.3g} cycles")


def score(candidate: dict, kernel, decision, iterations: Sequence[float], grid: int, occ: Occupancy,
          panels: Optional[Callable[[dict, int], int]] = None) -> Scored:
    """Modeled time of one compiled candidate (see the module doc);
    `panels(candidate, running CTAs)` gives the operand bytes the running
    CTAs share."""
    s = Scored(candidate=candidate, scheduled=bool(decision.scheduled), reason=decision.reason)
    loops = loops_of(decision.report)
    runs = phases(loops)
    if not decision.scheduled or len(runs) != len(iterations):
        s.scheduled = False
        s.reason = s.reason or f"{len(runs)} loop phases for {len(iterations)} iteration counts"
        return s
    s.loops = loops
    s.shared = int(kernel.metadata.shared)
    s.regs, s.spill_bytes = cubin_resources(kernel.asm["cubin"])
    s.ctas_per_sm = occ.ctas(s.shared, s.regs, int(kernel.metadata.num_warps))
    if s.ctas_per_sm == 0:
        s.reason = "does not fit on an SM"
        return s
    s.outside_cycles = outside_cycles(decision.report)
    s.cta_cycles = float(s.outside_cycles)
    s.unit_cycles = 0.0
    for run, n in zip(runs, iterations):
        alone = max(loop_alone_cycles(n, lp.ii, lp.length) for lp in run)
        units = n * phase_unit_cycles(run)
        s.cta_cycles += max(alone, units)
        s.unit_cycles += units
    s.time = grid_cycles(grid, occ.sms, s.ctas_per_sm, s.cta_cycles, s.unit_cycles)
    if panels is not None:
        s.panel_bytes = int(panels(candidate, min(grid, occ.sms * s.ctas_per_sm)))
        if occ.l2_bytes:
            s.l2_excess = max(0.0, s.panel_bytes / occ.l2_bytes - 1.0)
    return s


def loop_alone_cycles(iterations: int, ii: float, length: float) -> float:
    """Cycles of `iterations` iterations of a loop whose CTA has the SM to
    itself: one every I, the last taking L."""
    return max(iterations - 1, 0) * ii + (length if iterations > 0 else 0)


def phase_unit_cycles(run: Sequence[Loop]) -> float:
    """Cycles per iteration of a phase on the SM's busiest unit: the loops'
    raw per-unit cycles added up unit by unit (partitions share the units),
    or, where a record gives no per-unit cycles, the sum of the loops'
    busiest-unit cycles (pessimistic across units)."""
    if all(lp.units for lp in run):
        total: Dict[str, int] = {}
        for lp in run:
            for u, c in lp.units.items():
                total[u] = total.get(u, 0) + c
        return float(max(total.values()))
    return float(sum(lp.resource for lp in run))


def grid_cycles(grid: int, sms: int, ctas_per_sm: int, cta_cycles: float, unit_cycles: float) -> float:
    """Cycles for `grid` CTAs on `sms` SMs that hold `ctas_per_sm` each: full
    waves of c CTAs per SM take max(T, c * S), a last partial wave with k
    CTAs on its busiest SM max(T, k * S)."""
    c = ctas_per_sm
    full, rest = divmod(grid, sms * c)
    time = full * max(cta_cycles, c * unit_cycles)
    if rest:
        time += max(cta_cycles, math.ceil(rest / sms) * unit_cycles)
    return time


@dataclass
class Compiled:
    """One candidate compiled with twill (kernel and decision), or why not."""
    candidate: dict
    kernel: object = None
    decision: object = None
    error: str = ""


def compile_candidates(candidates: Sequence[dict], compile_with_twill: Callable) -> List[Compiled]:
    """Compiles every candidate with `compile_with_twill(candidate)`, which
    returns (compiled kernel, twill decision); a candidate Triton cannot
    compile keeps the error."""
    out = []
    for cand in candidates:
        try:
            k, d = compile_with_twill(cand)
            out.append(Compiled(cand, k, d))
        except Exception as e:
            out.append(Compiled(cand, error=f"{type(e).__name__}: {e}"[:300]))
    return out


def rank(compiled: Sequence[Compiled], iterations: Callable, grid: Callable, machine: str = "h100",
         panels: Optional[Callable[[dict, int], int]] = None) -> List[Scored]:
    """Ranks compiled candidates, best first, by modeled time for one
    problem: `iterations(candidate)` gives the iteration count of each
    scheduled loop of one CTA (program order), `grid(candidate)` the CTAs
    launched, `panels(candidate, running)` (optional) the operand bytes that
    `running` concurrently running CTAs share. Candidates twill did not
    schedule, that failed to compile or that do not fit on an SM rank last,
    with the reason."""
    occ = machine_occupancy(machine)
    scored = []
    for c in compiled:
        if c.kernel is None:
            scored.append(Scored(candidate=c.candidate, scheduled=False, reason=c.error))
        else:
            scored.append(score(c.candidate, c.kernel, c.decision, iterations(c.candidate), grid(c.candidate), occ,
                                panels))
    return ordered(scored)


def ordered(scored: Sequence[Scored]) -> List[Scored]:
    """Best first: candidates with a modeled time before those without (not
    scheduled, not compiled, not fitting on an SM); among them, kernels that
    spill more than SPILL_TOLERANCE last; then those whose running CTAs'
    panels exceed the L2, the smaller excess (in L2_EXCESS_STEP steps)
    first; then by modeled time,
    except that among the candidates within MODEL_TOLERANCE of the best (of
    those that do not spill, at the fewest excess steps), more CTAs per SM
    come first, then those whose loads cover their modeled time, then the
    modeled time, then fewer spilled bytes (candidates the model cannot
    tell apart, such as the two rotations of `loads=auto`, differ in what
    ptxas makes of them); ties keep the candidates' order."""
    def usable(s):
        return s.scheduled and not math.isinf(s.time)

    def steps(s):
        # Whole steps of L2_EXCESS_STEP over the L2 (0: the panels fit).
        return math.ceil(s.l2_excess / L2_EXCESS_STEP - 1e-9) if s.l2_excess > 0 else 0

    clean = [s for s in scored if usable(s) and s.spill_bytes <= SPILL_TOLERANCE]
    least = min((steps(s) for s in clean), default=0)
    best = min((s.time for s in clean if steps(s) == least), default=math.inf)

    def key(i):
        s = scored[i]
        near = (usable(s) and s.spill_bytes <= SPILL_TOLERANCE and steps(s) == least
                and s.time <= best * (1 + MODEL_TOLERANCE))
        return (not usable(s), s.spill_bytes > SPILL_TOLERANCE, steps(s), not near,
                -s.ctas_per_sm if near else 0, near and not s.loads_covered, s.time, s.spill_bytes, i)

    return [scored[i] for i in sorted(range(len(scored)), key=key)]


def choose(candidates: Sequence[dict], compile_with_twill: Callable, iterations: Callable, grid: Callable,
           machine: str = "h100", panels: Optional[Callable[[dict, int], int]] = None) -> List[Scored]:
    """`rank(compile_candidates(...))`: every candidate compiled with twill
    and ranked by modeled time, best first."""
    return rank(compile_candidates(candidates, compile_with_twill), iterations, grid, machine, panels)
