"""Compile tests of twill in a pip-installed Triton, on the CPU.

Every kernel and configuration of the fixtures in kernels/ (KERNELS) is compiled to
cubin for cuda:90 and cuda:100 with an explicit target (ptxas ships in the
Triton wheel), with twill on and off.
EXPECTED says, per kernel and target, what twill does with each loop
(scheduled, or skipped and why), so that a change either way fails the
test. Where twill scheduled, the test reads twill's own output (the module
it handed back to Triton, kept by TWILL_DUMP_DIR) and checks that the final
TTGIR carries its decisions: the shared-memory buffer count Triton derives
from each load's stages and clusters (LowerLoops' getDefUseStageDiff: stage
gap, +1 when the first use is in a later cluster, +1 for an MMA operand:
wgmma or tcgen05), and warp specialization where the loop asked for it. The
fallback path is checked with a pass option twill refuses.

Needs twill-opt (TWILL_OPT, or target/release/twill-opt of this checkout).
"""

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

triton = pytest.importorskip("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402

import twill_triton  # noqa: E402
from kernels import fa_bwd, fa_fwd, grouped_matmul, load, matmul, persistent_matmul  # noqa: E402
from twill_triton import hook  # noqa: E402

test_kernels = load("twill_compile_test_kernels", REPO / "test" / "Inputs" / "triton36" / "test_kernels.py")

TWILL_OPT = os.environ.get("TWILL_OPT") or str(REPO / "target" / "release" / "twill-opt")


def _fa(cap):
    cfg = dict(fa_fwd.DEFAULT_CONFIGS[cap])
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages", "maxnreg") if k in cfg}
    return fa_fwd.make_ast_source(**cfg), opts


def _gemm(cap):
    cfg = dict(matmul.DEFAULT_CONFIG)
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages")}
    return matmul.make_ast_source(**cfg), opts


def _loop_with_if(cap):
    cfg = dict(test_kernels.LOOP_WITH_IF_CONFIG)
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages")}
    return test_kernels.make_ast_source(**cfg), opts


def _persistent(name):
    """A persistent GEMM of kernels/persistent_matmul.py: one loop over
    (tile, k) steps with the tile's set-up and epilogue under scf.ifs."""

    def compile_args(cap):
        return persistent_matmul.ast_source(name)

    return compile_args


def _config(module, name):
    """Compile arguments of configuration `name` of a kernels/ module
    (its CONFIGS[name][cap] and make_ast_source)."""

    def compile_args(cap):
        kwargs, opts = module.split_config(module.CONFIGS[name][cap])
        return module.make_ast_source(**kwargs), opts

    return compile_args


def _bwd_preprocess(name):
    """fa_bwd's preprocess kernel (one configuration for every target)."""

    def compile_args(cap):
        kwargs, opts = fa_bwd.split_config(fa_bwd.PREPROCESS_CONFIGS[name])
        return fa_bwd.make_preprocess_ast_source(**kwargs), opts

    return compile_args


KERNELS = {
    "fa_fwd": _fa,
    "matmul": _gemm,
    "fa_fwd_causal": _config(fa_fwd, "causal"),
    "fa_fwd_hd64": _config(fa_fwd, "hd64"),
    "fa_fwd_subtile": _config(fa_fwd, "subtile"),
    "fa_fwd_causal_subtile": _config(fa_fwd, "causal_subtile"),
    "fa_bwd_hd128": _config(fa_bwd, "hd128"),
    "fa_bwd_hd64": _config(fa_bwd, "hd64"),
    "fa_bwd_preprocess_hd128": _bwd_preprocess("hd128"),
    "fa_bwd_preprocess_hd64": _bwd_preprocess("hd64"),
    "persistent_tma": _persistent("tma"),
    "persistent_pointer": _persistent("pointer"),
    "grouped_matmul": lambda cap: grouped_matmul.ast_source(),
}

# What twill does with each candidate loop of a kernel, in program order:
# SCHEDULED, or a substring of the remark with which it skipped the loop
# (the kernel then gets Triton's own schedule).  [] means the kernel has no
# loop, and twill_triton records NO_LOOP.
SCHEDULED = "twill: scheduled"
NO_SCHEDULE = "twill: skipped loop: no schedule: "
TIMED_OUT = NO_SCHEDULE + "timed out before finding a schedule"
NO_LOOP = "no candidate loop"

_V36 = triton.__version__.startswith("3.6")
# The persistent GEMMs have two loops: the store of zero tiles Triton makes
# for K = 0, and the fused (tile, k) loop with its scf.ifs.
_LOOPS = {"fa_fwd": 1, "matmul": 1, "fa_fwd_causal": 2, "fa_fwd_hd64": 1, "fa_fwd_subtile": 1,
          "fa_fwd_causal_subtile": 2, "fa_bwd_hd128": 2, "fa_bwd_hd64": 2, "persistent_tma": 2,
          "persistent_pointer": 2, "grouped_matmul": 1}
EXPECTED = {(kernel, cap): [SCHEDULED] * n for kernel, n in _LOOPS.items() for cap in (90, 100)}
SAME = "twill: skipped loop: twill's schedule (I="
EXPECTED.update({
    # Within the kernel's num_stages (3) the sm100 GEMM's best schedule is
    # Triton's own assignment (loads in stage 0 after their tcgen05 reader,
    # the rest in stage 2): reported as such, the loop left to Triton.
    ("matmul", 100): [SAME],
    # The backward's dQ loop is Triton's own assignment at num_stages 3
    # (hd64) and 2 (hd128) on sm90; its dK/dV loop is twill's.
    ("fa_bwd_hd64", 90): [SCHEDULED, SAME],
    ("fa_bwd_hd128", 90): [SCHEDULED, SAME],
    # Within num_stages=2 on sm100 no schedule exists (each load feeding a
    # tcgen05 MMA, placed after it, takes a stage of its own on top of its
    # prefetch); Triton's own schedule of each loop takes 3 stages, and
    # within those twill schedules both.
})
# Triton 3.9: the causal forward's diagonal loop has no schedule under
# Triton's partition rules, so it is solved without them (stages only),
# within num_stages=3 counting the stage its loads feeding tcgen05 MMAs take
# after them.
# The grouped GEMM's K loop is nested in a `while` over the program's tiles
# of a group, nested in the loop over groups: the outer loop is skipped, the
# K loop scheduled, and the verifier proves the pipeline nested in them.
NOT_INNERMOST = "twill: skipped loop: not an innermost loop (it contains an scf.for)"
EXPECTED.update({("grouped_matmul", cap): [NOT_INNERMOST, SCHEDULED] for cap in (90, 100)})
EXPECTED.update({
    # No loop at all.
    ("fa_bwd_preprocess_hd128", 90): [],
    ("fa_bwd_preprocess_hd128", 100): [],
    ("fa_bwd_preprocess_hd64", 90): [],
    ("fa_bwd_preprocess_hd64", 100): [],
})
# How each warp-specialized loop of a kernel is partitioned on cuda:100, in
# program order: twill's own partitions (TWILL_PARTS, checked op by op in the
# final TTGIR), or Triton's around twill's stages with the reason.
TWILL_PARTS = "twill's partitions"
# The pipeline verifier does not prove the warp-specialized code Triton
# builds from twill's partitions (on sm100 it does not model tcgen05 MMAs;
# Triton's Hopper partitions wait on phases it does not model): a kernel
# twill scheduled into partitions falls back, with the verifier's reason.
VERIFIER_WS = "the pipeline verifier did not prove"
VERIFIER_WS_WHY = ": not verified: "
NOT_BUILDABLE = "partitions left to Triton (no schedule under Triton's partition rules within "
SEVERAL_36 = "partitions left to Triton (Triton before 3.7 lowers several warp-specialized loops"
PARTITIONS = {
    "fa_fwd": [TWILL_PARTS],
    "fa_fwd_hd64": [TWILL_PARTS],
    "fa_fwd_subtile": [TWILL_PARTS],
    # The diagonal loop's masked softmax and the correction do not fit one
    # partition within the register limit (no colocated schedule found within
    # the 10 s cap; every I the search reaches is refuted), and Triton (which
    # clones cheap ops into its correction partition) builds nothing else
    # from per-op ids.
    "fa_fwd_causal": [SEVERAL_36] * 2 if _V36 else [TWILL_PARTS, NOT_BUILDABLE],
    "fa_fwd_causal_subtile": [SEVERAL_36] * 2 if _V36 else [TWILL_PARTS, NOT_BUILDABLE],
}

# Where twill writes warp partitions (the FA forward kernels on cuda:100),
# Triton builds warp-specialized code, which the pipeline verifier does not
# cover yet: those kernels get Triton's own schedule.
UNVERIFIED_WS = {(k, 100) for k in PARTITIONS}

# twill's time limit (seconds per loop) for the kernels expected to fall
# back, to keep the test short; the expectations above hold for these limits.
TIMEOUTS = {key: 2 for key, loops in EXPECTED.items() if loops and SCHEDULED not in loops}


@pytest.fixture
def twill(tmp_path, monkeypatch):
    """twill enabled with a dump directory and a private Triton cache."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    dump = tmp_path / "dump"


    def on(**kw):
        kw.setdefault("scope", "all")
        # Solve the loops Triton warp-specializes on sm100 too (the hook's
        # default leaves them to Triton unsolved:
        # test_unverifiable_loops_are_left_to_triton_unsolved), so that the
        # expectations below cover their schedules and fallbacks.
        kw.setdefault("unverifiable", "schedule")
        kw.setdefault("dump_dir", str(dump))
        twill_triton.enable(twill_opt=TWILL_OPT, **kw)
        return dump

    yield on
    twill_triton.disable()


def _compile(make, cap):
    src, opts = make(cap)
    return triton.compile(src, target=GPUTarget("cuda", cap, 32), options=opts)


_OP = re.compile(r'^\s*(%[\w#:]+) = "(tt\.descriptor_load|ttg\.local_alloc)"\((%[\w#]+)?')
_ATTRS = re.compile(r"loop\.cluster = (\d+) : i32, loop\.stage = (\d+) : i32")


def _solved_buffers(scheduled, cap, last_may_reuse=False):
    """Buffer count of every pipelined load of twill's module, by Triton's
    rule (LowerLoops' getDefUseStageDiff and its extra buffers), in load
    order. Measured on 3.6.0 and 3.9.0: on sm90 a use in a later cluster and
    a wgmma operand add one buffer each; on sm100 either adds one (a
    tcgen05 operand in a later cluster still gets one). With
    `last_may_reuse` (sm100), a load issued after its use in the body (an
    earlier cluster) counts no extra buffer: Triton copies into the slot
    just read when the tcgen05 MMA reading it was waited for in the same
    iteration (the backward's V in its dQ loop, measured on 3.6.0)."""
    loads, allocs = {}, {}
    for line in scheduled.splitlines():
        m = _OP.match(line)
        a = _ATTRS.search(line)
        if not m or not a:
            continue
        name, op, operand = m.group(1), m.group(2), m.group(3)
        cluster, stage = int(a.group(1)), int(a.group(2))
        if op == "tt.descriptor_load":
            loads[name] = (stage, cluster)
        elif operand in loads:
            allocs[operand] = (stage, cluster)
    out = []
    for name, (s, c) in loads.items():
        us, uc = allocs[name]
        gap = us - s
        if gap > 0:
            later = 1 if uc > c else 0
            reuse = last_may_reuse and cap != 90 and uc < c
            out.append(gap + later + 1 if cap == 90 else gap + (0 if reuse else 1))
    return sorted(out)


def _final_buffers(ttgir, tile):
    """Leading dimension of every multi-buffered shared-memory tile `tile`
    (e.g. '128x128xf16') allocated in the final TTGIR."""
    return sorted(int(n) for n in re.findall(r"ttg\.local_alloc.*-> !ttg\.memdesc<(\d+)x" + tile, ttgir))


def _final_buffers_any(ttgir):
    """Leading dimension of every multi-buffered fp16 shared-memory tile of
    any shape allocated in the final TTGIR."""
    return sorted(int(n) for n in re.findall(r"ttg\.local_alloc.*-> !ttg\.memdesc<(\d+)x\d+x\d+xf16", ttgir))


# twill op -> the op it becomes in the final TTGIR's partition regions.
_LOWERED = {"tt.descriptor_load": "ttng.async_tma_copy_global_to_local ", "ttng.tc_gen5_mma": "ttng.tc_gen5_mma ",
            "ttng.tmem_load": "ttng.tmem_load ", "ttng.tmem_store": "ttng.tmem_store "}
_PART = re.compile(r'"(tt\.descriptor_load|ttng\.tc_gen5_mma|ttng\.tmem_load|ttng\.tmem_store)".*'
                   r"ttg\.partition = array<i32: (\d+)>.*loc\((#loc\d*)\)\s*$", re.M)
_ALIAS = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$", re.M)


def _locations(text):
    """Location aliases of a printed module, resolved to full text (an op's
    source position through its call sites): what identifies an op from
    twill's module to Triton's final TTGIR."""
    raw = dict(_ALIAS.findall(text))
    ref = re.compile(r"#loc\d*\b")
    resolved = {}

    def resolve(name, depth=0):
        if name not in resolved:
            body = raw.get(name, name)
            resolved[name] = body if depth > 50 else ref.sub(lambda m: resolve(m.group(0), depth + 1), body)
        return resolved[name]

    return {name: resolve(name) for name in raw}


def _solved_partitions(scheduled):
    """Per loop of twill's module (program order): (lowered op, location,
    twill's partition) of every MMA, TMA load and tensor-memory access."""
    locs = _locations(scheduled)
    loops = []
    for chunk in scheduled.split('"scf.for"')[1:]:
        ops = [(_LOWERED[m.group(1)], locs.get(m.group(3), m.group(3)), int(m.group(2)))
               for m in _PART.finditer(chunk)]
        if ops:
            loops.append(ops)
    return loops


def _ws_regions(ttgir):
    """Per ttg.warp_specialize op of the final TTGIR (program order): its
    regions' lines, keyed 0 for the default region and k for the region
    `partition{k-1}`."""
    lines = ttgir.splitlines()
    out = []
    for i, line in enumerate(lines):
        if "ttg.warp_specialize(" not in line:
            continue
        indent = line[:len(line) - len(line.lstrip())]
        regions, current = {}, None
        for body in lines[i + 1:]:
            if body.startswith(indent + "} : ("):
                break
            head = body[len(indent):] if body.startswith(indent) else body
            if head.startswith("default {"):
                current = 0
                regions[current] = []
            elif re.match(r"partition\d+\(", head):
                current = int(re.match(r"partition(\d+)", head).group(1)) + 1
                regions[current] = []
            elif current is not None:
                regions[current].append(body)
        out.append(regions)
    return out


def _check_partitions(kernel, d, scheduled, ttgir):
    """The final TTGIR is warp-specialized as twill solved it, loop by loop:
    every MMA, TMA load and tensor-memory access (identified by op and source
    location) sits in the region of the partition twill gave it."""
    records = [lp for lp in d.loop_records() if lp["decision"] == "scheduled"]
    want = PARTITIONS[kernel]
    assert len(records) == len(want), d.remarks
    regions = _ws_regions(ttgir)
    assert len(regions) == len(want), (len(regions), d.remarks)
    final_locs = _locations(ttgir)
    at = re.compile(r"loc\((#loc\d*)\)\s*$")
    solved = iter(_solved_partitions(scheduled))
    for record, expect, ws in zip(records, want, regions):
        partitions = record["schedule"]["partitions"]
        if expect != TWILL_PARTS:
            assert expect in partitions["text"], (expect, partitions)
            continue
        assert partitions["code"] == "written", partitions
        assert len(ws) == partitions["count"], (sorted(ws), partitions)
        # Twill's partitions map one-to-one onto the regions (Triton may
        # number them differently: 3.9 renumbers).
        region_of = {}
        ops = next(solved)
        assert ops
        for op, loc, p in ops:
            # Triton gives a TMA copy the location of its shared-memory
            # buffer's user, not of the load: loads are matched by op only
            # (twill keeps every load in its one variable-latency partition).
            if op == _LOWERED["tt.descriptor_load"]:
                loc = None
            holding = set()
            for k, body in ws.items():
                for line in body:
                    m = at.search(line)
                    if op in line and (loc is None or m and final_locs.get(m.group(1), m.group(1)) == loc):
                        holding.add(k)
            assert len(holding) == 1, (op, loc, p, holding)
            (k,) = holding
            assert region_of.setdefault(p, k) == k, (op, loc, p, region_of)
        assert len(set(region_of.values())) == len(region_of), region_of


def _loop_body(ttgir):
    """The text of the final TTGIR from the first scf.for on, without
    locations and SSA names (what a schedule changes)."""
    body = ttgir[ttgir.index("scf.for"):] if "scf.for" in ttgir else ttgir
    body = re.sub(r"loc\([^)]*\)", "", body)
    # Attribute dictionaries too: only the ops and their order remain.
    body = re.sub(r"\{[^{}\n]*\}", "", body)
    return re.sub(r"%[\w#:]+", "%v", body)


@pytest.mark.parametrize("cap", [90, 100])
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_twill_off_compiles_and_differs(tmp_path, monkeypatch, kernel, cap):
    """Every kernel also compiles with twill off (stock Triton), to a real
    kernel; where twill schedules a loop, its final TTGIR is not Triton's,
    except where twill's schedule is Triton's own (SAME_AS_TRITON)."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "stock"))
    assert not twill_triton.is_enabled()
    stock = _compile(KERNELS[kernel], cap)
    assert len(stock.asm["cubin"]) > 0 and "trap;" not in stock.asm["ptx"]
    if SCHEDULED not in EXPECTED[(kernel, cap)]:
        return
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "twill"))
    twill_triton.enable(twill_opt=TWILL_OPT, scope="all", unverifiable="schedule")
    try:
        ours = _compile(KERNELS[kernel], cap)
    finally:
        twill_triton.disable()
    if (kernel, cap) in UNVERIFIED_WS:
        d = twill_triton.decisions()[-1]
        assert not d.scheduled and VERIFIER_WS in d.reason and VERIFIER_WS_WHY in d.reason, d.reason
        assert _loop_body(ours.asm["ttgir"]) == _loop_body(stock.asm["ttgir"])
        return
    assert twill_triton.decisions()[-1].scheduled
    if (kernel, cap) in SAME_AS_TRITON:
        assert _loop_body(ours.asm["ttgir"]) == _loop_body(stock.asm["ttgir"])
    else:
        assert _loop_body(ours.asm["ttgir"]) != _loop_body(stock.asm["ttgir"])


# Where the final TTGIR of twill's kernel is stock Triton's: the backward on
# sm90 at its num_stages (hd64: 3, hd128: 2). Its dQ loop is Triton's own
# assignment (a `same_as_triton` skip, left to Triton); its dK/dV loop, which
# mixes descriptor and pointer loads, is twill's (`loads=auto` rotates it: the
# loads last, as Triton places them), and Triton's pipeliner emits the same
# loop from it (measured on the H100 at hd64: the same instructions).
SAME_AS_TRITON = {("fa_bwd_hd64", 90), ("fa_bwd_hd128", 90)}


def test_expectations_cover_every_kernel():
    assert set(EXPECTED) == {(kernel, cap) for kernel in KERNELS for cap in (90, 100)}
    assert all(isinstance(v, list) for v in EXPECTED.values())


@pytest.mark.parametrize("cap", [90, 100])
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_twill_schedule_reaches_cubin(twill, kernel, cap):
    expected = EXPECTED[(kernel, cap)]
    timeout = TIMEOUTS.get((kernel, cap))
    dump = twill(**({"timeout": timeout} if timeout else {}))
    before = len(twill_triton.decisions())
    k = _compile(KERNELS[kernel], cap)
    assert len(k.asm["cubin"]) > 0
    # A real kernel, not one that LLVM reduced to a trap (Triton 3.9 emits
    # one, without an error, for a kernel that needs more tensor memory than
    # the SM has).
    assert "trap;" not in k.asm["ptx"]
    # One decision, for this compilation.
    new = twill_triton.decisions()[before:]
    assert len(new) == 1, new
    d = new[0]
    assert d.capability == cap
    outcomes = [r for r in d.remarks if SCHEDULED in r or "twill: skipped" in r]
    assert len(outcomes) == len(expected), d.remarks
    for remark, want in zip(outcomes, expected):
        assert want in remark, (want, remark)
    if SCHEDULED not in expected:
        # Fallback to Triton's schedule, with the reason recorded.
        assert not d.scheduled
        for want in expected or [NO_LOOP]:
            assert want.replace("twill: skipped loop: ", "") in d.reason, (want, d.reason)
        return
    if (kernel, cap) in UNVERIFIED_WS:
        # twill scheduled (the remarks above), Triton warp-specialized its
        # schedule, and the verifier did not prove that code: Triton's own
        # schedule, with the reason.
        assert not d.scheduled and VERIFIER_WS in d.reason and VERIFIER_WS_WHY in d.reason, d.reason
        return
    assert d.scheduled, d.reason
    scheduled = (Path(d.dump) / "scheduled.mlir").read_text()
    # twill's attributes are on the module Triton continued with.
    assert "tt.scheduled_max_stage" in scheduled and "loop.stage" in scheduled
    ttgir = k.asm["ttgir"]
    if cap == 100 and kernel.startswith("fa_fwd"):
        # Warp-specialized: buffers between partitions follow num_stages;
        # the partitions are twill's where it wrote them.
        _check_partitions(kernel, d, scheduled, ttgir)
    elif kernel in ("persistent_pointer", "grouped_matmul"):
        # Pointer loads: their buffers are not derived here (no descriptor
        # load), the hook's pipeline verifier proved the ring (the grouped
        # GEMM's nested in the loops over groups and tiles).
        assert "ttg.async_copy_global_to_local" in ttgir
        assert "scf.if" in scheduled if kernel == "persistent_pointer" else "scf.while" in ttgir
    else:
        solved = _solved_buffers(scheduled, cap)
        assert solved, scheduled
        if kernel in ("fa_fwd", "matmul", "persistent_tma"):
            final = _final_buffers(ttgir, "128x128xf16" if kernel == "fa_fwd" else "128x64xf16")
        else:
            final = _final_buffers_any(ttgir)
        # Between the fewest buffers Triton may give (a slot reused) and the
        # most, load by load.
        fewest = _solved_buffers(scheduled, cap, last_may_reuse=True)
        assert len(final) == len(solved) and all(lo <= n <= hi for lo, n, hi in zip(fewest, final, solved)), (
            final, fewest, solved)
    assert dump.exists()


def _first(ttgir, needle):
    loop = ttgir[ttgir.index("scf.for"):]
    return loop.index(needle) if needle in loop else len(loop)


def test_fa_sm90_loads_lead_the_loop_body(tmp_path, monkeypatch, twill):
    """On Hopper FA forward twill issues the K and V copies at the start of
    the steady-state body, one iteration ahead (the lead time its schedule
    assumes); Triton's default issues them at the end, two iterations ahead.
    Both need three buffers per tile."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "stock"))
    stock = _compile(_fa, 90).asm["ttgir"]
    twill()
    ours = _compile(_fa, 90).asm["ttgir"]
    copy, mma = "async_tma_copy_global_to_local", "ttng.warp_group_dot "
    assert _first(stock, copy) > _first(stock, mma)
    assert _first(ours, copy) < _first(ours, mma)
    assert _final_buffers(stock, "128x128xf16") == _final_buffers(ours, "128x128xf16") == [3, 3]


def _fa_hopper_ws(cap):
    """FA forward that Triton's Hopper warp specialization splits (device-side
    descriptors, warp_specialize at 4 warps)."""
    src = fa_fwd.make_ast_source(HEAD_DIM=128, BLOCK_M=128, BLOCK_N=128, WARP_SPECIALIZE=True, DEVICE_DESC=True)
    return src, dict(num_warps=4, num_stages=2)


def test_loops_triton_warp_specialized_before_twill(twill):
    """On sm90 Triton's Hopper warp specialization runs before twill's step
    and splits the marked loop into one loop per partition (a producer and
    two consumers), none marked. scope=ws says so for each and leaves them
    to Triton; scope=all schedules each. Either way every remark carries the
    partitions' common tag, which twill_triton.configure reads as one
    concurrent phase."""
    twill(scope="ws")
    k = _compile(_fa_hopper_ws, 90)
    assert "ttg.warp_specialize" in k.asm["ttgir"]
    d = twill_triton.decisions()[-1]
    loops = d.loop_records()
    assert not d.scheduled and len(loops) == 3
    assert all(lp["reason"] == "not_extracted" and "inside a ttg.warp_specialize partition" in lp["text"]
               and lp["warp_specialize"] == 0 for lp in loops), d.remarks
    # The remark carries the partitions' tag too (rendered from the record).
    assert all(r.splitlines()[0].endswith("[warp_specialize #0]") for r in d.remarks if "skipped" in r), d.remarks
    twill_triton.disable()
    twill(scope="all")
    k = _compile(_fa_hopper_ws, 90)
    d = twill_triton.decisions()[-1]
    assert [lp["decision"] for lp in d.loop_records()] == ["scheduled"] * 3, d.remarks
    # twill schedules the three partition loops, but the pipeline verifier
    # does not prove the partitions Triton's Hopper warp specialization
    # builds (it waits on phases the verifier does not model): Triton's own
    # schedule.
    assert not d.scheduled and VERIFIER_WS in d.reason and VERIFIER_WS_WHY in d.reason, d.reason
    from twill_triton import configure
    loops = configure.loops_of(d.report)
    assert [lp.group for lp in loops] == [0, 0, 0]
    assert len(configure.phases(loops)) == 1


def _loop_bodies(ttgir):
    """Top-level scf.for bodies of a TTGIR module, SSA names and locations
    left out (they differ between compilations)."""
    out = []
    for body in ttgir.split("scf.for")[1:]:
        body = body[:body.find("scf.yield")]
        out.append(re.sub(r"loc\(#loc\d*\)|%[\w#]+", "", body))
    return out


def _fa_causal_bn64(cap):
    src = fa_fwd.make_ast_source(HEAD_DIM=128, BLOCK_M=128, BLOCK_N=64, WARP_SPECIALIZE=False, CAUSAL=True)
    return src, dict(num_warps=4, num_stages=2)


def test_a_loop_twill_skips_gets_tritons_schedule(tmp_path, monkeypatch, twill):
    """The causal forward at BLOCK_N 64 / 4 warps: twill schedules the
    off-diagonal loop and finds no schedule for the diagonal one within the
    register limit. Triton's scheduling passes then run before twill's
    attributes replace theirs, so the diagonal loop is pipelined exactly as
    stock Triton pipelines it (it used to reach the pipeliner with no
    schedule at all)."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "stock"))
    stock = _loop_bodies(_compile(_fa_causal_bn64, 90).asm["ttgir"])
    twill()
    k = _compile(_fa_causal_bn64, 90)
    d = twill_triton.decisions()[-1]
    assert d.scheduled and hook.leaves_loops_to_triton(d.report), d.remarks
    ours = _loop_bodies(k.asm["ttgir"])
    assert len(ours) == len(stock) == 2
    assert ours[1] == stock[1]
    assert "twill: scheduled" in d.remarks[0] and "twill: skipped loop" in d.remarks[1]
    scheduled = (Path(d.dump) / "scheduled.mlir").read_text()
    assert scheduled.count("tt.scheduled_max_stage") == 2


def test_twills_schedule_that_is_tritons_own_is_reported_as_such(tmp_path, monkeypatch, twill):
    """The same kernel with the loads last: twill's schedule of the
    off-diagonal loop is Triton's own assignment at the kernel's num_stages
    (loads in stage 0 after their readers, the rest in the last stage), so
    it is reported `same_as_triton` and left to Triton, not called twill's;
    the kernel is stock Triton's."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "stock"))
    stock = _loop_bodies(_compile(_fa_causal_bn64, 90).asm["ttgir"])
    twill(extra_options="loads=last")
    k = _compile(_fa_causal_bn64, 90)
    d = twill_triton.decisions()[-1]
    assert not d.scheduled
    assert [r["reason"] for r in d.report["loops"]] == ["same_as_triton", "no_schedule"], d.remarks
    assert "is Triton's own assignment at num_stages=" in d.remarks[0]
    assert _loop_bodies(k.asm["ttgir"]) == stock


def test_loop_with_if_is_scheduled(twill):
    """A loop whose scf.if guards a load and a wgmma: the if is one node,
    staged as one op, and the kernel reaches cubin with twill's schedule."""
    twill()
    k = _compile(_loop_with_if, 90)
    assert len(k.asm["cubin"]) > 0 and "trap;" not in k.asm["ptx"]
    d = twill_triton.decisions()[-1]
    assert d.scheduled, d.reason
    (record, ) = d.loop_records()
    assert record["decision"] == "scheduled", record
    scheduled = (Path(d.dump) / "scheduled.mlir").read_text()
    assert re.search(r"\}\) \{loop\.cluster = \d+ : i32, loop\.stage = \d+ : i32\} : \(i1\)", scheduled)


def test_fallback_names_the_reason(twill, caplog, monkeypatch):
    """A kernel twill cannot take (here: a bad pass option) compiles with
    Triton's own schedule, one warning, and the reason recorded."""
    monkeypatch.setenv("TWILL_OPTIONS", "objective=fastest")
    twill()
    with caplog.at_level(logging.WARNING, logger="twill"):
        k = _compile(_loop_with_if, 90)
    assert len(k.asm["cubin"]) > 0
    d = twill_triton.decisions()[-1]
    assert not d.scheduled
    assert "unknown objective `fastest`" in d.reason
    warnings = [r for r in caplog.records if r.name == "twill"]
    assert len(warnings) == 1 and "uses Triton's own schedule" in warnings[0].getMessage()


def test_twill_options_env_reaches_the_pass(tmp_path, monkeypatch):
    """TWILL_OPTIONS passes pass options without a code change (the
    TRITON_TWILL=1 route): the remark shows the objective it asked for, and
    a bad option falls back to Triton's schedule with the pass's reason."""
    monkeypatch.setenv("TWILL_OPTIONS", "objective=slack")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "slack"))
    try:
        twill_triton.enable(twill_opt=TWILL_OPT, scope="all")
        _compile(_gemm, 90)
        d = twill_triton.decisions()[-1]
        assert d.scheduled, d.reason
        assert "[objective slack: no two asynchronous ops joined by dependences" in d.remarks[0], d.remarks
        monkeypatch.setenv("TWILL_OPTIONS", "objective=fastest")
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "bad"))
        twill_triton.enable(twill_opt=TWILL_OPT, scope="all")
        _compile(_gemm, 90)
        d = twill_triton.decisions()[-1]
        assert not d.scheduled and "unknown objective `fastest`" in d.reason, d.reason
    finally:
        twill_triton.disable()


def test_strict_mode_raises(twill, monkeypatch):
    monkeypatch.setenv("TWILL_OPTIONS", "objective=fastest")
    twill(strict=True)
    with pytest.raises(Exception, match="unknown objective"):
        _compile(_loop_with_if, 90)


def test_dump_reproduces_with_twill_opt(twill):
    twill()
    _compile(_gemm, 90)
    d = twill_triton.decisions()[-1]
    work = Path(d.dump)
    for f in ("input.mlir", "output.mlir", "scheduled.mlir", "command.txt", "remarks.txt"):
        assert (work / f).exists(), f
    r = subprocess.run(
        [TWILL_OPT, str(work / "input.mlir"), "--twill-schedule=arch=sm90 scope=all ties=twill", "--mlir-print-op-generic"],
        capture_output=True, text=True, check=True)
    assert "twill: scheduled" in r.stderr
    assert r.stdout.count("loop.stage") == (work / "output.mlir").read_text().count("loop.stage")


def test_enable_disable_and_cache_dir(tmp_path, monkeypatch):
    from triton import knobs

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "c"))
    before = knobs.cache.dir
    twill_triton.enable(twill_opt=TWILL_OPT)
    try:
        assert twill_triton.is_enabled()
        assert knobs.cache.dir.startswith(os.path.join(str(tmp_path / "c"), "twill"))
        assert knobs.runtime.add_stages_inspection_hook is not None
    finally:
        twill_triton.disable()
    assert not twill_triton.is_enabled()
    assert knobs.cache.dir == before
    assert knobs.runtime.add_stages_inspection_hook is None


def test_triton_twill_env_enables_at_startup(tmp_path):
    env = dict(os.environ, TRITON_TWILL="1", TWILL_OPT=TWILL_OPT, TRITON_CACHE_DIR=str(tmp_path))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "third_party" / "triton"), env.get("PYTHONPATH", "")])
    # What twill_triton.pth runs at startup in an installed environment.
    code = "import twill_triton.autoload, twill_triton; print(twill_triton.is_enabled())"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "True", r.stderr


def test_cache_key_protocol(monkeypatch):
    """Triton >= 3.7 calls the hook without arguments for a cache-key suffix:
    it must name twill and change with twill's options."""
    from triton import knobs

    try:
        twill_triton.enable(twill_opt=TWILL_OPT, timeout=10)
        k10, h10 = knobs.runtime.add_stages_inspection_hook()
        twill_triton.enable(twill_opt=TWILL_OPT, timeout=20)
        k20, h20 = knobs.runtime.add_stages_inspection_hook()
    finally:
        twill_triton.disable()
    assert k10.startswith("twill-") and k10 != k20 and h10 != h20
    # Stages only (TWILL_PARTITIONS=0) compiles differently: another key.
    monkeypatch.setenv("TWILL_PARTITIONS", "0")
    try:
        twill_triton.enable(twill_opt=TWILL_OPT, timeout=10)
        k10_stages, _ = knobs.runtime.add_stages_inspection_hook()
    finally:
        twill_triton.disable()
    assert k10_stages != k10
    # So do pass options given in the environment (TWILL_OPTIONS).
    monkeypatch.setenv("TWILL_OPTIONS", "objective=slack")
    try:
        twill_triton.enable(twill_opt=TWILL_OPT, timeout=10)
        k10_slack, _ = knobs.runtime.add_stages_inspection_hook()
    finally:
        twill_triton.disable()
    assert k10_slack not in (k10, k10_stages)


def test_replay_without_twill_opt(tmp_path, monkeypatch):
    """A machine without twill-opt (the GPU box) compiles with schedules
    recorded where twill-opt runs, matched by the replay key."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "c1"))
    twill_triton.enable(twill_opt=TWILL_OPT, dump_dir=str(tmp_path / "rec"))
    try:
        recorded = _compile(_fa, 90).asm["ttgir"]
    finally:
        twill_triton.disable()
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "c2"))
    monkeypatch.setenv("TWILL_REPLAY_DIR", str(tmp_path / "rec"))
    monkeypatch.setenv("TWILL_OPT", str(tmp_path / "no-such-binary"))
    twill_triton.enable(twill_opt=str(tmp_path / "no-such-binary"))
    try:
        replayed = _compile(_fa, 90).asm["ttgir"]
    finally:
        twill_triton.disable()
    d = twill_triton.decisions()[-1]
    assert d.scheduled, d.reason
    assert _final_buffers(replayed, "128x128xf16") == _final_buffers(recorded, "128x128xf16") == [3, 3]


def test_a_dump_made_from_the_cache_replays(tmp_path, monkeypatch):
    """A dump directory is whole whether twill-opt ran or the schedule
    cache answered (the verifier's records included), so a replay of a
    dump made on a warm machine compiles without twill-opt; a recorded
    answer that scheduled no loop replays as that answer (the kernel falls
    back with twill's own reason, not for want of a record)."""
    monkeypatch.setenv("TWILL_CACHE_DIR", str(tmp_path / "warm"))
    for n, rec in enumerate(("cold", "rec")):
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / f"c{n}"))
        twill_triton.enable(twill_opt=TWILL_OPT, dump_dir=str(tmp_path / rec), scope="all")
        try:
            _compile(_fa, 90)
            _compile(KERNELS["matmul"], 100)
        finally:
            twill_triton.disable()
    warm = twill_triton.decisions()[-2]
    assert warm.cached and warm.verify_cached, warm.reason
    assert list((tmp_path / "rec").rglob("verify.json")), "the warm dump lacks the verifier's records"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "c2"))
    monkeypatch.setenv("TWILL_REPLAY_DIR", str(tmp_path / "rec"))
    twill_triton.enable(twill_opt=str(tmp_path / "no-such-binary"), scope="all")
    try:
        _compile(_fa, 90)
        fa = twill_triton.decisions()[-1]
        _compile(KERNELS["matmul"], 100)
        gemm = twill_triton.decisions()[-1]
    finally:
        twill_triton.disable()
    assert fa.scheduled and all(r["verdict"] == "proved" for r in fa.verification), (fa.reason, fa.verification)
    assert not gemm.scheduled and "Triton's own assignment" in gemm.reason, gemm.reason


def test_replay_key_ignores_locations_and_names():
    from twill_triton.hook import replay_key

    a = '%0 = "tt.load"(%arg0) : (i32) -> i32 loc(#loc3)\n#loc3 = loc("/a/x.py":1:2)\n'
    b = '%x = "tt.load"(%y) : (i32) -> i32 loc("/elsewhere/x.py"(#loc))\n'
    c = '%0 = "tt.store"(%arg0) : (i32) -> i32\n'
    assert replay_key(a) == replay_key(b) != replay_key(c)
    # Other pass options, another schedule: another key.
    assert replay_key(a, "sm90 partitions=True loads=last") != replay_key(a, "sm90 partitions=True")


def test_strip_locations_keeps_names_and_strings():
    """The cache keys strip locations only: not a name ending in `loc`, not
    a user's string holding `loc(`; a location's own file name may hold
    parentheses."""
    from twill_triton.hook import _strip_locations, module_key

    assert _strip_locations('%0 = tt.call @alloc(%a) : i32 loc(#loc3)\n#loc3 = loc("/a(b).py":1:2)\n') == \
        "%0 = tt.call @alloc(%a) : i32 "
    assert _strip_locations('tt.print " x loc(" : i32 loc("f(.py":1:2)\nnext') == 'tt.print " x loc(" : i32 \nnext'

    class Printed:

        def __init__(self, text):
            self.text = text

        def str(self):
            return self.text

    a, b = Printed('tt.print " loc(a" loc(#l1)\n'), Printed('tt.print " loc(b" loc(#l2)\n')
    assert module_key(a) != module_key(b)
    assert module_key(a) == module_key(Printed('tt.print " loc(a" loc("/x.py":3:4)\n'))


def test_the_pipeline_key_names_what_makes_the_pipeline(monkeypatch):
    """A verification is taken by _pipeline_key only for the same answer,
    locations, passes after twill (with their arguments), target and
    environment; without an answer there is no key."""
    from twill_triton.hook import Decision, _pipeline_key

    def key(calls=(("passes.common.add_cse", None, ()), ), cap=90, **fields):
        d = Decision(kernel="k", capability=cap, scheduled=True,
                     **dict(dict(cache_key="c", located="l", answer_digest="a"), **fields))
        return _pipeline_key(d, list(calls), cap)

    base = key()
    assert base is not None and base == key()
    assert len({base, key(answer_digest="b"), key(located="m"), key(cache_key="d"), key(cap=100),
                key(calls=(("passes.common.add_cse", None, (1, )), ))}) == 6
    assert key(answer_digest=None) is None
    # An environment variable Triton's own cache is keyed by (measured on
    # 3.6.0 and 3.9.0; nothing is compiled here).
    monkeypatch.setenv("DISABLE_MMA_V3", "1")
    assert key() != base


def test_ties_keep_tritons_schedule(tmp_path, monkeypatch):
    """TWILL_TIES=triton: where twill's model gives Triton's own schedule
    the same I as twill's, the loop keeps Triton's (the persistent TMA GEMM
    on cuda:90: its fused loop ties; its one-stage K = 0 loop, which Triton
    leaves unpipelined, is twill's and the same code), and the kernel
    compiles to stock Triton's loops, with both Is in the report's
    `compared`; where twill's schedule is better in the model (the
    persistent pointer-load GEMM's fused loop), it is twill's. By default
    (`deeper`) a tie keeps twill's at the same stages (num_stages=3) and
    Triton's where its schedule has more stages (num_stages=4: twill's
    tying schedule takes 3)."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "stock"))
    stock = _compile(KERNELS["persistent_tma"], 90)
    monkeypatch.setenv("TWILL_TIES", "triton")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "ties"))
    twill_triton.enable(twill_opt=TWILL_OPT, scope="all")
    try:
        ours = _compile(KERNELS["persistent_tma"], 90)
        tma = twill_triton.decisions()[-1]
        _compile(KERNELS["persistent_pointer"], 90)
        pointer = twill_triton.decisions()[-1]
    finally:
        twill_triton.disable()
    assert [r["reason"] for r in tma.report["loops"]] == [None, "triton_as_good"], tma.remarks
    compared = tma.report["loops"][1]["compared"]
    assert compared["triton"]["ii"] == compared["ii"] and compared["ii_cycles"] > 0, compared
    assert _loop_body(ours.asm["ttgir"]) == _loop_body(stock.asm["ttgir"])
    fused = pointer.report["loops"][1]
    assert pointer.scheduled and fused["decision"] == "scheduled", pointer.remarks
    assert fused["schedule"]["triton"]["ii"] > fused["schedule"]["ii"], fused["schedule"]["triton"]
    monkeypatch.delenv("TWILL_TIES")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "twill"))
    twill_triton.enable(twill_opt=TWILL_OPT, scope="all")
    try:
        _compile(KERNELS["persistent_tma"], 90)
        same = twill_triton.decisions()[-1]
        _compile(lambda cap: persistent_matmul.ast_source("tma", num_stages=4), 90)
        deeper = twill_triton.decisions()[-1]
    finally:
        twill_triton.disable()
    assert [r["decision"] for r in same.report["loops"]] == ["scheduled"] * 2
    fused = deeper.report["loops"][1]
    assert fused["reason"] == "triton_as_good", deeper.remarks
    assert "4 stages against twill's 3" in fused["text"], fused["text"]


def test_unverifiable_loops_are_left_to_triton_unsolved(tmp_path, monkeypatch):
    """By default the hook leaves to Triton, before solving it, a loop whose
    pipeline the verifier does not model (the FA forward, which Triton
    warp-specializes on sm100): the record's reason code says so, nothing
    is solved or verified, and the kernel is Triton's own. On sm90 the same
    loop is scheduled."""
    monkeypatch.setenv("TWILL_CACHE_DIR", "off")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "stock"))
    stock = _compile(KERNELS["fa_fwd"], 100)
    for cap in (100, 90):
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / f"twill{cap}"))
        twill_triton.enable(twill_opt=TWILL_OPT)
        try:
            ours = _compile(KERNELS["fa_fwd"], cap)
        finally:
            twill_triton.disable()
        d = twill_triton.decisions()[-1]
        loops = d.loop_records()
        if cap == 90:
            assert d.scheduled and [lp["decision"] for lp in loops] == ["scheduled"], d.remarks
            continue
        assert not d.scheduled and [lp["reason"] for lp in loops] == ["unverifiable"], d.remarks
        assert all(lp.get("schedule") is None for lp in loops)
        assert "the pipeline verifier does not model" in d.reason and not d.verification, d.reason
        assert _loop_body(ours.asm["ttgir"]) == _loop_body(stock.asm["ttgir"])


def test_a_warm_compile_of_an_unproved_pipeline_falls_back_at_once(tmp_path, monkeypatch):
    """The FA forward on cuda:100, whose pipeline (Triton's warp
    specialization of twill's schedule) the verifier does not prove: the
    first compile falls back after the verifier and marks the schedule
    cache's entry; a second compile with the same cache falls back at once,
    with the same reason and records, without exporting the module, running
    twill-opt or the verifier."""
    from twill_triton import hook

    monkeypatch.setenv("TWILL_CACHE_DIR", str(tmp_path / "twill-cache"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "first"))
    twill_triton.enable(twill_opt=TWILL_OPT, unverifiable="schedule")
    try:
        _compile(KERNELS["fa_fwd"], 100)
    finally:
        twill_triton.disable()
    first = twill_triton.decisions()[-1]
    assert not first.scheduled and VERIFIER_WS in first.reason, first.reason

    def must_not_run(*a, **k):
        raise AssertionError("a warm compile of an unproved schedule exported or verified the module")

    monkeypatch.setattr(hook, "_generic_text", must_not_run)
    monkeypatch.setattr(hook, "_verify", must_not_run)
    # A Triton cache of its own: Triton compiles again, twill answers from
    # its cache.
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "second"))
    twill_triton.enable(twill_opt=TWILL_OPT, unverifiable="schedule")
    try:
        _compile(KERNELS["fa_fwd"], 100)
    finally:
        twill_triton.disable()
    second = twill_triton.decisions()[-1]
    assert second is not first and not second.scheduled and second.cached
    assert second.reason == first.reason
    assert second.verification == first.verification and second.verification
