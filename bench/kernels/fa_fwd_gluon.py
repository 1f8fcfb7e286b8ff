"""FlashAttention forward for Hopper in Gluon: twill's joint SWP + WS schedule,
lowered by hand where Triton's pipeliner cannot lower it.

twill's joint schedule of the sub-tiled FA forward loop (the real TTGIR of
`fa_fwd.attn_fwd_general_kernel` with SUBTILE, exported by the pass and
solved without Triton 3.6's "every wgmma in the last stage" rule; see
`fa_fwd_gluon_plan.py`) is tensor-core bound (I = ResMII, proven) with

* the two TMA loads (K, V) on the variable-latency group, one iteration of
  prefetch;
* each 64-row sub-tile (its QK^T, softmax and PV) on a compute group of its
  own;
* each group's PV in the stage after its QK^T, so that a group issues its
  PV of the previous iteration and its QK^T of this one back to back, and
  the tensor core takes the groups in turns while the other group runs its
  softmax (FA3's "ping-pong").

Triton cannot lower it: 3.6 rejects a wgmma outside the last stage (3.9
makes it synchronous), and in the partitions of its own Hopper warp
specialization every wgmma is synchronous (`ttng.warp_group_dot` without
`isAsync`, the partition loops get `tt.num_stages = 0`), so a group waits
for its PV to complete before it issues the next QK^T. Gluon (shipped in the
same Triton wheel) exposes what the schedule needs: warp-specialized
partitions with register budgets, TMA, mbarriers and asynchronous wgmma
with explicit waits.
This kernel is that schedule, written once, with the choices the schedule
makes as constexprs (`plan_from_schedule` in `fa_fwd_gluon_plan.py`
derives them from twill's JSON):

* PINGPONG: enforce the schedule's turn order between the two consumer
  groups (mbarriers `turn[0]`, `turn[1]`: a group waits for its turn,
  issues its wgmmas, hands the turn on). The order is a consequence of the
  tensor core's capacity, not a dependence, and twill's plan leaves it to
  the hardware: the tensor core serializes the groups' wgmmas and the warp
  schedulers interleave the groups as they become ready. Enforcing it buys
  nothing measurable: 605.5 against 608.0 TFLOPS at N = 16k, medians of 7
  interleaved rounds on the H100 (BENCHMARKS.md, 2026-11-24).
* QK_FIRST: within a turn, QK^T of this iteration is issued before PV of
  the previous one. With INTRA the group then waits only for QK^T, runs the
  softmax while its own PV is still on the tensor core, and waits for PV
  just before it rescales the accumulator (FA3's intra-warpgroup overlap).
* STAGES: buffers per K and V ring (the loads' prefetch depth + 1).
* CAUSAL: causal attention, as `fa_fwd.attn_fwd_general_kernel` computes
  it: the K blocks left of the diagonal in the loop above, then the
  diagonal's BLOCK_M // BLOCK_N blocks in a second copy of the turn with
  the scores of later keys masked; blocks right of it skipped. twill's
  plan for it is its schedule of the causal kernel's first loop
  (`run.py --plans`, `gluon/causal/plan.json` of the plans cache).

Partitions: the default partition (4 warps) and one 4-warp worker are the
two consumer groups (rows [0, 64) and [64, 128) of the CTA's 128-row Q
tile); a 1-warp worker is the producer (Q halves, then the K / V ring).
mbarrier arrives are done by one thread of a partition, so every "empty"
barrier counts one arrival per consumer group.

Arguments follow `fa_fwd.attn_fwd_kernel` (sm_scale, M, Z, H, descriptors,
N_CTX): O and the log2-sum-exp M as there. Q and O descriptors have a
[64, HEAD_DIM] block (one sub-tile), K and V [BLOCK_N, HEAD_DIM]. Compile on
a machine without a GPU with `compile_for(target)`; launch with
`launch(kernel, ...)` (host-side Gluon tensor descriptors).
"""

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

from bench.kernels import gluon_hopper
from bench.kernels.gluon_hopper import desc_type as _desc_type
from bench.kernels.gluon_hopper import nvmma_layout as _layout
from bench.kernels.gluon_hopper import ring_load_pair as _ring_load_pair
from bench.kernels.gluon_hopper import tma_load as _tma_load
from bench.kernels.gluon_hopper import tma_store as _tma_store

SUB_M = 64  # rows of one sub-tile: one consumer group, one m64 wgmma


@gluon.jit
def _producer(desc_q, desc_k, desc_v, q_s, k_s, v_s, q_ready, k_ready, v_ready, k_empty, v_empty, q_row, kv_row,
              n_kv, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
    """One warp: the two Q sub-tiles, then K and V into their rings. A slot
    is refilled once both consumer groups have released it (the first pass
    over a ring waits on parity 1 of a fresh barrier, which returns at once)."""
    for c in gl.static_range(2):
        mbarrier.expect(q_ready.index(c), desc_q.block_type.nbytes)
        _tma_load(desc_q, [q_row + c * desc_q.block_type.shape[0], 0], q_ready.index(c), q_s.index(c))
    for j in range(n_kv):
        _ring_load_pair(desc_k, desc_v, k_s, v_s, k_ready, v_ready, k_empty, v_empty, kv_row + j * BLOCK_N, j, STAGES)


@gluon.jit
def _softmax(s_val, m_i, l_i, qk_scale):
    """Online softmax of one sub-tile's scores (base 2, scale folded in):
    P (fp32), the new running max and denominator, and alpha, the factor
    that rescales the old accumulator."""
    m_new = gl.maximum(m_i, gl.max(s_val, axis=1) * qk_scale)
    p = gl.exp2(s_val * qk_scale - gl.expand_dims(m_new, 1))
    alpha = gl.exp2(m_i - m_new)
    l_new = l_i * alpha + gl.sum(p, axis=1)
    return p, m_new, l_new, alpha


@gluon.jit
def _causal_mask(s_val, q_pos, k_pos, s_layout: gl.constexpr):
    """Scores of keys after their query set to -inf (causal attention).
    `q_pos`, `k_pos`: the positions of the tile's first query and key. A
    row of a tile may be masked whole (BLOCK_N < BLOCK_M: the second
    diagonal block for the first sub-tile), but key 0 is kept in turn 0,
    so every row's running max is finite from then on and no -inf - -inf
    arises in the softmax."""
    rows = q_pos + gl.arange(0, s_val.shape[0], layout=gl.SliceLayout(1, s_layout))
    cols = k_pos + gl.arange(0, s_val.shape[1], layout=gl.SliceLayout(0, s_layout))
    keep = gl.expand_dims(rows, 1) >= gl.expand_dims(cols, 0)
    return gl.where(keep, s_val, gl.full_like(s_val, float("-inf")))


@gluon.jit
def _turn(j, q, k_s, v_s, k_ready, v_ready, k_empty, v_empty, my_turn, other_turn, p16, acc, m_i, l_i, s_zero,
          qk_scale, q_pos, C: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr,
          QK_FIRST: gl.constexpr, INTRA: gl.constexpr, MASKED: gl.constexpr, s_layout: gl.constexpr,
          o_layout: gl.constexpr, p_layout: gl.constexpr):
    """Turn j (0 < j < n_kv) of consumer group C: QK^T of iteration j and PV
    of iteration j - 1 on the tensor core, then the softmax of iteration j
    (its scores causally masked where MASKED). Returns the group's P (fp16,
    the next PV's operand), accumulator, running max and denominator."""
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    s = j % STAGES
    sp = (j - 1) % STAGES
    mbarrier.wait(k_ready.index(s), (j // STAGES) & 1)
    mbarrier.wait(v_ready.index(sp), ((j - 1) // STAGES) & 1)
    if PINGPONG:
        mbarrier.wait(my_turn, (j & 1) ^ (1 - C))
    if QK_FIRST:
        s_tok = warpgroup_mma(q, k_s.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        o_tok = warpgroup_mma(p16, v_s.index(sp), acc, is_async=True)
    else:
        o_tok = warpgroup_mma(p16, v_s.index(sp), acc, is_async=True)
        s_tok = warpgroup_mma(q, k_s.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    if PINGPONG:
        mbarrier.arrive(other_turn, count=1)
    if INTRA:
        # QK^T was issued first: one wgmma left in flight is this
        # group's PV, which runs under the softmax.
        s_val = warpgroup_mma_wait(1, deps=[s_tok])
        mbarrier.arrive(k_empty.index(s), count=1)
        if MASKED:
            s_val = _causal_mask(s_val, q_pos, j * BLOCK_N, s_layout)
        p, m_i, l_i, alpha = _softmax(s_val, m_i, l_i, qk_scale)
        acc, p16 = warpgroup_mma_wait(0, deps=[o_tok, p16])
        mbarrier.arrive(v_empty.index(sp), count=1)
    else:
        s_val, acc, p16 = warpgroup_mma_wait(0, deps=[s_tok, o_tok, p16])
        mbarrier.arrive(k_empty.index(s), count=1)
        mbarrier.arrive(v_empty.index(sp), count=1)
        if MASKED:
            s_val = _causal_mask(s_val, q_pos, j * BLOCK_N, s_layout)
        p, m_i, l_i, alpha = _softmax(s_val, m_i, l_i, qk_scale)
    acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
    p16 = gl.convert_layout(p.to(gl.float16), p_layout)
    return p16, acc, m_i, l_i


@gluon.jit
def _consumer(desc_o, M, q_s, k_s, v_s, q_ready, k_ready, v_ready, k_empty, v_empty, turn, q_row, m_row, n_kv,
              n_full, q_pos0, qk_scale, C: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
              STAGES: gl.constexpr, PINGPONG: gl.constexpr, QK_FIRST: gl.constexpr, INTRA: gl.constexpr,
              CAUSAL: gl.constexpr):
    """One consumer group (4 warps): sub-tile C. Turn t issues QK^T of
    iteration t (t < n_kv) and PV of iteration t - 1 (t > 0); between its
    turns the group runs the softmax of iteration t. Iterations from
    `n_full` on are causally masked (CAUSAL; `q_pos0` is the position of
    the CTA's first query)."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    SUB: gl.constexpr = desc_o.block_type.shape[0]
    q_pos = q_pos0 + C * SUB  # position of this group's first query

    my_turn = turn.index(C)
    other_turn = turn.index(1 - C)
    q = q_s.index(C)
    mbarrier.wait(q_ready.index(C), 0)

    m_i = gl.full([SUB], float("-inf"), gl.float32, row_s)
    l_i = gl.full([SUB], 0.0, gl.float32, row_s)
    acc = gl.zeros([SUB, HEAD_DIM], gl.float32, o_layout)
    s_zero = gl.zeros([SUB, BLOCK_N], gl.float32, s_layout)

    # Turn 0: QK^T of iteration 0 alone.
    mbarrier.wait(k_ready.index(0), 0)
    if PINGPONG:
        mbarrier.wait(my_turn, 1 - C)  # group 0 goes first
    s_tok = warpgroup_mma(q, k_s.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    if PINGPONG:
        mbarrier.arrive(other_turn, count=1)
    s_val = warpgroup_mma_wait(0, deps=[s_tok])
    mbarrier.arrive(k_empty.index(0), count=1)
    if CAUSAL:
        if n_full == 0:  # the first K block is on the diagonal
            s_val = _causal_mask(s_val, q_pos, 0, s_layout)
    p, m_i, l_i, alpha = _softmax(s_val, m_i, l_i, qk_scale)
    p16 = gl.convert_layout(p.to(gl.float16), p_layout)

    # Turns 1 .. n_kv - 1: QK^T of iteration j and PV of iteration j - 1;
    # with CAUSAL, the iterations from n_full on (the K blocks that overlap
    # the diagonal) masked, in a loop of their own so that the unmasked
    # loop is the non-causal kernel's.
    for j in range(1, n_full):
        p16, acc, m_i, l_i = _turn(j, q, k_s, v_s, k_ready, v_ready, k_empty, v_empty, my_turn, other_turn, p16, acc,
                                   m_i, l_i, s_zero, qk_scale, q_pos, C, BLOCK_N, STAGES, PINGPONG, QK_FIRST, INTRA,
                                   False, s_layout, o_layout, p_layout)
    if CAUSAL:
        for j in range(gl.maximum(n_full, 1), n_kv):
            p16, acc, m_i, l_i = _turn(j, q, k_s, v_s, k_ready, v_ready, k_empty, v_empty, my_turn, other_turn, p16,
                                       acc, m_i, l_i, s_zero, qk_scale, q_pos, C, BLOCK_N, STAGES, PINGPONG, QK_FIRST,
                                       INTRA, True, s_layout, o_layout, p_layout)

    # Turn n_kv: PV of the last iteration.
    sl = (n_kv - 1) % STAGES
    mbarrier.wait(v_ready.index(sl), ((n_kv - 1) // STAGES) & 1)
    if PINGPONG:
        mbarrier.wait(my_turn, (n_kv & 1) ^ (1 - C))
    o_tok = warpgroup_mma(p16, v_s.index(sl), acc, is_async=True)
    if PINGPONG:
        mbarrier.arrive(other_turn, count=1)
    acc, p16 = warpgroup_mma_wait(0, deps=[o_tok, p16])
    mbarrier.arrive(v_empty.index(sl), count=1)

    # Epilogue: log2-sum-exp for the backward pass, O = acc / l through
    # shared memory (this group's Q buffer: every QK^T has completed).
    rows = gl.arange(0, SUB, layout=row_s)
    gl.store(M + m_row + C * SUB + rows, m_i + gl.log2(l_i))
    acc = acc / gl.expand_dims(gl.convert_layout(l_i, row_o), 1)
    q.store(acc.to(gl.float16))
    fence_async_shared()
    _tma_store(desc_o, [q_row + C * SUB, 0], q)
    tma.store_wait(0)


@gluon.jit
def attn_fwd_gluon_kernel(sm_scale, M, Z, H, desc_q, desc_k, desc_v, desc_o, N_CTX, HEAD_DIM: gl.constexpr,
                          BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                          PINGPONG: gl.constexpr, QK_FIRST: gl.constexpr, INTRA: gl.constexpr,
                          CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr, CAUSAL: gl.constexpr):
    gl.static_assert(BLOCK_M == 2 * desc_q.block_type.shape[0])
    gl.static_assert(not INTRA or QK_FIRST)
    # Causal: the diagonal phase covers whole K blocks, as in fa_fwd.
    gl.static_assert(not CAUSAL or BLOCK_M % BLOCK_N == 0)
    start_m = gl.program_id(0)
    off_hz = gl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    row0 = off_z * (H * N_CTX) + off_h * N_CTX
    q_row = row0 + start_m * BLOCK_M
    m_row = off_hz * N_CTX + start_m * BLOCK_M
    # K blocks this CTA reads, and how many of them need no mask: with
    # CAUSAL those left of the diagonal block(s), [0, start_m * BLOCK_M),
    # then the diagonal's BLOCK_M // BLOCK_N masked ones; blocks right of
    # the diagonal are skipped (as fa_fwd.attn_fwd_general_kernel does).
    if CAUSAL:
        n_full = start_m * (BLOCK_M // BLOCK_N)
        n_kv = n_full + BLOCK_M // BLOCK_N
    else:
        n_kv = N_CTX // BLOCK_N
        n_full = n_kv
    qk_scale = sm_scale * 1.44269504

    q_s = gl.allocate_shared_memory(desc_q.dtype, [2] + desc_q.block_type.shape, desc_q.layout)
    k_s = gl.allocate_shared_memory(desc_k.dtype, [STAGES] + desc_k.block_type.shape, desc_k.layout)
    v_s = gl.allocate_shared_memory(desc_v.dtype, [STAGES] + desc_v.block_type.shape, desc_v.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(2):
        mbarrier.init(q_ready.index(c), count=1)
        mbarrier.init(turn.index(c), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(s), count=1)
        mbarrier.init(v_ready.index(s), count=1)
        mbarrier.init(k_empty.index(s), count=2)  # one arrival per consumer group
        mbarrier.init(v_empty.index(s), count=2)

    gl.warp_specialize(
        [(_consumer, (desc_o, M, q_s, k_s, v_s, q_ready, k_ready, v_ready, k_empty, v_empty, turn, q_row,
                      m_row, n_kv, n_full, start_m * BLOCK_M, qk_scale, 0, HEAD_DIM, BLOCK_N, STAGES, PINGPONG,
                      QK_FIRST, INTRA, CAUSAL)),
         (_consumer, (desc_o, M, q_s, k_s, v_s, q_ready, k_ready, v_ready, k_empty, v_empty, turn, q_row,
                      m_row, n_kv, n_full, start_m * BLOCK_M, qk_scale, 1, HEAD_DIM, BLOCK_N, STAGES, PINGPONG,
                      QK_FIRST, INTRA, CAUSAL)),
         (_producer, (desc_q, desc_k, desc_v, q_s, k_s, v_s, q_ready, k_ready, v_ready, k_empty, v_empty,
                      q_row, row0, n_kv, BLOCK_N, STAGES))],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS])

    for c in gl.static_range(2):
        mbarrier.invalidate(q_ready.index(c))
        mbarrier.invalidate(turn.index(c))
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(k_ready.index(s))
        mbarrier.invalidate(v_ready.index(s))
        mbarrier.invalidate(k_empty.index(s))
        mbarrier.invalidate(v_empty.index(s))


# twill's plan for the H100 (fa_fwd_gluon_plan.plan_from_schedule of the
# schedule with the largest latency slack; recorded in
# bench/gpu/expected/3.6.0.json, gluon ""): the groups' order on the tensor core
# left to the hardware, QK^T before PV, the softmax under its own PV (FA3's
# intra-warpgroup order), one iteration of prefetch. The register split follows the partitions: the
# producer needs few, each consumer group as many as fit (65536 per SM at
# one CTA per SM: 2 x 128 x 240 + 128 x 24). MAXNREG None: Triton's own
# registers at launch (the whole register file); `register_split` gives
# the configuration for more CTAs per SM (run.py records the model's choice
# per plan and size).
DEFAULT_CONFIG = dict(HEAD_DIM=128, BLOCK_M=128, BLOCK_N=128, STAGES=2, PINGPONG=False, QK_FIRST=True,
                      INTRA=True, CONSUMER_REGS=240, PRODUCER_REGS=24, MAXNREG=None, CAUSAL=False)
CONSTEXPRS = ("HEAD_DIM", "BLOCK_M", "BLOCK_N", "STAGES", "PINGPONG", "QK_FIRST", "INTRA", "CONSUMER_REGS",
              "PRODUCER_REGS", "CAUSAL")


# Warps of one CTA: the default partition (4), the consumer worker (4) and
# the producer (1 warp, padded by Triton to a warpgroup so that every warp can
# hand back registers).
CTA_WARPS = gluon_hopper.cta_warps(2)


def register_split(ctas_per_sm, regs_per_sm=64 * 1024):
    """The register configuration for `ctas_per_sm` CTAs per SM of this
    kernel's two consumer groups and producer (gluon_hopper.register_split):
    (the config's MAXNREG, CONSUMER_REGS and PRODUCER_REGS; the smaller of
    the two consumer budgets: the register limit of a compute group in
    twill's solve)."""
    return gluon_hopper.register_split(ctas_per_sm, consumers=2, regs_per_sm=regs_per_sm)


def ast_source(**config):
    """The GluonASTSource of the kernel at `config` (see DEFAULT_CONFIG)."""
    from triton.experimental.gluon._runtime import GluonASTSource

    cfg = dict(DEFAULT_CONFIG, **config)
    d, bn = cfg["HEAD_DIM"], cfg["BLOCK_N"]
    sub, kv = [SUB_M, d], [bn, d]
    signature = {"sm_scale": "fp32", "M": "*fp32", "Z": "i32", "H": "i32", "desc_q": _desc_type(sub),
                 "desc_k": _desc_type(kv), "desc_v": _desc_type(kv), "desc_o": _desc_type(sub), "N_CTX": "i32"}
    signature.update({k: "constexpr" for k in CONSTEXPRS})
    constexprs = {k: cfg[k] for k in CONSTEXPRS}
    return GluonASTSource(fn=attn_fwd_gluon_kernel, signature=signature, constexprs=constexprs, attrs={})


def compile_for(target=None, **config):
    """Compiles the kernel (num_warps 4: the default partition; the workers
    add their own warps). `target` None: the current GPU. MAXNREG (see
    `register_split`) caps the registers per thread at launch."""
    maxnreg = dict(DEFAULT_CONFIG, **config)["MAXNREG"]
    options = dict(num_warps=4) if maxnreg is None else dict(num_warps=4, maxnreg=maxnreg)
    return triton.compile(ast_source(**config), target=target, options=options)


def descriptors(q, k, v, o, block_n, head_dim):
    """Host-side Gluon tensor descriptors over [Z * H * N_CTX, HEAD_DIM]
    views of q, k, v, o (fp16, contiguous)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    rows = q.numel() // head_dim
    sub, kv = [SUB_M, head_dim], [block_n, head_dim]
    return (TensorDescriptor.from_tensor(q.view(rows, head_dim), sub, _layout(sub)),
            TensorDescriptor.from_tensor(k.view(rows, head_dim), kv, _layout(kv)),
            TensorDescriptor.from_tensor(v.view(rows, head_dim), kv, _layout(kv)),
            TensorDescriptor.from_tensor(o.view(rows, head_dim), sub, _layout(sub)))


def launcher(kernel, q, k, v, o, lse, sm_scale, **config):
    """A function that launches the compiled `kernel` on q, k, v
    ([Z, H, N_CTX, HEAD_DIM] fp16) into o and lse."""
    cfg = dict(DEFAULT_CONFIG, **config)
    Z, H, N, D = q.shape
    assert D == cfg["HEAD_DIM"] and N % cfg["BLOCK_M"] == 0 and N % cfg["BLOCK_N"] == 0
    dq, dk, dv, do = descriptors(q, k, v, o, cfg["BLOCK_N"], D)
    grid = (N // cfg["BLOCK_M"], Z * H, 1)
    consts = tuple(cfg[c] for c in CONSTEXPRS)

    def run():
        kernel[grid](sm_scale, lse, Z, H, dq, dk, dv, do, N, *consts)

    return run
