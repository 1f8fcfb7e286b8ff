"""FlashAttention backward for Hopper in Gluon: twill's joint SWP + WS schedules
of the two loops of `fa_bwd.attn_bwd_kernel`, lowered by hand.

The same algorithm as `fa_bwd.py` (the Triton tutorial's, FlashAttention-2's
without atomics): P is recomputed from the forward's log2-sum-exp M, Delta =
rowsum(dO * O) comes from fa_bwd's preprocess kernel, and

* the dK/dV loop (one program per BLOCK_N1 = 128 key rows, streaming the
  query blocks of BLOCK_M1 rows) computes, in the tutorial's transposed
  form, S^T = K Q^T, P^T = exp2(S^T * scale - M), dV += P^T dO,
  dP^T = V dO^T, dS^T = P^T (dP^T - Delta), dK += dS^T Q;
* the dQ loop (one program per BLOCK_M2 = 128 query rows, streaming the
  key blocks of BLOCK_N2 rows) computes S = Q K^T, P, dP = dO V^T,
  dS = P (dP - Delta), dQ += dS K.

twill's joint schedule of each loop with two compute groups (the loops of
the kernel's TTGIR, exported by the pass and solved without Triton 3.6's
"every wgmma in the last stage" rule; `fa_bwd_gluon_plan.py` reads the
schedules and refuses one outside what this file lowers) is a split by
function, not by rows:

* dK/dV loop: group P issues S^T and dV (it holds dV's accumulator), group
  dS issues dP^T and dK (it holds dK's). P^T is the value that crosses
  between them: group P writes it to shared memory, group dS reads it to
  form dS^T. Each group issues its first wgmma of iteration j before its
  second of iteration j - 1 and waits only for the first, so that the
  second runs under the exponentials (group P) or under the dS^T
  arithmetic (group dS).
* dQ loop: group P issues S and dP and computes dS (the exponentials run
  under dP), group dQ holds dQ's accumulator and issues dQ += dS K, one
  wgmma kept in flight. dS crosses through shared memory.
* a 1-warp producer streams the loop's operands with TMA (Q and dO, or K
  and V) into rings of STAGES slots: the schedule's prefetch depth + 1.

The operands that cross between groups, and the wgmma operands written from
registers (dS^T for dK), go through shared memory: a wgmma reads its A
operand from there, and every register the groups do not need for their
accumulators is left free. A group publishes a buffer with a fence (generic
to async proxy), a barrier among its own warps, then one arrive on the
buffer's "ready" mbarrier; the reader arrives on its "empty" mbarrier when
done. The loads of M and Delta (64 floats per step) are plain global loads
by the group that uses them, issued before the wgmma they wait behind.

Two kernels (the dK/dV loop, then the dQ loop), each one program per 128
rows of (z, h): each keeps its buffers for its own loop (224 KB of shared
memory at twill's plan), and a program of one never waits for the other's.
Arguments follow `fa_bwd.attn_bwd_kernel`. Compile on a machine without a
GPU with `compile_for(target, ...)`; launch both with `launcher(...)`.

The dQ loop as fa_bwd writes it has the split by function as twill's
schedule (group dQ then issues one wgmma per iteration and idles); read
sub-tiled into two halves of 64 query rows (fa_bwd's DQ_SUBTILE), twill
gives each half a group of its own (SPLIT2 = "rows": each group runs the
whole loop body on its rows, dS feeds its dQ from registers, no operand
crosses), which is the plan (DEFAULT_CONFIG). SPLIT = "rows" gives the
dK/dV loop the same split (an ablation: twill does not read that loop
sub-tiled), EARLY_S issues the function split's S one block ahead; both
are measured by bench/gpu/probe/gluon_bwd_probe.py (H100, 2026-11-25).

Until its model had a shared-memory bandwidth unit (2026-11-26), twill
split the head-dim-64 dK/dV loop otherwise (I = 14): S^T and every
elementwise op (P^T, dS^T) on one group, dV, dP^T and dK on the other,
with P^T, dP^T - Delta and dS^T crossing. SPLIT1 = "elementwise" lowers
that cut (`attn_bwd_dkdv_ew_kernel`); measured on the H100 (2026-11-26) it
runs the dK/dV kernel 1.35x slower than the function split, 1.10x with the
fp32 crossing sent in fp16 (DPD_F16): the model priced a crossing as
latency, not as the shared-memory traffic it is. The model now charges
that traffic, and twill's head-dim-64 plan is the function split;
`fa_bwd_gluon_plan` still accepts the cut. REG_A (function split: K, P^T
and dS^T as register A operands) and K_REGS are ablations measured
beside it. SPLIT1 = "single" runs the dK/dV loop on one compute
group beside the producer, small enough at head dim 64 with 32-row steps
(BLOCK_M1 = 32, MAXNREG1 = 128) for two CTAs per SM, stock Triton's
occupancy there; PIPE issues S^T and dP^T of block j + 1 before dV and dK
of block j. It is not a twill plan either (twill has not been asked for
one-group schedules of this kernel).

PERSIST1 / PERSIST2 run the function-split dK/dV kernel and the
rows-split dQ kernel on a persistent grid, one program per SM walking the
tiles in the grid's order with 1 or 2 buffers for the tile's own operands
(K and V, or Q and dO), so that the next tile's load and its first ring
slots overlap this tile's last iterations. A launch choice, not a schedule
one; the plan's launch since 2026-11-26 where two buffers fit
(`fa_bwd_gluon_plan.launch_plan`: head dim 64). CONCURRENT launches the dQ
kernel on a second stream beside the dK/dV kernel (the loops share no result), so
that dQ programs fill the SMs the dK/dV kernel's last wave leaves idle.
"""

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_init, warpgroup_mma_wait)

from bench.kernels import gluon_hopper
from bench.kernels.gluon_hopper import desc_type as _desc_type
from bench.kernels.gluon_hopper import group_barrier as _group_barrier
from bench.kernels.gluon_hopper import nvmma_layout as _layout
from bench.kernels.gluon_hopper import ring_load_pair as _ring_load_pair
from bench.kernels.gluon_hopper import tma_load as _tma_load
from bench.kernels.gluon_hopper import tma_store as _tma_store

# Rows a program owns: BLOCK_N1 key rows (dK/dV), BLOCK_M2 query rows (dQ).
TILE_ROWS = 128
TILE = gl.constexpr(TILE_ROWS)
LOG2E = gl.constexpr(1.44269504)


# ---------------------------------------------------------------------------
# The dK/dV loop.
# ---------------------------------------------------------------------------

@gluon.jit
def _store_tile(desc, row, buf, val):
    """A group's epilogue: `val` into shared buffer `buf`, then to global
    memory at `row` through TMA, waited for."""
    buf.store(val)
    fence_async_shared()
    _group_barrier()
    _tma_store(desc, [row, 0], buf)
    tma.store_wait(0)


@gluon.jit
def _store_dv_dk(desc_dv, desc_dk, row, k_t, v_t, dv, dk, sm_scale):
    """A group's epilogue holding both accumulators: dV and dK (scaled)
    through the tile's K and V buffers, which no other group reads any
    more, to global memory at `row`, waited for."""
    k_t.store(dv.to(gl.float16))
    v_t.store((dk * sm_scale).to(gl.float16))
    fence_async_shared()
    _group_barrier()
    _tma_store(desc_dv, [row, 0], k_t)
    _tma_store(desc_dk, [row, 0], v_t)
    tma.store_wait(0)


@gluon.jit
def _dkdv_producer(desc_q, desc_do, desc_k, desc_v, k_s, v_s, q_s, do_s, kv_ready, q_ready, do_ready, q_empty,
                   do_empty, kv_row, row0, n_m, BLOCK_M: gl.constexpr, STAGES: gl.constexpr):
    """One warp: the program's K and V tiles, then Q and dO of every query
    block into their rings (a slot is refilled once both groups released
    it; the first lap waits on parity 1 of a fresh barrier, which returns at
    once)."""
    mbarrier.expect(kv_ready, 2 * desc_k.block_type.nbytes)
    _tma_load(desc_k, [kv_row, 0], kv_ready, k_s)
    _tma_load(desc_v, [kv_row, 0], kv_ready, v_s)
    for j in range(n_m):
        _ring_load_pair(desc_q, desc_do, q_s, do_s, q_ready, do_ready, q_empty, do_empty, row0 + j * BLOCK_M, j, STAGES)


@gluon.jit
def _dkdv_p_tile(M, k_t, q_s, do_s, pt_s, kv_ready, kv_phase, q_ready, do_ready, q_empty, do_empty, pt_ready,
                 pt_empty, m_row, n_m, g0, qk_scale, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                 STAGES: gl.constexpr, REG_A: gl.constexpr, REUSE: gl.constexpr):
    """Group P's loop over one program's tile (K in `k_t`, ready at
    `kv_phase` of `kv_ready`), its ring iterations numbered from g0: S^T =
    K Q^T and P^T of query block j, then dV += P^T dO of block j - 1, with
    S^T issued first and P^T's exponentials under that dV. P^T goes to
    shared memory (a ring of two) for group dS and for dV's A operand.
    Returns dV. REG_A (an ablation): S^T takes K, read once, and dV takes
    P^T from registers (P^T still goes to shared memory for group dS).
    REUSE: the P^T slots may hold an earlier tile's (a persistent grid), so
    block 0 waits for its slot too."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    cols = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, s_layout))
    s_zero = gl.zeros([TILE, BLOCK_M], gl.float32, s_layout)
    dv = gl.zeros([TILE, HEAD_DIM], gl.float32, o_layout)
    mbarrier.wait(kv_ready, kv_phase)
    if REG_A:
        k_op = k_t.load(gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2))
    else:
        k_op = k_t

    # Block 0: S^T and P^T alone.
    s0 = g0 % STAGES
    b0 = g0 % 2
    mbarrier.wait(q_ready.index(s0), (g0 // STAGES) & 1)
    s_tok = warpgroup_mma(k_op, q_s.index(s0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    m = gl.load(M + m_row + cols)
    st = warpgroup_mma_wait(0, deps=[s_tok])
    mbarrier.arrive(q_empty.index(s0), count=1)
    pt = gl.exp2(st * qk_scale - gl.expand_dims(m, 0))
    if REG_A:
        pt_op = gl.convert_layout(pt.to(gl.float16), a_layout)
    if REUSE:
        mbarrier.wait(pt_empty.index(b0), ((g0 // 2) & 1) ^ 1)
    pt_s.index(b0).store(pt.to(gl.float16))
    fence_async_shared()
    _group_barrier()
    mbarrier.arrive(pt_ready.index(b0), count=1)

    for j in range(1, n_m):
        g = g0 + j
        s = g % STAGES
        sp = (g - 1) % STAGES
        b = g % 2
        bp = (g - 1) % 2
        mbarrier.wait(q_ready.index(s), (g // STAGES) & 1)
        s_tok = warpgroup_mma(k_op, q_s.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(do_ready.index(sp), ((g - 1) // STAGES) & 1)
        if REG_A:
            dv_tok = warpgroup_mma(pt_op, do_s.index(sp), dv, is_async=True)
        else:
            dv_tok = warpgroup_mma(pt_s.index(bp), do_s.index(sp), dv, is_async=True)
        m = gl.load(M + m_row + j * BLOCK_M + cols)
        st = warpgroup_mma_wait(1, deps=[s_tok])
        mbarrier.arrive(q_empty.index(s), count=1)
        pt = gl.exp2(st * qk_scale - gl.expand_dims(m, 0))
        if REG_A:
            pt_next = gl.convert_layout(pt.to(gl.float16), a_layout)
        # Slot b last held P^T of block j - 2: group dS has read it, and this
        # group's dV of j - 2 completed in the previous iteration.
        mbarrier.wait(pt_empty.index(b), ((g // 2) & 1) ^ 1)
        pt_s.index(b).store(pt.to(gl.float16))
        fence_async_shared()
        _group_barrier()
        mbarrier.arrive(pt_ready.index(b), count=1)
        dv = warpgroup_mma_wait(0, deps=[dv_tok])
        if REG_A:
            pt_op = pt_next
        mbarrier.arrive(do_empty.index(sp), count=1)
        mbarrier.arrive(pt_empty.index(bp), count=1)

    gl_ = g0 + n_m - 1
    sl = gl_ % STAGES
    bl = gl_ % 2
    mbarrier.wait(do_ready.index(sl), (gl_ // STAGES) & 1)
    if REG_A:
        dv_tok = warpgroup_mma(pt_op, do_s.index(sl), dv, is_async=True)
    else:
        dv_tok = warpgroup_mma(pt_s.index(bl), do_s.index(sl), dv, is_async=True)
    dv = warpgroup_mma_wait(0, deps=[dv_tok])
    mbarrier.arrive(do_empty.index(sl), count=1)
    mbarrier.arrive(pt_empty.index(bl), count=1)
    return dv


@gluon.jit
def _dkdv_group_p(desc_dv, M, k_s, q_s, do_s, pt_s, kv_ready, q_ready, do_ready, q_empty, do_empty, pt_ready,
                  pt_empty, kv_row, m_row, n_m, qk_scale, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                  STAGES: gl.constexpr, REG_A: gl.constexpr):
    """Group P (the default partition): the program's tile
    (`_dkdv_p_tile`), then dV through K's buffer (only this group reads K,
    and its last S^T has completed)."""
    dv = _dkdv_p_tile(M, k_s, q_s, do_s, pt_s, kv_ready, 0, q_ready, do_ready, q_empty, do_empty, pt_ready, pt_empty,
                      m_row, n_m, 0, qk_scale, HEAD_DIM, BLOCK_M, STAGES, REG_A, False)
    _store_tile(desc_dv, kv_row, k_s, dv.to(gl.float16))


@gluon.jit
def _dkdv_ds_tile(Delta, v_t, q_s, do_s, pt_s, ds_s, kv_ready, kv_phase, q_ready, do_ready, q_empty, do_empty,
                  pt_ready, pt_empty, m_row, n_m, g0, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                  STAGES: gl.constexpr, REG_A: gl.constexpr):
    """Group dS's loop over one program's tile (V in `v_t`), its ring
    iterations numbered from g0: dP^T = V dO^T of query block j, then
    dK += dS^T Q of block j - 1, with dP^T issued first and dS^T of block j
    (from group P's P^T) formed under that dK. dS^T goes to shared memory
    (a ring of two, this group's own; an earlier tile's last dK has
    completed) as dK's A operand. Returns dK (unscaled). REG_A (an
    ablation): dK takes dS^T from registers instead."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    cols = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, s_layout))
    s_zero = gl.zeros([TILE, BLOCK_M], gl.float32, s_layout)
    dk = gl.zeros([TILE, HEAD_DIM], gl.float32, o_layout)
    mbarrier.wait(kv_ready, kv_phase)

    # Block 0: dP^T and dS^T alone.
    s0 = g0 % STAGES
    b0 = g0 % 2
    mbarrier.wait(do_ready.index(s0), (g0 // STAGES) & 1)
    dp_tok = warpgroup_mma(v_t, do_s.index(s0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    delta = gl.load(Delta + m_row + cols)
    dpt = warpgroup_mma_wait(0, deps=[dp_tok])
    mbarrier.arrive(do_empty.index(s0), count=1)
    mbarrier.wait(pt_ready.index(b0), (g0 // 2) & 1)
    pt = pt_s.index(b0).load(s_layout)
    _group_barrier()
    mbarrier.arrive(pt_empty.index(b0), count=1)
    dst = pt.to(gl.float32) * (dpt - gl.expand_dims(delta, 0))
    if REG_A:
        ds_op = dst.to(gl.float16)
    else:
        ds_s.index(b0).store(dst.to(gl.float16))
        fence_async_shared()
        _group_barrier()

    for j in range(1, n_m):
        g = g0 + j
        s = g % STAGES
        sp = (g - 1) % STAGES
        b = g % 2
        mbarrier.wait(do_ready.index(s), (g // STAGES) & 1)
        dp_tok = warpgroup_mma(v_t, do_s.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(q_ready.index(sp), ((g - 1) // STAGES) & 1)
        if REG_A:
            dk_tok = warpgroup_mma(gl.convert_layout(ds_op, a_layout), q_s.index(sp), dk, is_async=True)
        else:
            dk_tok = warpgroup_mma(ds_s.index((g - 1) % 2), q_s.index(sp), dk, is_async=True)
        delta = gl.load(Delta + m_row + j * BLOCK_M + cols)
        dpt = warpgroup_mma_wait(1, deps=[dp_tok])
        mbarrier.arrive(do_empty.index(s), count=1)
        mbarrier.wait(pt_ready.index(b), (g // 2) & 1)
        pt = pt_s.index(b).load(s_layout)
        _group_barrier()
        mbarrier.arrive(pt_empty.index(b), count=1)
        dst = pt.to(gl.float32) * (dpt - gl.expand_dims(delta, 0))
        if REG_A:
            ds_next = dst.to(gl.float16)
            dk = warpgroup_mma_wait(0, deps=[dk_tok])
            mbarrier.arrive(q_empty.index(sp), count=1)
            ds_op = ds_next
        else:
            dk = warpgroup_mma_wait(0, deps=[dk_tok])
            mbarrier.arrive(q_empty.index(sp), count=1)
            # Slot b last held dS^T of block j - 2, whose dK has completed.
            ds_s.index(b).store(dst.to(gl.float16))
            fence_async_shared()
            _group_barrier()

    gl_ = g0 + n_m - 1
    sl = gl_ % STAGES
    mbarrier.wait(q_ready.index(sl), (gl_ // STAGES) & 1)
    if REG_A:
        dk_tok = warpgroup_mma(gl.convert_layout(ds_op, a_layout), q_s.index(sl), dk, is_async=True)
    else:
        dk_tok = warpgroup_mma(ds_s.index(gl_ % 2), q_s.index(sl), dk, is_async=True)
    dk = warpgroup_mma_wait(0, deps=[dk_tok])
    mbarrier.arrive(q_empty.index(sl), count=1)
    return dk


@gluon.jit
def _dkdv_group_ds(desc_dk, Delta, v_s, q_s, do_s, pt_s, ds_s, kv_ready, q_ready, do_ready, q_empty, do_empty,
                   pt_ready, pt_empty, kv_row, m_row, n_m, sm_scale, HEAD_DIM: gl.constexpr,
                   BLOCK_M: gl.constexpr, STAGES: gl.constexpr, REG_A: gl.constexpr):
    """Group dS (a 4-warp worker): the program's tile (`_dkdv_ds_tile`),
    then dK through V's buffer (only this group reads V)."""
    dk = _dkdv_ds_tile(Delta, v_s, q_s, do_s, pt_s, ds_s, kv_ready, 0, q_ready, do_ready, q_empty, do_empty, pt_ready,
                       pt_empty, m_row, n_m, 0, HEAD_DIM, BLOCK_M, STAGES, REG_A)
    _store_tile(desc_dk, kv_row, v_s, (dk * sm_scale).to(gl.float16))


@gluon.jit
def attn_bwd_dkdv_gluon_kernel(sm_scale, M, Delta, desc_q, desc_do, desc_k, desc_v, desc_dk, desc_dv, N_CTX,
                               HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                               REG_A: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    gl.static_assert(desc_k.block_type.shape[0] == TILE)
    pid = gl.program_id(0)
    off_hz = gl.program_id(1)
    row0 = off_hz * N_CTX
    kv_row = row0 + pid * TILE
    n_m = N_CTX // BLOCK_M
    qk_scale = sm_scale * LOG2E

    k_s = gl.allocate_shared_memory(desc_k.dtype, desc_k.block_type.shape, desc_k.layout)
    v_s = gl.allocate_shared_memory(desc_v.dtype, desc_v.block_type.shape, desc_v.layout)
    q_s = gl.allocate_shared_memory(desc_q.dtype, [STAGES] + desc_q.block_type.shape, desc_q.layout)
    do_s = gl.allocate_shared_memory(desc_do.dtype, [STAGES] + desc_do.block_type.shape, desc_do.layout)
    t_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([TILE, BLOCK_M], gl.float16)
    pt_s = gl.allocate_shared_memory(gl.float16, [2, TILE, BLOCK_M], t_layout)
    ds_s = gl.allocate_shared_memory(gl.float16, [2, TILE, BLOCK_M], t_layout)
    kv_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    do_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    do_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    pt_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    pt_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_ready, count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(q_ready.index(s), count=1)
        mbarrier.init(do_ready.index(s), count=1)
        mbarrier.init(q_empty.index(s), count=2)  # S^T (group P) and dK (group dS)
        mbarrier.init(do_empty.index(s), count=2)  # dV (group P) and dP^T (group dS)
    for b in gl.static_range(2):
        mbarrier.init(pt_ready.index(b), count=1)
        mbarrier.init(pt_empty.index(b), count=2)  # dV (group P) and dS^T (group dS)

    gl.warp_specialize(
        [(_dkdv_group_p, (desc_dv, M, k_s, q_s, do_s, pt_s, kv_ready, q_ready, do_ready, q_empty, do_empty,
                          pt_ready, pt_empty, kv_row, row0, n_m, qk_scale, HEAD_DIM, BLOCK_M, STAGES, REG_A)),
         (_dkdv_group_ds, (desc_dk, Delta, v_s, q_s, do_s, pt_s, ds_s, kv_ready, q_ready, do_ready, q_empty,
                           do_empty, pt_ready, pt_empty, kv_row, row0, n_m, sm_scale, HEAD_DIM, BLOCK_M, STAGES,
                           REG_A)),
         (_dkdv_producer, (desc_q, desc_do, desc_k, desc_v, k_s, v_s, q_s, do_s, kv_ready, q_ready, do_ready,
                           q_empty, do_empty, kv_row, row0, n_m, BLOCK_M, STAGES))],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS])

    mbarrier.invalidate(kv_ready)
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(q_ready.index(s))
        mbarrier.invalidate(do_ready.index(s))
        mbarrier.invalidate(q_empty.index(s))
        mbarrier.invalidate(do_empty.index(s))
    for b in gl.static_range(2):
        mbarrier.invalidate(pt_ready.index(b))
        mbarrier.invalidate(pt_empty.index(b))


# ---------------------------------------------------------------------------
# The dK/dV loop split by function on a persistent grid (PERSIST1): one
# program per SM walks the tiles (z, h, key block) in the grid's order, so
# that the next tile's first Q and dO blocks stream in under the current
# tile's last iterations and epilogue, and no CTA is launched per tile.
# Ring and P^T / dS^T slots count iterations across tiles (g).
# ---------------------------------------------------------------------------

@gluon.jit
def _tile_rows(t, tiles_n, N_CTX):
    """(first key row, first row of its (z, h)) of tile t."""
    row0 = (t // tiles_n) * N_CTX
    return row0 + (t % tiles_n) * TILE, row0


@gluon.jit
def _pdkdv_producer(desc_q, desc_do, desc_k, desc_v, k_s, v_s, q_s, do_s, kv_ready, kv_empty, q_ready, do_ready,
                    q_empty, do_empty, n_tiles, tiles_n, N_CTX, n_m, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                    KV_BUFS: gl.constexpr):
    """One warp. One K / V buffer: per tile, the first STAGES - 1 query
    blocks into the rings (their slots free up as the previous tile's last
    iterations complete), then K and V once both groups have stored the
    previous tile's dK and dV through them, then the remaining blocks. Two:
    K and V first, into the buffer the tile before last has released."""
    if KV_BUFS == 1:
        n_first = gl.minimum(n_m, STAGES - 1)
    else:
        n_first = 0
    it = 0
    for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        kv_row, row0 = _tile_rows(t, tiles_n, N_CTX)
        g0 = it * n_m
        kb = it % KV_BUFS
        for j in range(n_first):
            _ring_load_pair(desc_q, desc_do, q_s, do_s, q_ready, do_ready, q_empty, do_empty, row0 + j * BLOCK_M,
                            g0 + j, STAGES)
        mbarrier.wait(kv_empty.index(kb), ((it // KV_BUFS) & 1) ^ 1)
        mbarrier.expect(kv_ready.index(kb), 2 * desc_k.block_type.nbytes)
        _tma_load(desc_k, [kv_row, 0], kv_ready.index(kb), k_s.index(kb))
        _tma_load(desc_v, [kv_row, 0], kv_ready.index(kb), v_s.index(kb))
        for j in range(n_first, n_m):
            _ring_load_pair(desc_q, desc_do, q_s, do_s, q_ready, do_ready, q_empty, do_empty, row0 + j * BLOCK_M,
                            g0 + j, STAGES)
        it += 1


@gluon.jit
def _pdkdv_group_p(desc_dv, M, k_s, q_s, do_s, pt_s, kv_ready, kv_empty, q_ready, do_ready, q_empty, do_empty,
                   pt_ready, pt_empty, n_tiles, tiles_n, N_CTX, n_m, qk_scale, HEAD_DIM: gl.constexpr,
                   BLOCK_M: gl.constexpr, STAGES: gl.constexpr, KV_BUFS: gl.constexpr):
    """Group P of `_dkdv_group_p`, per tile of the persistent grid: the K
    buffer is released once dV has been stored through it."""
    it = 0
    for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        kv_row, row0 = _tile_rows(t, tiles_n, N_CTX)
        kb = it % KV_BUFS
        k_t = k_s.index(kb)
        dv = _dkdv_p_tile(M, k_t, q_s, do_s, pt_s, kv_ready.index(kb), (it // KV_BUFS) & 1, q_ready, do_ready,
                          q_empty, do_empty, pt_ready, pt_empty, row0, n_m, it * n_m, qk_scale, HEAD_DIM, BLOCK_M,
                          STAGES, False, True)
        _store_tile(desc_dv, kv_row, k_t, dv.to(gl.float16))
        _group_barrier()
        mbarrier.arrive(kv_empty.index(kb), count=1)
        it += 1


@gluon.jit
def _pdkdv_group_ds(desc_dk, Delta, v_s, q_s, do_s, pt_s, ds_s, kv_ready, kv_empty, q_ready, do_ready, q_empty,
                    do_empty, pt_ready, pt_empty, n_tiles, tiles_n, N_CTX, n_m, sm_scale, HEAD_DIM: gl.constexpr,
                    BLOCK_M: gl.constexpr, STAGES: gl.constexpr, KV_BUFS: gl.constexpr):
    """Group dS of `_dkdv_group_ds`, per tile of the persistent grid: the V
    buffer is released once dK has been stored through it."""
    it = 0
    for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        kv_row, row0 = _tile_rows(t, tiles_n, N_CTX)
        kb = it % KV_BUFS
        v_t = v_s.index(kb)
        dk = _dkdv_ds_tile(Delta, v_t, q_s, do_s, pt_s, ds_s, kv_ready.index(kb), (it // KV_BUFS) & 1, q_ready,
                           do_ready, q_empty, do_empty, pt_ready, pt_empty, row0, n_m, it * n_m, HEAD_DIM, BLOCK_M,
                           STAGES, False)
        _store_tile(desc_dk, kv_row, v_t, (dk * sm_scale).to(gl.float16))
        _group_barrier()
        mbarrier.arrive(kv_empty.index(kb), count=1)
        it += 1


@gluon.jit
def attn_bwd_dkdv_persistent_kernel(sm_scale, M, Delta, desc_q, desc_do, desc_k, desc_v, desc_dk, desc_dv, N_CTX,
                                    N_HZ, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                                    KV_BUFS: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                                    PRODUCER_REGS: gl.constexpr):
    gl.static_assert(desc_k.block_type.shape[0] == TILE)
    tiles_n = N_CTX // TILE
    n_tiles = tiles_n * N_HZ
    n_m = N_CTX // BLOCK_M
    qk_scale = sm_scale * LOG2E

    k_s = gl.allocate_shared_memory(desc_k.dtype, [KV_BUFS] + desc_k.block_type.shape, desc_k.layout)
    v_s = gl.allocate_shared_memory(desc_v.dtype, [KV_BUFS] + desc_v.block_type.shape, desc_v.layout)
    q_s = gl.allocate_shared_memory(desc_q.dtype, [STAGES] + desc_q.block_type.shape, desc_q.layout)
    do_s = gl.allocate_shared_memory(desc_do.dtype, [STAGES] + desc_do.block_type.shape, desc_do.layout)
    t_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([TILE, BLOCK_M], gl.float16)
    pt_s = gl.allocate_shared_memory(gl.float16, [2, TILE, BLOCK_M], t_layout)
    ds_s = gl.allocate_shared_memory(gl.float16, [2, TILE, BLOCK_M], t_layout)
    kv_ready = gl.allocate_shared_memory(gl.int64, [KV_BUFS, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [KV_BUFS, 1], mbarrier.MBarrierLayout())
    q_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    do_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    do_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    pt_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    pt_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for kb in gl.static_range(KV_BUFS):
        mbarrier.init(kv_ready.index(kb), count=1)
        mbarrier.init(kv_empty.index(kb), count=2)  # dV stored (group P), dK stored (group dS)
    for s in gl.static_range(STAGES):
        mbarrier.init(q_ready.index(s), count=1)
        mbarrier.init(do_ready.index(s), count=1)
        mbarrier.init(q_empty.index(s), count=2)
        mbarrier.init(do_empty.index(s), count=2)
    for b in gl.static_range(2):
        mbarrier.init(pt_ready.index(b), count=1)
        mbarrier.init(pt_empty.index(b), count=2)

    gl.warp_specialize(
        [(_pdkdv_group_p, (desc_dv, M, k_s, q_s, do_s, pt_s, kv_ready, kv_empty, q_ready, do_ready, q_empty,
                           do_empty, pt_ready, pt_empty, n_tiles, tiles_n, N_CTX, n_m, qk_scale, HEAD_DIM, BLOCK_M,
                           STAGES, KV_BUFS)),
         (_pdkdv_group_ds, (desc_dk, Delta, v_s, q_s, do_s, pt_s, ds_s, kv_ready, kv_empty, q_ready, do_ready,
                            q_empty, do_empty, pt_ready, pt_empty, n_tiles, tiles_n, N_CTX, n_m, sm_scale, HEAD_DIM,
                            BLOCK_M, STAGES, KV_BUFS)),
         (_pdkdv_producer, (desc_q, desc_do, desc_k, desc_v, k_s, v_s, q_s, do_s, kv_ready, kv_empty, q_ready,
                            do_ready, q_empty, do_empty, n_tiles, tiles_n, N_CTX, n_m, BLOCK_M, STAGES, KV_BUFS))],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS])

    for kb in gl.static_range(KV_BUFS):
        mbarrier.invalidate(kv_ready.index(kb))
        mbarrier.invalidate(kv_empty.index(kb))
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(q_ready.index(s))
        mbarrier.invalidate(do_ready.index(s))
        mbarrier.invalidate(q_empty.index(s))
        mbarrier.invalidate(do_empty.index(s))
    for b in gl.static_range(2):
        mbarrier.invalidate(pt_ready.index(b))
        mbarrier.invalidate(pt_empty.index(b))


# ---------------------------------------------------------------------------
# The dK/dV loop split as twill splits it at head dim 64 (SPLIT1 =
# "elementwise"): S^T and every elementwise op on one group, the three other
# wgmmas on the other.
# ---------------------------------------------------------------------------

@gluon.jit
def _ew_group_e(M, k_s, q_s, pt_s, dpd_s, ds_s, kv_ready, q_ready, q_empty, pt_ready, pt_empty, dpd_ready,
                dpd_empty, ds_ready, ds_empty, m_row, n_m, qk_scale, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                K_REGS: gl.constexpr):
    """Group E (the default partition): iteration j issues S^T = K Q^T of
    query block j, forms dS^T = P^T (dP^T - Delta) of block j - 1 under it
    (P^T of j - 1 kept in registers, dP^T - Delta from group W), then P^T of
    block j. P^T and dS^T go to shared memory for group W's dV and dK. K_REGS:
    K is read once into registers and S^T takes it as its A operand there
    (the wgmma then reads only Q from shared memory)."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_M, 16])
    cols = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, s_layout))
    s_zero = gl.zeros([TILE, BLOCK_M], gl.float32, s_layout)
    mbarrier.wait(kv_ready, 0)
    if K_REGS:
        k_op = k_s.load(gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2))
    else:
        k_op = k_s

    # Block 0: S^T and P^T alone.
    mbarrier.wait(q_ready.index(0), 0)
    s_tok = warpgroup_mma(k_op, q_s.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    m = gl.load(M + m_row + cols)
    st = warpgroup_mma_wait(0, deps=[s_tok])
    mbarrier.arrive(q_empty.index(0), count=1)
    pt = gl.exp2(st * qk_scale - gl.expand_dims(m, 0)).to(gl.float16)
    pt_s.index(0).store(pt)
    fence_async_shared()
    _group_barrier()
    mbarrier.arrive(pt_ready.index(0), count=1)

    for j in range(1, n_m):
        s = j % STAGES
        b = j % 2
        bp = (j - 1) % 2
        mbarrier.wait(q_ready.index(s), (j // STAGES) & 1)
        s_tok = warpgroup_mma(k_op, q_s.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        m = gl.load(M + m_row + j * BLOCK_M + cols)
        # dS^T of block j - 1 under S^T of block j.
        mbarrier.wait(dpd_ready.index(bp), ((j - 1) // 2) & 1)
        dpd = dpd_s.index(bp).load(s_layout).to(gl.float32)
        _group_barrier()
        mbarrier.arrive(dpd_empty.index(bp), count=1)
        dst = (pt.to(gl.float32) * dpd).to(gl.float16)
        # Slot bp last held dS^T of block j - 3, released by group W once
        # its dK completed.
        mbarrier.wait(ds_empty.index(bp), (((j - 1) // 2) & 1) ^ 1)
        ds_s.index(bp).store(dst)
        fence_async_shared()
        _group_barrier()
        mbarrier.arrive(ds_ready.index(bp), count=1)
        st = warpgroup_mma_wait(0, deps=[s_tok])
        mbarrier.arrive(q_empty.index(s), count=1)
        pt = gl.exp2(st * qk_scale - gl.expand_dims(m, 0)).to(gl.float16)
        mbarrier.wait(pt_empty.index(b), ((j // 2) & 1) ^ 1)
        pt_s.index(b).store(pt)
        fence_async_shared()
        _group_barrier()
        mbarrier.arrive(pt_ready.index(b), count=1)

    bl = (n_m - 1) % 2
    mbarrier.wait(dpd_ready.index(bl), ((n_m - 1) // 2) & 1)
    dpd = dpd_s.index(bl).load(s_layout).to(gl.float32)
    _group_barrier()
    mbarrier.arrive(dpd_empty.index(bl), count=1)
    dst = (pt.to(gl.float32) * dpd).to(gl.float16)
    mbarrier.wait(ds_empty.index(bl), (((n_m - 1) // 2) & 1) ^ 1)
    ds_s.index(bl).store(dst)
    fence_async_shared()
    _group_barrier()
    mbarrier.arrive(ds_ready.index(bl), count=1)


@gluon.jit
def _ew_group_w(desc_dk, desc_dv, Delta, k_s, v_s, q_s, do_s, pt_s, dpd_s, ds_s, kv_ready, q_ready, do_ready,
                q_empty, do_empty, pt_ready, pt_empty, dpd_ready, dpd_empty, ds_ready, ds_empty, kv_row, m_row, n_m,
                sm_scale, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr):
    """Group W (a 4-warp worker, holding dV's and dK's accumulators):
    iteration j issues dP^T = V dO^T of query block j and dV += P^T dO of
    block j - 1 (under dP^T - Delta, which it hands to group E), then
    dK += dS^T Q of block j - 1; dV and dK complete within the iteration
    (ptxas serializes every wgmma of a kernel whose accumulators stay in
    flight across the back edge: C7515), while group E's S^T of j + 1 keeps
    the tensor core busy."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_M, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    cols = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, s_layout))
    s_zero = gl.zeros([TILE, BLOCK_M], gl.float32, s_layout)
    dv = gl.zeros([TILE, HEAD_DIM], gl.float32, o_layout)
    dk = gl.zeros([TILE, HEAD_DIM], gl.float32, o_layout)
    mbarrier.wait(kv_ready, 0)

    # Block 0: dP^T and dP^T - Delta alone.
    mbarrier.wait(do_ready.index(0), 0)
    dp_tok = warpgroup_mma(v_s, do_s.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    delta = gl.load(Delta + m_row + cols)
    dpt = warpgroup_mma_wait(0, deps=[dp_tok])
    dpd_s.index(0).store((dpt - gl.expand_dims(delta, 0)).to(dpd_s.dtype))
    _group_barrier()
    mbarrier.arrive(dpd_ready.index(0), count=1)

    for j in range(1, n_m):
        s = j % STAGES
        sp = (j - 1) % STAGES
        b = j % 2
        bp = (j - 1) % 2
        mbarrier.wait(do_ready.index(s), (j // STAGES) & 1)
        dp_tok = warpgroup_mma(v_s, do_s.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(pt_ready.index(bp), ((j - 1) // 2) & 1)
        dv_tok = warpgroup_mma(pt_s.index(bp), do_s.index(sp), dv, is_async=True)
        delta = gl.load(Delta + m_row + j * BLOCK_M + cols)
        dpt = warpgroup_mma_wait(1, deps=[dp_tok])
        dpd = dpt - gl.expand_dims(delta, 0)
        # Slot b last held block j - 2's, which group E has read.
        mbarrier.wait(dpd_empty.index(b), ((j // 2) & 1) ^ 1)
        dpd_s.index(b).store(dpd.to(dpd_s.dtype))
        _group_barrier()
        mbarrier.arrive(dpd_ready.index(b), count=1)
        mbarrier.wait(ds_ready.index(bp), ((j - 1) // 2) & 1)
        mbarrier.wait(q_ready.index(sp), ((j - 1) // STAGES) & 1)
        dk_tok = warpgroup_mma(ds_s.index(bp), q_s.index(sp), dk, is_async=True)
        dv, dk = warpgroup_mma_wait(0, deps=[dv_tok, dk_tok])
        mbarrier.arrive(do_empty.index(sp), count=1)
        mbarrier.arrive(q_empty.index(sp), count=1)
        mbarrier.arrive(pt_empty.index(bp), count=1)
        mbarrier.arrive(ds_empty.index(bp), count=1)

    sl = (n_m - 1) % STAGES
    bl = (n_m - 1) % 2
    mbarrier.wait(pt_ready.index(bl), ((n_m - 1) // 2) & 1)
    dv_tok = warpgroup_mma(pt_s.index(bl), do_s.index(sl), dv, is_async=True)
    mbarrier.wait(ds_ready.index(bl), ((n_m - 1) // 2) & 1)
    mbarrier.wait(q_ready.index(sl), ((n_m - 1) // STAGES) & 1)
    dk_tok = warpgroup_mma(ds_s.index(bl), q_s.index(sl), dk, is_async=True)
    dv, dk = warpgroup_mma_wait(0, deps=[dv_tok, dk_tok])
    mbarrier.arrive(do_empty.index(sl), count=1)
    mbarrier.arrive(q_empty.index(sl), count=1)

    # Epilogue through K's and V's buffers: group E's last S^T completed
    # before its last P^T, which this group has read.
    _store_dv_dk(desc_dv, desc_dk, kv_row, k_s, v_s, dv, dk, sm_scale)


@gluon.jit
def attn_bwd_dkdv_ew_kernel(sm_scale, M, Delta, desc_q, desc_do, desc_k, desc_v, desc_dk, desc_dv, N_CTX,
                            HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                            K_REGS: gl.constexpr, DPD_F16: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                            PRODUCER_REGS: gl.constexpr):
    gl.static_assert(desc_k.block_type.shape[0] == TILE)
    pid = gl.program_id(0)
    off_hz = gl.program_id(1)
    row0 = off_hz * N_CTX
    kv_row = row0 + pid * TILE
    n_m = N_CTX // BLOCK_M
    qk_scale = sm_scale * LOG2E

    k_s = gl.allocate_shared_memory(desc_k.dtype, desc_k.block_type.shape, desc_k.layout)
    v_s = gl.allocate_shared_memory(desc_v.dtype, desc_v.block_type.shape, desc_v.layout)
    q_s = gl.allocate_shared_memory(desc_q.dtype, [STAGES] + desc_q.block_type.shape, desc_q.layout)
    do_s = gl.allocate_shared_memory(desc_do.dtype, [STAGES] + desc_do.block_type.shape, desc_do.layout)
    t_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([TILE, BLOCK_M], gl.float16)
    pt_s = gl.allocate_shared_memory(gl.float16, [2, TILE, BLOCK_M], t_layout)
    ds_s = gl.allocate_shared_memory(gl.float16, [2, TILE, BLOCK_M], t_layout)
    if DPD_F16:
        dpd_s = gl.allocate_shared_memory(gl.float16, [2, TILE, BLOCK_M], t_layout)
    else:
        f_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([TILE, BLOCK_M], gl.float32)
        dpd_s = gl.allocate_shared_memory(gl.float32, [2, TILE, BLOCK_M], f_layout)
    kv_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    do_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    do_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    pt_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    pt_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    dpd_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    dpd_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    ds_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    ds_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_ready, count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(q_ready.index(s), count=1)
        mbarrier.init(do_ready.index(s), count=1)
        mbarrier.init(q_empty.index(s), count=2)  # S^T (group E) and dK (group W)
        mbarrier.init(do_empty.index(s), count=1)  # dP^T and dV (group W)
    for b in gl.static_range(2):
        mbarrier.init(pt_ready.index(b), count=1)
        mbarrier.init(pt_empty.index(b), count=1)  # dV (group W)
        mbarrier.init(dpd_ready.index(b), count=1)
        mbarrier.init(dpd_empty.index(b), count=1)  # dS^T (group E)
        mbarrier.init(ds_ready.index(b), count=1)
        mbarrier.init(ds_empty.index(b), count=1)  # dK (group W)

    gl.warp_specialize(
        [(_ew_group_e, (M, k_s, q_s, pt_s, dpd_s, ds_s, kv_ready, q_ready, q_empty, pt_ready, pt_empty, dpd_ready,
                        dpd_empty, ds_ready, ds_empty, row0, n_m, qk_scale, BLOCK_M, STAGES, K_REGS)),
         (_ew_group_w, (desc_dk, desc_dv, Delta, k_s, v_s, q_s, do_s, pt_s, dpd_s, ds_s, kv_ready, q_ready,
                        do_ready, q_empty, do_empty, pt_ready, pt_empty, dpd_ready, dpd_empty, ds_ready, ds_empty,
                        kv_row, row0, n_m, sm_scale, HEAD_DIM, BLOCK_M, STAGES)),
         (_dkdv_producer, (desc_q, desc_do, desc_k, desc_v, k_s, v_s, q_s, do_s, kv_ready, q_ready, do_ready,
                           q_empty, do_empty, kv_row, row0, n_m, BLOCK_M, STAGES))],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS])

    mbarrier.invalidate(kv_ready)
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(q_ready.index(s))
        mbarrier.invalidate(do_ready.index(s))
        mbarrier.invalidate(q_empty.index(s))
        mbarrier.invalidate(do_empty.index(s))
    for b in gl.static_range(2):
        mbarrier.invalidate(pt_ready.index(b))
        mbarrier.invalidate(pt_empty.index(b))
        mbarrier.invalidate(dpd_ready.index(b))
        mbarrier.invalidate(dpd_empty.index(b))
        mbarrier.invalidate(ds_ready.index(b))
        mbarrier.invalidate(ds_empty.index(b))


# ---------------------------------------------------------------------------
# The dK/dV loop on one compute group (SPLIT1 = "single"): a program's
# whole chain on one 4-warp group beside the TMA producer, small enough in
# registers and shared memory for two CTAs per SM at head dim 64.
# ---------------------------------------------------------------------------

@gluon.jit
def _single_dkdv_pipelined(desc_dk, desc_dv, M, Delta, k_s, v_s, q_s, do_s, pt_s, ds_s, kv_ready, q_ready,
                            do_ready, q_empty, do_empty, kv_row, m_row, n_m, qk_scale, sm_scale,
                            HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr):
    """The one-group dK/dV loop pipelined (PIPE): iteration j issues S^T and
    dP^T of query block j + 1, then dV += P^T dO and dK += dS^T Q of block
    j, and forms P^T and dS^T of block j + 1 under dV and dK (2-slot P^T
    and dS^T buffers); dV and dK complete within the iteration (C7515)."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_M, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    cols = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, s_layout))
    s_zero = gl.zeros([TILE, BLOCK_M], gl.float32, s_layout)
    dv = gl.zeros([TILE, HEAD_DIM], gl.float32, o_layout)
    dk = gl.zeros([TILE, HEAD_DIM], gl.float32, o_layout)
    mbarrier.wait(kv_ready, 0)
    # Block 0's S^T, dP^T, P^T and dS^T.
    mbarrier.wait(q_ready.index(0), 0)
    s_tok = warpgroup_mma(k_s, q_s.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    mbarrier.wait(do_ready.index(0), 0)
    dp_tok = warpgroup_mma(v_s, do_s.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    m = gl.load(M + m_row + cols)
    delta = gl.load(Delta + m_row + cols)
    st = warpgroup_mma_wait(1, deps=[s_tok])
    pt = gl.exp2(st * qk_scale - gl.expand_dims(m, 0))
    dpt = warpgroup_mma_wait(0, deps=[dp_tok])
    dst = pt * (dpt - gl.expand_dims(delta, 0))
    pt_s.index(0).store(pt.to(gl.float16))
    ds_s.index(0).store(dst.to(gl.float16))
    fence_async_shared()
    _group_barrier()
    for j in range(0, n_m - 1):
        s = j % STAGES
        sn = (j + 1) % STAGES
        b = j % 2
        bn = (j + 1) % 2
        ph = ((j + 1) // STAGES) & 1
        mbarrier.wait(q_ready.index(sn), ph)
        s_tok = warpgroup_mma(k_s, q_s.index(sn).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(do_ready.index(sn), ph)
        dp_tok = warpgroup_mma(v_s, do_s.index(sn).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        dv_tok = warpgroup_mma(pt_s.index(b), do_s.index(s), dv, is_async=True)
        dk_tok = warpgroup_mma(ds_s.index(b), q_s.index(s), dk, is_async=True)
        m = gl.load(M + m_row + (j + 1) * BLOCK_M + cols)
        delta = gl.load(Delta + m_row + (j + 1) * BLOCK_M + cols)
        st = warpgroup_mma_wait(3, deps=[s_tok])
        pt = gl.exp2(st * qk_scale - gl.expand_dims(m, 0))
        dpt = warpgroup_mma_wait(2, deps=[dp_tok])
        dst = pt * (dpt - gl.expand_dims(delta, 0))
        # Slot bn last held block j - 1's, whose dV and dK completed in
        # the previous iteration.
        pt_s.index(bn).store(pt.to(gl.float16))
        ds_s.index(bn).store(dst.to(gl.float16))
        fence_async_shared()
        _group_barrier()
        dv, dk = warpgroup_mma_wait(0, deps=[dv_tok, dk_tok])
        mbarrier.arrive(q_empty.index(s), count=1)
        mbarrier.arrive(do_empty.index(s), count=1)
    sl = (n_m - 1) % STAGES
    bl = (n_m - 1) % 2
    dv_tok = warpgroup_mma(pt_s.index(bl), do_s.index(sl), dv, is_async=True)
    dk_tok = warpgroup_mma(ds_s.index(bl), q_s.index(sl), dk, is_async=True)
    dv, dk = warpgroup_mma_wait(0, deps=[dv_tok, dk_tok])
    mbarrier.arrive(q_empty.index(sl), count=1)
    mbarrier.arrive(do_empty.index(sl), count=1)

    # Epilogue through K's and V's buffers (this group is their only reader).
    _store_dv_dk(desc_dv, desc_dk, kv_row, k_s, v_s, dv, dk, sm_scale)


@gluon.jit
def _single_dkdv_group(desc_dk, desc_dv, M, Delta, k_s, v_s, q_s, do_s, pt_s, ds_s, kv_ready, q_ready, do_ready,
                       q_empty, do_empty, kv_row, m_row, n_m, qk_scale, sm_scale, HEAD_DIM: gl.constexpr,
                       BLOCK_M: gl.constexpr, STAGES: gl.constexpr, PIPE: gl.constexpr):
    """The compute group (the default partition): pipelined
    (`_single_dkdv_pipelined`), or without PIPE the loop as fa_bwd writes it
    (`_dkdv_serial`: S^T, dP^T, P^T, dS^T, dV, dK of block j, each wgmma
    waited in its iteration)."""
    if PIPE:
        _single_dkdv_pipelined(desc_dk, desc_dv, M, Delta, k_s, v_s, q_s, do_s, pt_s, ds_s, kv_ready, q_ready,
                               do_ready, q_empty, do_empty, kv_row, m_row, n_m, qk_scale, sm_scale, HEAD_DIM, BLOCK_M,
                               STAGES)
    else:
        _dkdv_serial(desc_dk, desc_dv, M, Delta, k_s, v_s, q_s, do_s, pt_s.index(0), ds_s.index(0), kv_ready, q_ready,
                     do_ready, q_empty, do_empty, kv_row, m_row, n_m, qk_scale, sm_scale, 0, TILE, HEAD_DIM, BLOCK_M,
                     STAGES)


@gluon.jit
def attn_bwd_dkdv_single_kernel(sm_scale, M, Delta, desc_q, desc_do, desc_k, desc_v, desc_dk, desc_dv, N_CTX,
                                HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                                PIPE: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    gl.static_assert(desc_k.block_type.shape[0] == TILE)
    pid = gl.program_id(0)
    off_hz = gl.program_id(1)
    row0 = off_hz * N_CTX
    kv_row = row0 + pid * TILE
    n_m = N_CTX // BLOCK_M
    qk_scale = sm_scale * LOG2E

    k_s = gl.allocate_shared_memory(desc_k.dtype, desc_k.block_type.shape, desc_k.layout)
    v_s = gl.allocate_shared_memory(desc_v.dtype, desc_v.block_type.shape, desc_v.layout)
    q_s = gl.allocate_shared_memory(desc_q.dtype, [STAGES] + desc_q.block_type.shape, desc_q.layout)
    do_s = gl.allocate_shared_memory(desc_do.dtype, [STAGES] + desc_do.block_type.shape, desc_do.layout)
    t_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([TILE, BLOCK_M], gl.float16)
    pt_s = gl.allocate_shared_memory(gl.float16, [2 if PIPE else 1, TILE, BLOCK_M], t_layout)
    ds_s = gl.allocate_shared_memory(gl.float16, [2 if PIPE else 1, TILE, BLOCK_M], t_layout)
    kv_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    do_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    do_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_ready, count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(q_ready.index(s), count=1)
        mbarrier.init(do_ready.index(s), count=1)
        mbarrier.init(q_empty.index(s), count=1)
        mbarrier.init(do_empty.index(s), count=1)

    gl.warp_specialize(
        [(_single_dkdv_group, (desc_dk, desc_dv, M, Delta, k_s, v_s, q_s, do_s, pt_s, ds_s, kv_ready, q_ready,
                               do_ready, q_empty, do_empty, kv_row, row0, n_m, qk_scale, sm_scale, HEAD_DIM, BLOCK_M,
                               STAGES, PIPE)),
         (_dkdv_producer, (desc_q, desc_do, desc_k, desc_v, k_s, v_s, q_s, do_s, kv_ready, q_ready, do_ready,
                           q_empty, do_empty, kv_row, row0, n_m, BLOCK_M, STAGES))],
        [1],
        [PRODUCER_REGS])

    mbarrier.invalidate(kv_ready)
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(q_ready.index(s))
        mbarrier.invalidate(do_ready.index(s))
        mbarrier.invalidate(q_empty.index(s))
        mbarrier.invalidate(do_empty.index(s))


# ---------------------------------------------------------------------------
# The dQ loop.
# ---------------------------------------------------------------------------

@gluon.jit
def _dq_producer(desc_q, desc_do, desc_k, desc_v, q_s, do_s, k_s, v_s, qd_ready, k_ready, v_ready, k_empty,
                 v_empty, q_row, row0, n_n, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
    """One warp: the program's Q and dO tiles, then K and V of every key
    block into their rings."""
    mbarrier.expect(qd_ready, 2 * desc_q.block_type.nbytes)
    _tma_load(desc_q, [q_row, 0], qd_ready, q_s)
    _tma_load(desc_do, [q_row, 0], qd_ready, do_s)
    for j in range(n_n):
        _ring_load_pair(desc_k, desc_v, k_s, v_s, k_ready, v_ready, k_empty, v_empty, row0 + j * BLOCK_N, j, STAGES)


@gluon.jit
def _dq_group_p(M, Delta, q_s, do_s, k_s, v_s, ds_s, qd_ready, k_ready, v_ready, k_empty, v_empty, ds_ready,
                ds_empty, m_row, n_n, qk_scale, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
    """Group P (the default partition): S = Q K^T and dP = dO V^T of key
    block j, the exponentials of P under dP, dS = P (dP - Delta) into
    shared memory (a ring of two) for group dQ."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    rows = gl.arange(0, TILE, layout=gl.SliceLayout(1, s_layout))
    s_zero = gl.zeros([TILE, BLOCK_N], gl.float32, s_layout)
    mbarrier.wait(qd_ready, 0)
    m = gl.expand_dims(gl.load(M + m_row + rows), 1)
    delta = gl.expand_dims(gl.load(Delta + m_row + rows), 1)
    for j in range(n_n):
        s = j % STAGES
        ph = (j // STAGES) & 1
        b = j % 2
        mbarrier.wait(k_ready.index(s), ph)
        s_tok = warpgroup_mma(q_s, k_s.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(v_ready.index(s), ph)
        dp_tok = warpgroup_mma(do_s, v_s.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        st = warpgroup_mma_wait(1, deps=[s_tok])
        mbarrier.arrive(k_empty.index(s), count=1)
        p = gl.exp2(st * qk_scale - m)
        dp = warpgroup_mma_wait(0, deps=[dp_tok])
        mbarrier.arrive(v_empty.index(s), count=1)
        ds = p * (dp - delta)
        mbarrier.wait(ds_empty.index(b), ((j // 2) & 1) ^ 1)
        ds_s.index(b).store(ds.to(gl.float16))
        fence_async_shared()
        _group_barrier()
        mbarrier.arrive(ds_ready.index(b), count=1)


@gluon.jit
def _dq_p_step(j, q_s, do_s, k_s, v_s, ds_s, k_ready, v_ready, k_empty, v_empty, ds_ready, ds_empty, s_tok, s_zero,
               m, delta, qk_scale, STAGES: gl.constexpr, NEXT: gl.constexpr):
    """Iteration j of group P with S one block ahead (EARLY_S): S of block j
    is in flight; issue dP of block j, form P, then (NEXT) issue S of
    block j + 1 before dS of block j, so that it runs under dS's arithmetic
    and the store. Returns the next S's token (NEXT) or None."""
    s = j % STAGES
    b = j % 2
    mbarrier.wait(v_ready.index(s), (j // STAGES) & 1)
    dp_tok = warpgroup_mma(do_s, v_s.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    st = warpgroup_mma_wait(1, deps=[s_tok])
    mbarrier.arrive(k_empty.index(s), count=1)
    p = gl.exp2(st * qk_scale - m)
    dp = warpgroup_mma_wait(0, deps=[dp_tok])
    mbarrier.arrive(v_empty.index(s), count=1)
    next_tok = None
    if NEXT:
        sn = (j + 1) % STAGES
        mbarrier.wait(k_ready.index(sn), ((j + 1) // STAGES) & 1)
        next_tok = warpgroup_mma(q_s, k_s.index(sn).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    ds = p * (dp - delta)
    mbarrier.wait(ds_empty.index(b), ((j // 2) & 1) ^ 1)
    ds_s.index(b).store(ds.to(gl.float16))
    fence_async_shared()
    _group_barrier()
    mbarrier.arrive(ds_ready.index(b), count=1)
    return next_tok


@gluon.jit
def _dq_group_p_early(M, Delta, q_s, do_s, k_s, v_s, ds_s, qd_ready, k_ready, v_ready, k_empty, v_empty, ds_ready,
                      ds_empty, m_row, n_n, qk_scale, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
    """Group P with S issued one block ahead (EARLY_S; see _dq_p_step)."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    rows = gl.arange(0, TILE, layout=gl.SliceLayout(1, s_layout))
    s_zero = gl.zeros([TILE, BLOCK_N], gl.float32, s_layout)
    mbarrier.wait(qd_ready, 0)
    m = gl.expand_dims(gl.load(M + m_row + rows), 1)
    delta = gl.expand_dims(gl.load(Delta + m_row + rows), 1)
    mbarrier.wait(k_ready.index(0), 0)
    s_tok = warpgroup_mma(q_s, k_s.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    for j in range(n_n - 1):
        s_tok = _dq_p_step(j, q_s, do_s, k_s, v_s, ds_s, k_ready, v_ready, k_empty, v_empty, ds_ready, ds_empty,
                           s_tok, s_zero, m, delta, qk_scale, STAGES, True)
    _dq_p_step(n_n - 1, q_s, do_s, k_s, v_s, ds_s, k_ready, v_ready, k_empty, v_empty, ds_ready, ds_empty, s_tok,
               s_zero, m, delta, qk_scale, STAGES, False)


@gluon.jit
def _dq_group_dq(desc_dq, q_s, k_s, ds_s, out_s, k_ready, k_empty, ds_ready, ds_empty, q_row, n_n, sm_scale,
                 HEAD_DIM: gl.constexpr, STAGES: gl.constexpr):
    """Group dQ (a 4-warp worker): dQ += dS K of key block j, keeping one
    wgmma in flight: block j's is issued before block j - 1's is waited
    for (and its dS slot and K slot released)."""
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    dq = gl.zeros([TILE, HEAD_DIM], gl.float32, o_layout)
    for j in range(n_n):
        s = j % STAGES
        b = j % 2
        mbarrier.wait(ds_ready.index(b), (j // 2) & 1)
        mbarrier.wait(k_ready.index(s), (j // STAGES) & 1)
        dq_tok = warpgroup_mma(ds_s.index(b), k_s.index(s), dq, is_async=True)
        dq = warpgroup_mma_wait(1, deps=[dq_tok])
        if j > 0:
            mbarrier.arrive(ds_empty.index((j - 1) % 2), count=1)
            mbarrier.arrive(k_empty.index((j - 1) % STAGES), count=1)
    dq = warpgroup_mma_wait(0, deps=[dq])
    mbarrier.arrive(ds_empty.index((n_n - 1) % 2), count=1)
    mbarrier.arrive(k_empty.index((n_n - 1) % STAGES), count=1)

    out_s.store((dq * sm_scale).to(gl.float16))
    fence_async_shared()
    _group_barrier()
    _tma_store(desc_dq, [q_row, 0], out_s)
    tma.store_wait(0)


@gluon.jit
def attn_bwd_dq_gluon_kernel(sm_scale, M, Delta, desc_q, desc_do, desc_k, desc_v, desc_dq, N_CTX,
                             HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                             EARLY_S: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    gl.static_assert(desc_q.block_type.shape[0] == TILE)
    pid = gl.program_id(0)
    off_hz = gl.program_id(1)
    row0 = off_hz * N_CTX
    q_row = row0 + pid * TILE
    n_n = N_CTX // BLOCK_N
    qk_scale = sm_scale * LOG2E

    q_s = gl.allocate_shared_memory(desc_q.dtype, desc_q.block_type.shape, desc_q.layout)
    do_s = gl.allocate_shared_memory(desc_do.dtype, desc_do.block_type.shape, desc_do.layout)
    out_s = gl.allocate_shared_memory(desc_dq.dtype, desc_dq.block_type.shape, desc_dq.layout)
    k_s = gl.allocate_shared_memory(desc_k.dtype, [STAGES] + desc_k.block_type.shape, desc_k.layout)
    v_s = gl.allocate_shared_memory(desc_v.dtype, [STAGES] + desc_v.block_type.shape, desc_v.layout)
    t_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([TILE, BLOCK_N], gl.float16)
    ds_s = gl.allocate_shared_memory(gl.float16, [2, TILE, BLOCK_N], t_layout)
    qd_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ds_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    ds_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(qd_ready, count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(s), count=1)
        mbarrier.init(v_ready.index(s), count=1)
        mbarrier.init(k_empty.index(s), count=2)  # S (group P) and dQ (group dQ)
        mbarrier.init(v_empty.index(s), count=1)  # dP (group P)
    for b in gl.static_range(2):
        mbarrier.init(ds_ready.index(b), count=1)
        mbarrier.init(ds_empty.index(b), count=1)

    gl.warp_specialize(
        [(_dq_group_p_early if EARLY_S else _dq_group_p, (M, Delta, q_s, do_s, k_s, v_s, ds_s, qd_ready, k_ready, v_ready, k_empty, v_empty, ds_ready,
                        ds_empty, q_row, n_n, qk_scale, BLOCK_N, STAGES)),
         (_dq_group_dq, (desc_dq, q_s, k_s, ds_s, out_s, k_ready, k_empty, ds_ready, ds_empty, q_row, n_n, sm_scale,
                         HEAD_DIM, STAGES)),
         (_dq_producer, (desc_q, desc_do, desc_k, desc_v, q_s, do_s, k_s, v_s, qd_ready, k_ready, v_ready, k_empty,
                         v_empty, q_row, row0, n_n, BLOCK_N, STAGES))],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS])

    mbarrier.invalidate(qd_ready)
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(k_ready.index(s))
        mbarrier.invalidate(v_ready.index(s))
        mbarrier.invalidate(k_empty.index(s))
        mbarrier.invalidate(v_empty.index(s))
    for b in gl.static_range(2):
        mbarrier.invalidate(ds_ready.index(b))
        mbarrier.invalidate(ds_empty.index(b))


# ---------------------------------------------------------------------------
# The split by rows (SPLIT = "rows"): each compute group owns 64 of the
# program's 128 rows and runs the whole loop body on them, as the forward's
# sub-tiles do (fa_fwd_gluon.py).
# ---------------------------------------------------------------------------

@gluon.jit
def _rows_dkdv_producer(desc_q, desc_do, desc_k, desc_v, k_s, v_s, q_s, do_s, kv_ready, q_ready, do_ready, q_empty,
                        do_empty, kv_row, row0, n_m, BLOCK_M: gl.constexpr, STAGES: gl.constexpr):
    """One warp: each group's halves of K and V, then Q and dO of every
    query block into rings both groups read."""
    SUB: gl.constexpr = desc_k.block_type.shape[0]
    for c in gl.static_range(2):
        mbarrier.expect(kv_ready.index(c), 2 * desc_k.block_type.nbytes)
        _tma_load(desc_k, [kv_row + c * SUB, 0], kv_ready.index(c), k_s.index(c))
        _tma_load(desc_v, [kv_row + c * SUB, 0], kv_ready.index(c), v_s.index(c))
    for j in range(n_m):
        _ring_load_pair(desc_q, desc_do, q_s, do_s, q_ready, do_ready, q_empty, do_empty, row0 + j * BLOCK_M, j, STAGES)


@gluon.jit
def _dkdv_serial(desc_dk, desc_dv, M, Delta, k_t, v_t, q_s, do_s, pt_b, ds_b, kv_ready, q_ready, do_ready, q_empty,
                 do_empty, kv_row, m_row, n_m, qk_scale, sm_scale, C: gl.constexpr, SUB: gl.constexpr,
                 HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr):
    """The dK/dV loop as fa_bwd writes it, for the SUB key rows in `k_t`,
    `v_t` (rows kv_row + C * SUB on, ready on `kv_ready`): iteration j issues S^T and dP^T of query
    block j, forms P^T under dP^T, then dS^T, writes both to the group's
    buffers `pt_b`, `ds_b`, and issues dV += P^T dO and dK += dS^T Q,
    which complete before the next iteration (ptxas serializes every wgmma
    of the kernel when both accumulators stay in flight across the loop's
    back edge: C7515, "non wgmma instructions defining accumulator
    registers"). Then dV and dK go out through `k_t` and `v_t` (no other
    group reads them)."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_M, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    cols = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, s_layout))
    s_zero = gl.zeros([SUB, BLOCK_M], gl.float32, s_layout)
    dv = gl.zeros([SUB, HEAD_DIM], gl.float32, o_layout)
    dk = gl.zeros([SUB, HEAD_DIM], gl.float32, o_layout)
    mbarrier.wait(kv_ready, 0)
    for j in range(n_m):
        s = j % STAGES
        ph = (j // STAGES) & 1
        mbarrier.wait(q_ready.index(s), ph)
        s_tok = warpgroup_mma(k_t, q_s.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(do_ready.index(s), ph)
        dp_tok = warpgroup_mma(v_t, do_s.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        m = gl.load(M + m_row + j * BLOCK_M + cols)
        delta = gl.load(Delta + m_row + j * BLOCK_M + cols)
        st = warpgroup_mma_wait(1, deps=[s_tok])
        pt = gl.exp2(st * qk_scale - gl.expand_dims(m, 0))
        dpt = warpgroup_mma_wait(0, deps=[dp_tok])
        dst = pt * (dpt - gl.expand_dims(delta, 0))
        pt_b.store(pt.to(gl.float16))
        ds_b.store(dst.to(gl.float16))
        fence_async_shared()
        _group_barrier()
        dv_tok = warpgroup_mma(pt_b, do_s.index(s), dv, is_async=True)
        dk_tok = warpgroup_mma(ds_b, q_s.index(s), dk, is_async=True)
        dv, dk = warpgroup_mma_wait(0, deps=[dv_tok, dk_tok])
        mbarrier.arrive(q_empty.index(s), count=1)
        mbarrier.arrive(do_empty.index(s), count=1)

    _store_dv_dk(desc_dv, desc_dk, kv_row + C * SUB, k_t, v_t, dv, dk, sm_scale)


@gluon.jit
def _rows_dkdv_group(desc_dk, desc_dv, M, Delta, k_s, v_s, q_s, do_s, pt_s, ds_s, kv_ready, q_ready, do_ready,
                     q_empty, do_empty, kv_row, m_row, n_m, qk_scale, sm_scale, C: gl.constexpr,
                     HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr):
    """Compute group C: key rows [C * 64, C * 64 + 64) of the program's
    tile, the loop as written (`_dkdv_serial`); the other group's wgmmas
    fill the tensor core while this one forms P^T and dS^T."""
    SUB: gl.constexpr = desc_dk.block_type.shape[0]
    _dkdv_serial(desc_dk, desc_dv, M, Delta, k_s.index(C), v_s.index(C), q_s, do_s, pt_s.index(C), ds_s.index(C),
                 kv_ready.index(C), q_ready, do_ready, q_empty, do_empty, kv_row, m_row, n_m, qk_scale, sm_scale, C,
                 SUB, HEAD_DIM, BLOCK_M, STAGES)


@gluon.jit
def attn_bwd_dkdv_rows_kernel(sm_scale, M, Delta, desc_q, desc_do, desc_k, desc_v, desc_dk, desc_dv, N_CTX,
                              HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                              CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    gl.static_assert(2 * desc_k.block_type.shape[0] == TILE)
    pid = gl.program_id(0)
    off_hz = gl.program_id(1)
    row0 = off_hz * N_CTX
    kv_row = row0 + pid * TILE
    n_m = N_CTX // BLOCK_M
    qk_scale = sm_scale * LOG2E

    k_s = gl.allocate_shared_memory(desc_k.dtype, [2] + desc_k.block_type.shape, desc_k.layout)
    v_s = gl.allocate_shared_memory(desc_v.dtype, [2] + desc_v.block_type.shape, desc_v.layout)
    q_s = gl.allocate_shared_memory(desc_q.dtype, [STAGES] + desc_q.block_type.shape, desc_q.layout)
    do_s = gl.allocate_shared_memory(desc_do.dtype, [STAGES] + desc_do.block_type.shape, desc_do.layout)
    # Each group's P^T and dS^T, the A operands of its dV and dK.
    t_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([TILE // 2, BLOCK_M], gl.float16)
    pt_s = gl.allocate_shared_memory(gl.float16, [2, TILE // 2, BLOCK_M], t_layout)
    ds_s = gl.allocate_shared_memory(gl.float16, [2, TILE // 2, BLOCK_M], t_layout)
    kv_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    do_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    do_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(2):
        mbarrier.init(kv_ready.index(c), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(q_ready.index(s), count=1)
        mbarrier.init(do_ready.index(s), count=1)
        mbarrier.init(q_empty.index(s), count=2)  # one arrival per group
        mbarrier.init(do_empty.index(s), count=2)

    gl.warp_specialize(
        [(_rows_dkdv_group, (desc_dk, desc_dv, M, Delta, k_s, v_s, q_s, do_s, pt_s, ds_s, kv_ready, q_ready,
                             do_ready, q_empty, do_empty, kv_row, row0, n_m, qk_scale, sm_scale, 0, HEAD_DIM, BLOCK_M,
                             STAGES)),
         (_rows_dkdv_group, (desc_dk, desc_dv, M, Delta, k_s, v_s, q_s, do_s, pt_s, ds_s, kv_ready, q_ready,
                             do_ready, q_empty, do_empty, kv_row, row0, n_m, qk_scale, sm_scale, 1, HEAD_DIM, BLOCK_M,
                             STAGES)),
         (_rows_dkdv_producer, (desc_q, desc_do, desc_k, desc_v, k_s, v_s, q_s, do_s, kv_ready, q_ready, do_ready,
                                q_empty, do_empty, kv_row, row0, n_m, BLOCK_M, STAGES))],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS])

    for c in gl.static_range(2):
        mbarrier.invalidate(kv_ready.index(c))
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(q_ready.index(s))
        mbarrier.invalidate(do_ready.index(s))
        mbarrier.invalidate(q_empty.index(s))
        mbarrier.invalidate(do_empty.index(s))


@gluon.jit
def _rows_dq_producer(desc_q, desc_do, desc_k, desc_v, q_s, do_s, k_s, v_s, qd_ready, k_ready, v_ready, k_empty,
                      v_empty, q_row, row0, n_n, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
    """One warp: each group's halves of Q and dO, then K and V of every key
    block into rings both groups read."""
    SUB: gl.constexpr = desc_q.block_type.shape[0]
    for c in gl.static_range(2):
        mbarrier.expect(qd_ready.index(c), 2 * desc_q.block_type.nbytes)
        _tma_load(desc_q, [q_row + c * SUB, 0], qd_ready.index(c), q_s.index(c))
        _tma_load(desc_do, [q_row + c * SUB, 0], qd_ready.index(c), do_s.index(c))
    for j in range(n_n):
        _ring_load_pair(desc_k, desc_v, k_s, v_s, k_ready, v_ready, k_empty, v_empty, row0 + j * BLOCK_N, j, STAGES)


@gluon.jit
def _rows_dq_tile(M, Delta, q_s, do_s, i, k_s, v_s, qd_ready, qd_phase, k_ready, v_ready, k_empty, v_empty, m_row,
                  n_n, g0, qk_scale, C: gl.constexpr, SUB: gl.constexpr, HEAD_DIM: gl.constexpr,
                  BLOCK_N: gl.constexpr, STAGES: gl.constexpr, DQ_INFLIGHT: gl.constexpr):
    """Compute group C's loop over query rows [m_row + C * SUB, + SUB) (Q and
    dO in buffer i of `q_s`, `do_s`, ready at `qd_phase` of `qd_ready`), its ring
    iterations numbered from g0: iteration j issues S and dP of key block
    j, forms P under dP, then dS, and issues dQ += dS K (A from registers),
    which completes within the iteration, as in twill's schedule (one
    stage); the other group's wgmmas fill the tensor core meanwhile.
    Returns dQ (unscaled). DQ_INFLIGHT (an ablation) leaves it in flight
    until the next iteration's first wait instead, which makes ptxas
    serialize every wgmma of the kernel at 128-key steps (C7515)."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    rows = gl.arange(0, SUB, layout=gl.SliceLayout(1, s_layout))
    s_zero = gl.zeros([SUB, BLOCK_N], gl.float32, s_layout)
    if DQ_INFLIGHT:
        dq = warpgroup_mma_init(gl.zeros([SUB, HEAD_DIM], gl.float32, o_layout))
    else:
        dq = gl.zeros([SUB, HEAD_DIM], gl.float32, o_layout)
    q_c = q_s.index(i)
    do_c = do_s.index(i)
    m = gl.expand_dims(gl.load(M + m_row + C * SUB + rows), 1)
    delta = gl.expand_dims(gl.load(Delta + m_row + C * SUB + rows), 1)
    mbarrier.wait(qd_ready.index(i), qd_phase)
    for j in range(n_n):
        g = g0 + j
        s = g % STAGES
        ph = (g // STAGES) & 1
        mbarrier.wait(k_ready.index(s), ph)
        s_tok = warpgroup_mma(q_c, k_s.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(v_ready.index(s), ph)
        dp_tok = warpgroup_mma(do_c, v_s.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        if DQ_INFLIGHT:
            st, dq = warpgroup_mma_wait(1, deps=[s_tok, dq])
            if j > 0:
                mbarrier.arrive(k_empty.index((g - 1) % STAGES), count=1)
        else:
            st = warpgroup_mma_wait(1, deps=[s_tok])
        p = gl.exp2(st * qk_scale - m)
        dp = warpgroup_mma_wait(0, deps=[dp_tok])
        mbarrier.arrive(v_empty.index(s), count=1)
        ds16 = gl.convert_layout((p * (dp - delta)).to(gl.float16), a_layout)
        if DQ_INFLIGHT:
            dq = warpgroup_mma(ds16, k_s.index(s), dq, is_async=True)
        else:
            dq_tok = warpgroup_mma(ds16, k_s.index(s), dq, is_async=True)
            dq, ds16 = warpgroup_mma_wait(0, deps=[dq_tok, ds16])
            mbarrier.arrive(k_empty.index(s), count=1)
    if DQ_INFLIGHT:
        dq = warpgroup_mma_wait(0, deps=[dq])
        mbarrier.arrive(k_empty.index((g0 + n_n - 1) % STAGES), count=1)
    return dq


@gluon.jit
def _rows_dq_group(desc_dq, M, Delta, q_s, do_s, k_s, v_s, qd_ready, k_ready, v_ready, k_empty, v_empty, q_row,
                   m_row, n_n, qk_scale, sm_scale, C: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
                   STAGES: gl.constexpr, DQ_INFLIGHT: gl.constexpr):
    """Compute group C: query rows [C * 64, C * 64 + 64) (`_rows_dq_tile`),
    then dQ through this group's Q half (no other group reads it)."""
    SUB: gl.constexpr = desc_dq.block_type.shape[0]
    dq = _rows_dq_tile(M, Delta, q_s, do_s, C, k_s, v_s, qd_ready, 0, k_ready, v_ready, k_empty, v_empty, m_row, n_n,
                       0, qk_scale, C, SUB, HEAD_DIM, BLOCK_N, STAGES, DQ_INFLIGHT)
    _store_tile(desc_dq, q_row + C * SUB, q_s.index(C), (dq * sm_scale).to(gl.float16))


@gluon.jit
def attn_bwd_dq_rows_kernel(sm_scale, M, Delta, desc_q, desc_do, desc_k, desc_v, desc_dq, N_CTX,
                            HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                            DQ_INFLIGHT: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    gl.static_assert(2 * desc_q.block_type.shape[0] == TILE)
    pid = gl.program_id(0)
    off_hz = gl.program_id(1)
    row0 = off_hz * N_CTX
    q_row = row0 + pid * TILE
    n_n = N_CTX // BLOCK_N
    qk_scale = sm_scale * LOG2E

    q_s = gl.allocate_shared_memory(desc_q.dtype, [2] + desc_q.block_type.shape, desc_q.layout)
    do_s = gl.allocate_shared_memory(desc_do.dtype, [2] + desc_do.block_type.shape, desc_do.layout)
    k_s = gl.allocate_shared_memory(desc_k.dtype, [STAGES] + desc_k.block_type.shape, desc_k.layout)
    v_s = gl.allocate_shared_memory(desc_v.dtype, [STAGES] + desc_v.block_type.shape, desc_v.layout)
    qd_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(2):
        mbarrier.init(qd_ready.index(c), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(s), count=1)
        mbarrier.init(v_ready.index(s), count=1)
        mbarrier.init(k_empty.index(s), count=2)  # one arrival per group
        mbarrier.init(v_empty.index(s), count=2)

    gl.warp_specialize(
        [(_rows_dq_group, (desc_dq, M, Delta, q_s, do_s, k_s, v_s, qd_ready, k_ready, v_ready, k_empty, v_empty,
                           q_row, q_row, n_n, qk_scale, sm_scale, 0, HEAD_DIM, BLOCK_N, STAGES, DQ_INFLIGHT)),
         (_rows_dq_group, (desc_dq, M, Delta, q_s, do_s, k_s, v_s, qd_ready, k_ready, v_ready, k_empty, v_empty,
                           q_row, q_row, n_n, qk_scale, sm_scale, 1, HEAD_DIM, BLOCK_N, STAGES, DQ_INFLIGHT)),
         (_rows_dq_producer, (desc_q, desc_do, desc_k, desc_v, q_s, do_s, k_s, v_s, qd_ready, k_ready, v_ready,
                              k_empty, v_empty, q_row, row0, n_n, BLOCK_N, STAGES))],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS])

    for c in gl.static_range(2):
        mbarrier.invalidate(qd_ready.index(c))
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(k_ready.index(s))
        mbarrier.invalidate(v_ready.index(s))
        mbarrier.invalidate(k_empty.index(s))
        mbarrier.invalidate(v_empty.index(s))


# ---------------------------------------------------------------------------
# The dQ loop split by rows on a persistent grid (PERSIST2 = the number of
# Q / dO buffers): one program per SM walks the tiles (z, h, query block);
# with two buffers the next tile's Q and dO load while this one runs.
# ---------------------------------------------------------------------------

@gluon.jit
def _prows_dq_producer(desc_q, desc_do, desc_k, desc_v, q_s, do_s, k_s, v_s, qd_ready, qd_empty, k_ready, v_ready,
                       k_empty, v_empty, n_tiles, tiles_n, N_CTX, n_n, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                       QD_BUFS: gl.constexpr):
    """One warp: per tile, each group's halves of Q and dO into the buffer
    the tile QD_BUFS back has released, then K and V of every key block
    into the rings (iterations counted across tiles)."""
    SUB: gl.constexpr = desc_q.block_type.shape[0]
    it = 0
    for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        q_row, row0 = _tile_rows(t, tiles_n, N_CTX)
        qb = it % QD_BUFS
        for c in gl.static_range(2):
            i = qb * 2 + c
            mbarrier.wait(qd_empty.index(i), ((it // QD_BUFS) & 1) ^ 1)
            mbarrier.expect(qd_ready.index(i), 2 * desc_q.block_type.nbytes)
            _tma_load(desc_q, [q_row + c * SUB, 0], qd_ready.index(i), q_s.index(i))
            _tma_load(desc_do, [q_row + c * SUB, 0], qd_ready.index(i), do_s.index(i))
        for j in range(n_n):
            _ring_load_pair(desc_k, desc_v, k_s, v_s, k_ready, v_ready, k_empty, v_empty, row0 + j * BLOCK_N,
                            it * n_n + j, STAGES)
        it += 1


@gluon.jit
def _prows_dq_group(desc_dq, M, Delta, q_s, do_s, k_s, v_s, qd_ready, qd_empty, k_ready, v_ready, k_empty, v_empty,
                    n_tiles, tiles_n, N_CTX, n_n, qk_scale, sm_scale, C: gl.constexpr, HEAD_DIM: gl.constexpr,
                    BLOCK_N: gl.constexpr, STAGES: gl.constexpr, QD_BUFS: gl.constexpr):
    """Compute group C of `_rows_dq_group`, per tile of the persistent grid:
    its Q and dO buffer is released once dQ has been stored through it."""
    SUB: gl.constexpr = desc_dq.block_type.shape[0]
    it = 0
    for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        q_row, row0 = _tile_rows(t, tiles_n, N_CTX)
        i = (it % QD_BUFS) * 2 + C
        dq = _rows_dq_tile(M, Delta, q_s, do_s, i, k_s, v_s, qd_ready, (it // QD_BUFS) & 1, k_ready, v_ready, k_empty,
                           v_empty, q_row, n_n, it * n_n, qk_scale, C, SUB, HEAD_DIM, BLOCK_N, STAGES, False)
        _store_tile(desc_dq, q_row + C * SUB, q_s.index(i), (dq * sm_scale).to(gl.float16))
        _group_barrier()
        mbarrier.arrive(qd_empty.index(i), count=1)
        it += 1


@gluon.jit
def attn_bwd_dq_rows_persistent_kernel(sm_scale, M, Delta, desc_q, desc_do, desc_k, desc_v, desc_dq, N_CTX, N_HZ,
                                       HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                                       QD_BUFS: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                                       PRODUCER_REGS: gl.constexpr):
    gl.static_assert(2 * desc_q.block_type.shape[0] == TILE)
    tiles_n = N_CTX // TILE
    n_tiles = tiles_n * N_HZ
    n_n = N_CTX // BLOCK_N
    qk_scale = sm_scale * LOG2E

    q_s = gl.allocate_shared_memory(desc_q.dtype, [2 * QD_BUFS] + desc_q.block_type.shape, desc_q.layout)
    do_s = gl.allocate_shared_memory(desc_do.dtype, [2 * QD_BUFS] + desc_do.block_type.shape, desc_do.layout)
    k_s = gl.allocate_shared_memory(desc_k.dtype, [STAGES] + desc_k.block_type.shape, desc_k.layout)
    v_s = gl.allocate_shared_memory(desc_v.dtype, [STAGES] + desc_v.block_type.shape, desc_v.layout)
    qd_ready = gl.allocate_shared_memory(gl.int64, [2 * QD_BUFS, 1], mbarrier.MBarrierLayout())
    qd_empty = gl.allocate_shared_memory(gl.int64, [2 * QD_BUFS, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2 * QD_BUFS):
        mbarrier.init(qd_ready.index(i), count=1)
        mbarrier.init(qd_empty.index(i), count=1)  # the group that owns the half
    for s in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(s), count=1)
        mbarrier.init(v_ready.index(s), count=1)
        mbarrier.init(k_empty.index(s), count=2)  # one arrival per group
        mbarrier.init(v_empty.index(s), count=2)

    gl.warp_specialize(
        [(_prows_dq_group, (desc_dq, M, Delta, q_s, do_s, k_s, v_s, qd_ready, qd_empty, k_ready, v_ready, k_empty,
                            v_empty, n_tiles, tiles_n, N_CTX, n_n, qk_scale, sm_scale, 0, HEAD_DIM, BLOCK_N, STAGES,
                            QD_BUFS)),
         (_prows_dq_group, (desc_dq, M, Delta, q_s, do_s, k_s, v_s, qd_ready, qd_empty, k_ready, v_ready, k_empty,
                            v_empty, n_tiles, tiles_n, N_CTX, n_n, qk_scale, sm_scale, 1, HEAD_DIM, BLOCK_N, STAGES,
                            QD_BUFS)),
         (_prows_dq_producer, (desc_q, desc_do, desc_k, desc_v, q_s, do_s, k_s, v_s, qd_ready, qd_empty, k_ready,
                               v_ready, k_empty, v_empty, n_tiles, tiles_n, N_CTX, n_n, BLOCK_N, STAGES, QD_BUFS))],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS])

    for i in gl.static_range(2 * QD_BUFS):
        mbarrier.invalidate(qd_ready.index(i))
        mbarrier.invalidate(qd_empty.index(i))
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(k_ready.index(s))
        mbarrier.invalidate(v_ready.index(s))
        mbarrier.invalidate(k_empty.index(s))
        mbarrier.invalidate(v_empty.index(s))


# ---------------------------------------------------------------------------
# Configuration, compilation, launch.
# ---------------------------------------------------------------------------

# twill's plan for the H100 (fa_bwd_gluon_plan.plan_from_schedules;
# recorded in bench/gpu/expected/<triton>.json, gluon bwd_hd128): the dK/dV loop
# split by function with 64-row query steps and 3-slot rings (one iteration
# of prefetch, each buffer live until its stage-1 reader completes); the dQ
# loop, read sub-tiled (fa_bwd's DQ_SUBTILE) with 128-key steps, split by
# rows with 2-slot rings; two compute groups at 240 registers, the producer
# at 24, one CTA per SM (224 and 192 KB of shared memory). SPLIT (both
# loops), EARLY_S, DQ_INFLIGHT, K_REGS, DPD_F16, REG_A, PIPE, MAXNREG1,
# PERSIST1 and PERSIST2 serve other splits and ablations
# (bench/gpu/probe/gluon_bwd_probe.py).
DEFAULT_CONFIG = dict(HEAD_DIM=128, BLOCK_M1=64, BLOCK_N2=128, STAGES1=3, STAGES2=2, EARLY_S=False,
                      DQ_INFLIGHT=False, K_REGS=False, DPD_F16=False, REG_A=False,
                      PIPE=True, MAXNREG1=None, PERSIST1=False, PERSIST2=False, CONCURRENT=False,
                      SPLIT=None,
                      SPLIT1="function", SPLIT2="rows", CONSUMER_REGS=240, PRODUCER_REGS=24)

CTA_WARPS = gluon_hopper.cta_warps(2)


def _constexprs(cfg):
    """((dK/dV kernel, its constexprs, rows of the blocks a program's group
    owns), (the same of the dQ kernel)) of a configuration: SPLIT1 (dK/dV)
    and SPLIT2 (dQ) each, or SPLIT for both."""
    regs = dict(CONSUMER_REGS=cfg["CONSUMER_REGS"], PRODUCER_REGS=cfg["PRODUCER_REGS"])
    d = cfg["HEAD_DIM"]
    dkdv_cst = dict(HEAD_DIM=d, BLOCK_M=cfg["BLOCK_M1"], STAGES=cfg["STAGES1"], **regs)
    dq_cst = dict(HEAD_DIM=d, BLOCK_N=cfg["BLOCK_N2"], STAGES=cfg["STAGES2"])
    split1, split2 = cfg["SPLIT"] or cfg["SPLIT1"], cfg["SPLIT"] or cfg["SPLIT2"]
    if split1 not in ("function", "rows", "elementwise", "single"):
        raise ValueError(f"dK/dV split {split1!r}: 'function', 'rows', 'elementwise' or 'single'")
    if split2 not in ("function", "rows"):
        raise ValueError(f"dQ split {split2!r}: 'function' or 'rows'")
    if split1 == "function" and cfg["PERSIST1"]:
        p_cst = dict(HEAD_DIM=d, BLOCK_M=cfg["BLOCK_M1"], STAGES=cfg["STAGES1"], KV_BUFS=cfg["PERSIST1"], **regs)
        dkdv = (attn_bwd_dkdv_persistent_kernel, p_cst, TILE_ROWS)
    elif split1 == "function":
        fn_cst = dict(HEAD_DIM=d, BLOCK_M=cfg["BLOCK_M1"], STAGES=cfg["STAGES1"], REG_A=cfg["REG_A"], **regs)
        dkdv = (attn_bwd_dkdv_gluon_kernel, fn_cst, TILE_ROWS)
    elif split1 == "single":
        single_cst = dict(HEAD_DIM=d, BLOCK_M=cfg["BLOCK_M1"], STAGES=cfg["STAGES1"], PIPE=cfg["PIPE"],
                          PRODUCER_REGS=cfg["PRODUCER_REGS"])
        dkdv = (attn_bwd_dkdv_single_kernel, single_cst, TILE_ROWS)
    elif split1 == "elementwise":
        # In the kernel's parameter order (the launcher passes them by position).
        ew_cst = dict(HEAD_DIM=d, BLOCK_M=cfg["BLOCK_M1"], STAGES=cfg["STAGES1"], K_REGS=cfg["K_REGS"],
                      DPD_F16=cfg["DPD_F16"], **regs)
        dkdv = (attn_bwd_dkdv_ew_kernel, ew_cst, TILE_ROWS)
    else:
        dkdv = (attn_bwd_dkdv_rows_kernel, dkdv_cst, TILE_ROWS // 2)
    if split2 == "rows" and cfg["PERSIST2"]:
        p2_cst = dict(HEAD_DIM=d, BLOCK_N=cfg["BLOCK_N2"], STAGES=cfg["STAGES2"], QD_BUFS=cfg["PERSIST2"], **regs)
        dq = (attn_bwd_dq_rows_persistent_kernel, p2_cst, TILE_ROWS // 2)
    elif split2 == "function":
        dq = (attn_bwd_dq_gluon_kernel, dict(dq_cst, EARLY_S=cfg["EARLY_S"], **regs), TILE_ROWS)
    else:
        dq = (attn_bwd_dq_rows_kernel, dict(dq_cst, DQ_INFLIGHT=cfg["DQ_INFLIGHT"], **regs), TILE_ROWS // 2)
    return dkdv, dq


def _persistent(cfg):
    """Whether the (dK/dV, dQ) kernels of `cfg` run on a persistent grid."""
    return ((cfg["SPLIT"] or cfg["SPLIT1"]) == "function" and bool(cfg["PERSIST1"]),
            (cfg["SPLIT"] or cfg["SPLIT2"]) == "rows" and bool(cfg["PERSIST2"]))


def ast_sources(**config):
    """The GluonASTSources of the two kernels at `config`."""
    from triton.experimental.gluon._runtime import GluonASTSource

    cfg = dict(DEFAULT_CONFIG, **config)
    (dkdv_fn, dkdv_cst, own1), (dq_fn, dq_cst, own2) = _constexprs(cfg)
    d = cfg["HEAD_DIM"]
    own1, own2, qm, kn = [own1, d], [own2, d], [cfg["BLOCK_M1"], d], [cfg["BLOCK_N2"], d]
    common = {"sm_scale": "fp32", "M": "*fp32", "Delta": "*fp32"}
    dkdv_sig = dict(common, desc_q=_desc_type(qm), desc_do=_desc_type(qm), desc_k=_desc_type(own1),
                    desc_v=_desc_type(own1), desc_dk=_desc_type(own1), desc_dv=_desc_type(own1), N_CTX="i32")
    if _persistent(cfg)[0]:
        dkdv_sig["N_HZ"] = "i32"
    dq_sig = dict(common, desc_q=_desc_type(own2), desc_do=_desc_type(own2), desc_k=_desc_type(kn),
                  desc_v=_desc_type(kn), desc_dq=_desc_type(own2), N_CTX="i32")
    if _persistent(cfg)[1]:
        dq_sig["N_HZ"] = "i32"
    dkdv_sig.update({k: "constexpr" for k in dkdv_cst})
    dq_sig.update({k: "constexpr" for k in dq_cst})
    return (GluonASTSource(fn=dkdv_fn, signature=dkdv_sig, constexprs=dkdv_cst, attrs={}),
            GluonASTSource(fn=dq_fn, signature=dq_sig, constexprs=dq_cst, attrs={}))


def compile_for(target=None, **config):
    """Compiles both kernels (num_warps 4: the default partition; the
    workers add their own warps): (dK/dV kernel, dQ kernel). `target`
    None: the current GPU."""
    maxnreg = dict(DEFAULT_CONFIG, **config)["MAXNREG1"]
    dkdv, dq = ast_sources(**config)
    dkdv_options = dict(num_warps=4) if maxnreg is None else dict(num_warps=4, maxnreg=maxnreg)
    return (triton.compile(dkdv, target=target, options=dkdv_options),
            triton.compile(dq, target=target, options=dict(num_warps=4)))


def launcher(kernels, q, k, v, do, lse, delta, dq, dk, dv, sm_scale, **config):
    """A function that launches the compiled `kernels` (compile_for's pair)
    on q, k, v, do ([Z, H, N_CTX, HEAD_DIM] fp16, contiguous), the forward's
    log2-sum-exp `lse` and the preprocess's `delta` ([Z * H * N_CTX] fp32),
    writing dq, dk, dv. The function's `parts` launch one kernel each."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    cfg = dict(DEFAULT_CONFIG, **config)
    (_, dkdv_cst, own1), (_, dq_cst, own2) = _constexprs(cfg)
    Z, H, N, D = q.shape
    assert D == cfg["HEAD_DIM"] and N % TILE_ROWS == 0 and N % cfg["BLOCK_M1"] == 0 and N % cfg["BLOCK_N2"] == 0
    rows = Z * H * N

    def desc(t, block_rows):
        block = [block_rows, D]
        return TensorDescriptor.from_tensor(t.view(rows, D), block, _layout(block))

    bm, bn = cfg["BLOCK_M1"], cfg["BLOCK_N2"]
    grid = (N // TILE_ROWS, Z * H, 1)
    grids, args = [], []
    for persistent, front, cst in zip(_persistent(cfg),
                                      ((desc(q, bm), desc(do, bm), desc(k, own1), desc(v, own1), desc(dk, own1),
                                        desc(dv, own1), N),
                                       (desc(q, own2), desc(do, own2), desc(k, bn), desc(v, bn), desc(dq, own2), N)),
                                      (dkdv_cst, dq_cst)):
        if persistent:
            # One program per SM (at most one per tile), walking the tiles in the grid's order.
            import torch

            sms = torch.cuda.get_device_properties(q.device).multi_processor_count
            grids.append((min(sms, grid[0] * grid[1]), 1, 1))
            args.append(front + (Z * H, *cst.values()))
        else:
            grids.append(grid)
            args.append(front + tuple(cst.values()))
    dkdv_kernel, dq_kernel = kernels

    def run_dkdv():
        dkdv_kernel[grids[0]](sm_scale, lse, delta, *args[0])

    def run_dq():
        dq_kernel[grids[1]](sm_scale, lse, delta, *args[1])

    if cfg["CONCURRENT"]:
        # The two loops share no result: the dQ kernel runs on a second
        # stream, forked after the caller's stream and joined into it, so
        # that its programs take the SMs that the dK/dV kernel's last
        # wave leaves idle.
        import torch

        side = torch.cuda.Stream(device=q.device)

        def run():
            main = torch.cuda.current_stream(q.device)
            side.wait_stream(main)
            run_dkdv()
            with torch.cuda.stream(side):
                run_dq()
            main.wait_stream(side)
    else:
        def run():
            run_dkdv()
            run_dq()

    run.parts = {"dK/dV kernel": run_dkdv, "dQ kernel": run_dq}
    return run
