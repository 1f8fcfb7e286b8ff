"""Recorded schedules for the probes that replay them on the GPU machine
(bwd_loads, scaled_gemm: some of their variants are modules merged by hand
from two recordings, which only a replay can run). The recordings are a
cache, not committed: `--record` of each probe rebuilds it under
bench/gpu/plans/<triton version>/probe/<name> (carry bench/gpu/plans)."""

import os
import tempfile
from pathlib import Path

from bench.gpu import run

# Triton's Hopper warp specialization (4 warps, warp_specialize, device-side
# descriptors) numbers the loop-carried buffer indices of its partition loops
# in an order that changes from one compilation to the next: the same module
# in two variants, about half the time each (Triton 3.6.0 and 3.9.0,
# 2026-11-23). A replay key is exact, so such kernels are recorded until
# both variants are seen (at most RECORD_TRIES compilations).
RECORD_TRIES = 8
# What a recorded dump keeps: the replay needs key.txt, scheduled.mlir and
# remarks.txt (and report.json); input.mlir and command.txt reproduce the
# schedule with twill-opt. The hook's other files are dropped.
RECORD_DROP = ("output.mlir", "export.pretty.mlir", "pipelined.mlir")


def root(name):
    """The recording directory of probe `name` for this Triton."""
    return run.PLANS / "probe" / name


def twill_record(kind, cx, opts, extra, dump_dir, compile=None):
    """`run.twill_compile` that records the schedules for replay in
    `dump_dir`, every variant of a Hopper warp-specialized kernel (see
    RECORD_TRIES)."""
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="twill-record-cache-")
    k, d = run.twill_compile(kind, cx, opts, extra, compile, dump_dir=dump_dir)
    if run.hopper_ws(cx, opts):
        for _ in range(RECORD_TRIES - 1):
            if len(set(p.read_text() for p in Path(dump_dir).rglob("key.txt"))) >= 2:
                break
            os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="twill-record-cache-")
            run.twill_compile(kind, cx, opts, extra, compile, dump_dir=dump_dir)
    return k, d


def prune_recorded(root_dir):
    for name in RECORD_DROP:
        for p in Path(root_dir).rglob(name):
            p.unlink()
