"""Prints the wgmma, wait, exp2 and TMA ops of the main loop of
bench/gpu/probe/fa_pp.py compiled for cuda:90 (no GPU needed):

    python -m bench.gpu.probe.show_waits [num_warps] [BLOCK_N] [num_stages]

On Triton 3.6.0 and 3.9.0 (2026-11-23) the line after the first
warp_group_dot is its warp_group_dot_wait with pendings = 0, before the
softmax's exp2: the next block's S is not kept in flight.
"""
import re
import sys


import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

from bench.gpu.probe import fa_pp  # noqa: E402

args = [int(a) for a in sys.argv[1:4]]
nw, bn, ns = args + [8, 128, 2][len(args):]
k = triton.compile(fa_pp.src(BLOCK_N=bn), target=GPUTarget("cuda", 90, 32), options=dict(num_warps=nw, num_stages=ns))
print(f"Triton {triton.__version__}, num_warps={nw} BLOCK_N={bn} num_stages={ns}")
in_loop = False
for line in k.asm["ttgir"].splitlines():
    in_loop = in_loop or "scf.for" in line
    if in_loop and re.search(r"warp_group_dot|math\.exp2|async_tma_copy|scf\.yield", line):
        print("  " + re.sub(r"\s+loc\(.*", "", line.strip())[:150])
    if in_loop and "scf.yield" in line:
        break
