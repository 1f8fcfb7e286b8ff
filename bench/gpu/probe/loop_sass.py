"""What the loads-first and loads-last placements compile to (CPU only: the
cubins come from `triton.compile` with an explicit target, the SASS from the
wheel's nvdisasm).

Measured on the H100 (bwd_loads.py, 2026-11-24): the hd64 backward (b32
w4) ran 1.5-2.5% faster with every load last in the body and one stage
deeper (Triton's own structure) than with twill's loads first at the
modeled depth, while the 4k GEMM ran 4-5% faster the other way. Both placements issue the loads of
iteration i + p + 1 between the compute of iteration i and the wait of
iteration i + 1, so their steady-state instruction streams should be the
same, rotated: the loop's back edge cuts the stream before the loads (loads
first) or after them (loads last). This script checks that on the SASS: for
each loop that issues wgmma (HGMMA), the opcode multiset of its body in both
placements, their difference, and the order of the synchronizing
instructions.

    python -m bench.gpu.probe.loop_sass [--kind bwd|gemm|fa_hd64|fa]
"""
import argparse
import collections
import itertools
import os
import re
import tempfile


import triton  # noqa: E402

from bench.gpu.probe import bwd_loads  # noqa: E402
from bench.gpu import run  # noqa: E402

PLACEMENTS = {"loads first": "", "loads last + 1 stage": "loads=last prefetch=1"}
# Instructions that synchronize or issue asynchronous work.
MARKERS = ("HGMMA", "WARPGROUP", "UTMALDG", "LDGSTS", "LDGDEPBAR", "DEPBAR", "BAR.SYNC", "SYNCS")


def loops(lines):
    """(label line, back-edge line) of each loop with wgmma, in program
    order: a loop's back edge is a predicated branch to an earlier label.
    (The mbarrier try-wait retry stubs that ptxas puts after the function's
    code jump back unpredicated; their own retry loops hold no wgmma.)"""
    labels = {line[:-1]: i for i, line in enumerate(lines) if line.startswith(".L_x_") and line.endswith(":")}
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"@!?U?P\w+ BRA `\((\.L_x_\d+)\)", line)
        if m and labels.get(m.group(1), i) < i and any("HGMMA" in x for x in lines[labels[m.group(1)]:i]):
            out.append((labels[m.group(1)], i))
    return out


def opcode(line):
    return re.sub(r"^@!?U?P\w+ ", "", line).split()[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=("bwd", "gemm") + tuple(bwd_loads.FWD), default="bwd")
    a = ap.parse_args()
    if a.kind in bwd_loads.FWD:
        kind, cx = a.kind, bwd_loads.fwd_cx(a.kind)
    else:
        kind, cx = ("bwd_hd64", bwd_loads.CX) if a.kind == "bwd" else ("gemm", bwd_loads.GEMM_CX)
    os.environ.pop("TWILL_REPLAY_DIR", None)
    bodies = {}
    for label, extra in PLACEMENTS.items():
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="loop-sass-")
        k, d = run.twill_compile(kind, cx, bwd_loads.OPTS, extra)
        assert d.scheduled, d.reason
        lines = run.sass_lines(k.asm["cubin"])
        bodies[label] = [[x for x in lines[s + 1:e + 1] if x and not x.startswith(".")] for s, e in loops(lines)]
    print(f"{kind}, Triton {triton.__version__}, {bwd_loads.OPTS}")
    (la, a_loops), (lb, b_loops) = bodies.items()
    for n, (x, y) in enumerate(zip(a_loops, b_loops), 1):
        ca, cb = collections.Counter(map(opcode, x)), collections.Counter(map(opcode, y))
        print(f"loop {n}: {len(x)} instructions ({la}), {len(y)} ({lb})")
        print(f"  only in {la}: {dict(ca - cb)}")
        print(f"  only in {lb}: {dict(cb - ca)}")
        for label, body in ((la, x), (lb, y)):
            seq = [opcode(i) for i in body if i.startswith(MARKERS) or opcode(i).startswith(MARKERS)]
            compact = [f"{op} x{len(list(g))}" for op, g in itertools.groupby(seq)]
            print(f"  {label}: {' '.join(compact)}")


if __name__ == "__main__":
    main()
