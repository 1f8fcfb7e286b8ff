#!/usr/bin/env python3
"""Microbenchmarks for the Hopper machine model (machines/h100.toml), run on
the GPU. Each kernel runs one CTA per SM (all SMs busy, as in a real
kernel), reads the SM's cycle counter (%clock64) around a loop of N
dependent tile operations, and reports cycles per operation from two loop
lengths, (c(N2) - c(N1)) / (N2 - N1), which cancels the fixed cost around
the loop; the median over CTAs is reported.

    python bench/calibrate/calibrate.py --out DIR      # on the H100

What it measures, next to what machines/h100.toml assumes:
* mma: one warp group's wgmma chain acc = dot(a, b, acc) on shared-memory
  tiles [M, K] x [K, N], fp16 inputs, fp32 accumulator (each depends on the
  previous one, so this is the issue time of one tile op including its wait);
* exp: x = exp2(x - 1) over an fp32 register tile (SFU throughput per SM);
* alu: x = x * a + b over an fp32 register tile (FMA pipe throughput);
* tma_pl: the same loads pipelined by Triton (num_stages = 4): cycles per
  tile at steady state; the tile is read into registers and converted, so
  this bounds the rate by that consumer as much as by TMA;
* tma_mma: the loads pipelined with 2, 3 or 5 in flight, each tile feeding a
  thin wgmma straight from shared memory: the TMA/memory throughput per SM;
* smem_rt: a register tile stored to shared memory and loaded back, with a
  CTA barrier after every store and load (conflict-free 16-byte vectors):
  the cross-warp spill the model prices as 2 x bytes / 128 + 30 cycles
  (smem_copy); smem_x: the same loaded by other warps in a transposed
  layout (bank conflicts on an unswizzled buffer). Written in Gluon, which
  exposes shared memory;
* tma: a TMA tile load (host tensor descriptor) whose result feeds the next
  iteration, with no pipelining (num_stages = 1): latency plus transfer, for
  several tile sizes; a line fitted through (bytes, cycles) gives latency
  (intercept) and bytes per cycle (inverse slope). Working set: the same
  tiles are re-read (L2-resident, as K/V tiles of attention are) and a
  streaming variant walks fresh memory (HBM).

Results: a table on stdout and calibrate.json in --out.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl


@triton.jit
def _clock():
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1
    )


@triton.jit
def mma_kernel(a_ptr, b_ptr, out_ptr, cyc_ptr, n_iter,
               M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    pid = tl.program_id(0)
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = tl.zeros([M, N], dtype=tl.float32)
    t0 = _clock()
    for _ in range(n_iter):
        acc = tl.dot(a, b, acc)
    tl.store(out_ptr + pid * M * N + rm[:, None] * N + rn[None, :], acc)
    t1 = _clock()
    tl.store(cyc_ptr + pid, t1 - t0)


@triton.jit
def tile_kernel(x_ptr, out_ptr, cyc_ptr, n_iter, R: tl.constexpr, C: tl.constexpr, EXP: tl.constexpr):
    # EXP: x = exp2(x - 1) (SFU); otherwise x = x * a + b (FMA pipe).
    pid = tl.program_id(0)
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + offs)
    t0 = _clock()
    for _ in range(n_iter):
        if EXP:
            x = tl.exp2(x - 1.0)
        else:
            x = x * 0.999 + 0.001
    tl.store(out_ptr + pid * R * C + offs, x)
    t1 = _clock()
    tl.store(cyc_ptr + pid, t1 - t0)


@triton.jit
def tma_kernel(desc, out_ptr, cyc_ptr, n_iter, first_tile, step,
               BR: tl.constexpr, BC: tl.constexpr, STAGES: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros([BR, BC], dtype=tl.float32)
    t0 = _clock()
    # STAGES = 1: not pipelined, each load's barrier wait comes before the
    # next load is issued, so loads never overlap (latency + transfer).
    # STAGES = 4: Triton keeps three loads in flight, so the steady state is
    # the TMA/memory throughput per SM.
    for i in tl.range(0, n_iter, num_stages=STAGES):
        x = desc.load([(pid * first_tile + i * step) * BR, 0])
        acc += x.to(tl.float32)
    t1 = _clock()
    offs = tl.arange(0, BR)[:, None] * BC + tl.arange(0, BC)[None, :]
    tl.store(out_ptr + pid * BR * BC + offs, acc)
    tl.store(cyc_ptr + pid, t1 - t0)


@triton.jit
def tma_mma_kernel(desc, w_ptr, out_ptr, cyc_ptr, n_iter, first_tile, step,
                   BR: tl.constexpr, BC: tl.constexpr, STAGES: tl.constexpr):
    # As tma_kernel, but each tile feeds a thin wgmma (N = 16) straight from
    # shared memory, as K/V tiles do in attention, instead of being read into
    # registers and converted (which bounds tma_kernel's pipelined rate by the
    # consumer, not by TMA): cycles per tile at steady state are the TMA /
    # memory throughput while the tensor core needs only 2 * BR * BC * 16 /
    # 4096 cycles per tile.
    pid = tl.program_id(0)
    rk = tl.arange(0, BC)
    rn = tl.arange(0, 16)
    w = tl.load(w_ptr + rk[:, None] * 16 + rn[None, :])
    acc = tl.zeros([BR, 16], dtype=tl.float32)
    t0 = _clock()
    for i in tl.range(0, n_iter, num_stages=STAGES):
        x = desc.load([(pid * first_tile + i * step) * BR, 0])
        acc = tl.dot(x, w, acc)
    t1 = _clock()
    rm = tl.arange(0, BR)
    tl.store(out_ptr + pid * BR * 16 + rm[:, None] * 16 + rn[None, :], acc)
    tl.store(cyc_ptr + pid, t1 - t0)


try:  # Gluon (Triton >= 3.5): explicit shared memory and barriers.
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    @gluon.jit
    def _gclock():
        return gl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=gl.int64, is_pure=False, pack=1)

    @gluon.jit
    def smem_kernel(x_ptr, out_ptr, cyc_ptr, n_iter, R: gl.constexpr, C: gl.constexpr, CROSS: gl.constexpr):
        # Store and load a register tile through shared memory, with a CTA
        # barrier after each (Triton's shared-memory analysis would insert
        # them anyway). CROSS: stored with warps along rows, loaded with warps
        # along columns, so every warp reads what other warps wrote (a
        # transposed access: bank conflicts on an unswizzled buffer);
        # otherwise each thread reads back the 16-byte vectors it wrote
        # (conflict-free: the shared-memory bandwidth). Two round trips per
        # iteration.
        nw: gl.constexpr = gl.num_warps()
        rows: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [nw, 1], [1, 0])
        cols: gl.constexpr = gl.BlockedLayout([4, 1], [8, 4], [1, nw], [0, 1])
        other: gl.constexpr = cols if CROSS else rows
        shared: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
        pid = gl.program_id(0)
        r = gl.arange(0, R, layout=gl.SliceLayout(1, rows))
        c = gl.arange(0, C, layout=gl.SliceLayout(0, rows))
        x = gl.load(x_ptr + r[:, None] * C + c[None, :])
        buf = gl.allocate_shared_memory(gl.float32, [R, C], shared)
        t0 = _gclock()
        for _ in range(n_iter):
            buf.store(x)
            gl.thread_barrier()
            y = buf.load(other)
            gl.thread_barrier()
            buf.store(y)
            gl.thread_barrier()
            x = buf.load(rows)
            gl.thread_barrier()
        t1 = _gclock()
        gl.store(out_ptr + pid * R * C + r[:, None] * C + c[None, :], x)
        gl.store(cyc_ptr + pid, t1 - t0)
except ImportError:
    smem_kernel = None


def per_op(run, n1, n2):
    """Median over CTAs of (cycles(n2) - cycles(n1)) / (n2 - n1)."""
    c1 = run(n1)
    c2 = run(n2)
    diffs = [(b - a) / (n2 - n1) for a, b in zip(c1, c2)]
    return statistics.median(diffs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    cyc = torch.zeros(sms, dtype=torch.int64, device=dev)
    results = {"device": torch.cuda.get_device_name(dev), "sms": sms,
               "triton": triton.__version__, "torch": torch.__version__, "rows": []}

    def record(kind, shape, dtype, cycles, model, note=""):
        row = {"kind": kind, "shape": shape, "dtype": dtype, "cycles": round(cycles, 1),
               "model_cycles": model, "note": note}
        results["rows"].append(row)
        print(f"{kind:6} {str(shape):18} {dtype:5} measured {cycles:9.1f} cycles   model {model}   {note}", flush=True)

    # --- mma: wgmma chain, one warp group per CTA.
    for (m, n, k) in [(64, 64, 64), (64, 128, 64), (128, 128, 64), (128, 128, 128)]:
        a = torch.randn(m, k, device=dev, dtype=torch.float16) * 0.01
        b = torch.randn(k, n, device=dev, dtype=torch.float16) * 0.01
        out = torch.empty(sms, m, n, device=dev, dtype=torch.float32)

        def run(it, a=a, b=b, out=out, m=m, n=n, k=k):
            mma_kernel[(sms,)](a, b, out, cyc, it, M=m, N=n, K=k, num_warps=4)
            torch.cuda.synchronize()
            return cyc.tolist()

        try:
            c = per_op(run, 64, 320)
            record("mma", [m, n, k], "f16", c, 2 * m * n * k // 4096, "model: 2mnk / 4096 flop/clk/SM")
        except Exception as e:  # noqa: BLE001
            record("mma", [m, n, k], "f16", float("nan"), 2 * m * n * k // 4096, f"failed: {type(e).__name__}: {e}"[:200])

    # --- exp2 and FMA over register tiles.
    for kind, per in (("exp", 16), ("alu", 128)):
        for (r, c_, warps) in [(64, 128, 4), (128, 128, 4), (128, 128, 8)]:
            x = torch.randn(r, c_, device=dev, dtype=torch.float32)
            out = torch.empty(sms, r, c_, device=dev, dtype=torch.float32)

            def run(it, x=x, out=out, r=r, c_=c_, warps=warps, kind=kind):
                tile_kernel[(sms,)](x, out, cyc, it, R=r, C=c_, EXP=kind == "exp", num_warps=warps)
                torch.cuda.synchronize()
                return cyc.tolist()

            try:
                c = per_op(run, 16, 80)
                record(kind, [r, c_], "f32", c, r * c_ // per, f"{warps} warps; model: elements / {per} per clk/SM")
            except Exception as e:  # noqa: BLE001
                record(kind, [r, c_], "f32", float("nan"), r * c_ // per, f"failed: {type(e).__name__}: {e}"[:200])

    # --- Shared-memory round trips between warps, and CTA barriers.
    for (r, c_, warps) in [(64, 128, 4), (128, 128, 4), (128, 128, 8)]:
        nbytes = r * c_ * 4
        model = 2 * nbytes // 128 + 30
        if smem_kernel is None:
            record("smem_rt", [r, c_], "f32", float("nan"), model, "needs Gluon (Triton >= 3.5)")
            continue
        x = torch.randn(r, c_, device=dev, dtype=torch.float32)
        out = torch.empty(sms, r, c_, device=dev, dtype=torch.float32)

        def run(it, cross=False, x=x, out=out, r=r, c_=c_, warps=warps):
            smem_kernel[(sms,)](x, out, cyc, it, R=r, C=c_, CROSS=cross, num_warps=warps)
            torch.cuda.synchronize()
            return cyc.tolist()

        try:
            same = per_op(run, 16, 80) / 2  # two round trips per iteration
            record("smem_rt", [r, c_], "f32", same, model,
                   f"{warps} warps, store + barrier + load + barrier, conflict-free: {2 * nbytes / same:.0f} B/clk/SM; "
                   "model: smem_copy 2 x bytes / 128 + 30")
            cross = per_op(lambda it: run(it, cross=True), 16, 80) / 2
            record("smem_x", [r, c_], "f32", cross, model,
                   f"{warps} warps, the same read back by other warps (transposed, unswizzled): "
                   f"{2 * nbytes / cross:.0f} B/clk/SM")
        except Exception as e:  # noqa: BLE001
            record("smem_rt", [r, c_], "f32", float("nan"), model, f"failed: {type(e).__name__}: {e}"[:200])

    # --- TMA loads, no overlap.
    from triton.tools.tensor_descriptor import TensorDescriptor

    def alloc(size, align, stream):
        return torch.empty(size, dtype=torch.int8, device=dev)

    triton.set_allocator(alloc)
    fits = {}
    for mode in ("l2", "hbm"):
        pts = []
        for (br, bc) in [(64, 64), (64, 128), (128, 128), (256, 128)]:
            n_iter_max = 320
            rows = br * (sms * n_iter_max + 1) if mode == "hbm" else br * sms
            src = torch.zeros(rows, bc, device=dev, dtype=torch.float16)
            desc = TensorDescriptor.from_tensor(src, [br, bc])
            out = torch.empty(sms, br, bc, device=dev, dtype=torch.float32)
            # l2: each CTA re-reads its own tile; hbm: each iteration a fresh tile.
            first, step = (1, 0) if mode == "l2" else (n_iter_max, 1)

            def run(it, stages=1, desc=desc, out=out, br=br, bc=bc, first=first, step=step):
                tma_kernel[(sms,)](desc, out, cyc, it, first, step, BR=br, BC=bc, STAGES=stages, num_warps=4)
                torch.cuda.synchronize()
                return cyc.tolist()

            nbytes = br * bc * 2
            try:
                c = per_op(run, 64, 320)
                pts.append((nbytes, c))
                record("tma", [br, bc], "f16", c, 500 + nbytes // 64, f"{mode}, one load at a time; model: 500 + bytes / 64")
            except Exception as e:  # noqa: BLE001
                record("tma", [br, bc], "f16", float("nan"), 500 + nbytes // 64, f"{mode} failed: {type(e).__name__}: {e}"[:200])
            w = torch.randn(bc, 16, device=dev, dtype=torch.float16) * 0.01
            out16 = torch.empty(sms, br, 16, device=dev, dtype=torch.float32)
            for stages in (3, 4, 6):
                # Shared memory: (stages - 1) tiles in flight plus one in use.
                if nbytes * stages > 200 * 1024:
                    continue

                def run_mma(it, stages=stages, desc=desc, br=br, bc=bc, first=first, step=step, w=w, out16=out16):
                    tma_mma_kernel[(sms,)](desc, w, out16, cyc, it, first, step, BR=br, BC=bc, STAGES=stages,
                                           num_warps=4)
                    torch.cuda.synchronize()
                    return cyc.tolist()

                try:
                    c = per_op(run_mma, 64, 320)
                    results.setdefault("tma_mma_throughput", {}).setdefault(mode, []).append(
                        {"shape": [br, bc], "stages": stages, "cycles_per_tile": round(c, 1),
                         "bytes_per_cycle": round(nbytes / c, 1)})
                    record("tma_mma", [br, bc], "f16", c, nbytes // 64,
                           f"{mode}, {stages - 1} loads in flight into wgmma: {nbytes / c:.1f} B/clk/SM; model: bytes / 64")
                except Exception as e:  # noqa: BLE001
                    record("tma_mma", [br, bc], "f16", float("nan"), nbytes // 64,
                           f"{mode}, stages {stages} failed: {type(e).__name__}: {e}"[:200])
            try:
                c = per_op(lambda it: run(it, stages=4), 64, 320)
                results.setdefault("tma_throughput", {}).setdefault(mode, []).append(
                    {"shape": [br, bc], "cycles_per_tile": round(c, 1), "bytes_per_cycle": round(nbytes / c, 1)})
                record("tma_pl", [br, bc], "f16", c, nbytes // 64, f"{mode}, 3 loads in flight: {nbytes / c:.1f} B/clk/SM; model: bytes / 64")
            except Exception as e:  # noqa: BLE001
                record("tma_pl", [br, bc], "f16", float("nan"), nbytes // 64, f"{mode} failed: {type(e).__name__}: {e}"[:200])
        if len(pts) >= 2:
            xs, ys = zip(*pts)
            mx, my = statistics.mean(xs), statistics.mean(ys)
            slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x in xs)
            fits[mode] = {"latency_cycles": round(my - slope * mx, 1),
                          "bytes_per_cycle": round(1 / slope, 1) if slope > 0 else None}
            print(f"tma fit ({mode}): latency {fits[mode]['latency_cycles']} cycles, "
                  f"{fits[mode]['bytes_per_cycle']} bytes/cycle per SM", flush=True)
    results["tma_fit"] = fits
    (args.out / "calibrate.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
