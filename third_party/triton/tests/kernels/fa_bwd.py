"""FlashAttention backward (non-causal) with TMA tensor descriptors.

The gradients of O = softmax(Q K^T * sm_scale) V, given dO and the row-wise
log2-sum-exp M that the forward kernel (fa_fwd.py) stores.  With P
recomputed from M, and Delta = rowsum(dO * O) = rowsum(P * dP):

    dV = P^T dO
    dP = dO V^T
    dS = P * (dP - Delta)            (elementwise, Delta broadcast per row)
    dQ = dS K   * sm_scale
    dK = dS^T Q * sm_scale

Two kernels, the standard FlashAttention-2 design as in the Triton
fused-attention tutorial:

* `attn_bwd_preprocess_kernel`: Delta for a block of rows (no loop).
* `attn_bwd_kernel`: one program per (key block, (z, h)).  It first keeps
  a BLOCK_N1-row tile of K and V and loops over all query blocks of BLOCK_M1
  rows, accumulating dK and dV; then it keeps a BLOCK_M2-row tile of Q and
  dO (the same rows: BLOCK_M2 == BLOCK_N1) and loops over all key blocks of
  BLOCK_N2 rows, accumulating dQ.  No atomics: each program owns its dK, dV
  and dQ tiles.  Both loops are `tl.range(..., warp_specialize=...)`.

Q, K, V, O, dO, dQ, dK, dV are 2-D [Z * H * N_CTX, HEAD_DIM] fp16 tensors
(contiguous); M and Delta are fp32 [Z * H * N_CTX].  A tensor descriptor
has one block shape, so a tensor read with two block shapes (Q and dO:
BLOCK_M1 rows in the dK/dV loop, BLOCK_M2 rows as the dQ tile; K and V:
BLOCK_N1 and BLOCK_N2 rows) is passed as two descriptors over the same
memory, suffixed 1 (dK/dV phase) and 2 (dQ phase).

Written for twill's benchmarks; structure follows the standard Triton
tutorial.  `make_preprocess_ast_source(...)` and `make_ast_source(...)` build
the `triton.compiler.ASTSource` of each kernel, so both compile for a
GPUTarget on a machine without a GPU.
"""

import triton
import triton.language as tl


@triton.jit
def attn_bwd_preprocess_kernel(
    O,  # *fp16 [Z * H * N_CTX, HEAD_DIM]
    DO,  # *fp16 [Z * H * N_CTX, HEAD_DIM]
    Delta,  # *fp32 [Z * H * N_CTX], out
    N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    """Delta = rowsum(dO * O) for BLOCK_M rows of one (z, h)."""
    off_hz = tl.program_id(1)
    rows = off_hz * N_CTX + tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, HEAD_DIM)
    offs = rows[:, None] * HEAD_DIM + cols[None, :]
    o = tl.load(O + offs).to(tl.float32)
    do = tl.load(DO + offs).to(tl.float32)
    tl.store(Delta + rows, tl.sum(o * do, axis=1))


@triton.jit
def attn_bwd_kernel(
    sm_scale,  # fp32, as in the forward pass
    M,  # *fp32 [Z * H * N_CTX]: log2-sum-exp of each row of Q K^T * sm_scale * log2(e)
    Delta,  # *fp32 [Z * H * N_CTX]: rowsum(dO * O), from the preprocess kernel
    desc_q1,  # tensordesc<fp16[BLOCK_M1, HEAD_DIM]>  Q, streamed by the dK/dV loop
    desc_do1,  # tensordesc<fp16[BLOCK_M1, HEAD_DIM]> dO, streamed by the dK/dV loop
    desc_k1,  # tensordesc<fp16[BLOCK_N1, HEAD_DIM]>  K, this program's tile
    desc_v1,  # tensordesc<fp16[BLOCK_N1, HEAD_DIM]>  V, this program's tile
    desc_dk,  # tensordesc<fp16[BLOCK_N1, HEAD_DIM]>  dK, out
    desc_dv,  # tensordesc<fp16[BLOCK_N1, HEAD_DIM]>  dV, out
    desc_q2,  # tensordesc<fp16[BLOCK_M2, HEAD_DIM]>  Q, this program's tile
    desc_do2,  # tensordesc<fp16[BLOCK_M2, HEAD_DIM]> dO, this program's tile
    desc_k2,  # tensordesc<fp16[BLOCK_N2, HEAD_DIM]>  K, streamed by the dQ loop
    desc_v2,  # tensordesc<fp16[BLOCK_N2, HEAD_DIM]>  V, streamed by the dQ loop
    desc_dq,  # tensordesc<fp16[BLOCK_M2, HEAD_DIM]>  dQ, out
    N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_M1: tl.constexpr,  # query rows per step of the dK/dV loop
    BLOCK_N1: tl.constexpr,  # key rows of this program's dK/dV tile
    BLOCK_M2: tl.constexpr,  # query rows of this program's dQ tile
    BLOCK_N2: tl.constexpr,  # key rows per step of the dQ loop
    WARP_SPECIALIZE: tl.constexpr,
    DQ_SUBTILE: tl.constexpr,  # the dQ loop on two halves of the query tile (_dq_subtiled)
):
    # One grid for both phases: program i owns key rows and query rows
    # [i * BLOCK_N1, (i + 1) * BLOCK_N1).
    tl.static_assert(BLOCK_N1 == BLOCK_M2)
    pid = tl.program_id(0)
    off_hz = tl.program_id(1)
    row0 = off_hz * N_CTX  # first row of this (z, h) in the 2-D views
    qk_scale = sm_scale * 1.44269504  # log2(e): M is in base 2

    # ---- Phase 1: dK and dV of key rows [kv_start, kv_start + BLOCK_N1). ----
    # (Tiles kept for a whole loop get their own names: a name assigned
    # inside a Triton loop and defined before it would become loop-carried.)
    kv_start = pid * BLOCK_N1
    k_tile = desc_k1.load([row0 + kv_start, 0])
    v_tile = desc_v1.load([row0 + kv_start, 0])
    dk = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    offs_m1 = tl.arange(0, BLOCK_M1)
    for start_m in tl.range(0, N_CTX, BLOCK_M1, warp_specialize=WARP_SPECIALIZE):
        start_m = tl.multiple_of(start_m, BLOCK_M1)
        q = desc_q1.load([row0 + start_m, 0])
        m = tl.load(M + row0 + start_m + offs_m1)
        # P^T = exp2(K Q^T * scale - M): keys along rows, queries along columns.
        qkT = tl.dot(k_tile, q.T)
        pT = tl.math.exp2(qkT * qk_scale - m[None, :])
        do = desc_do1.load([row0 + start_m, 0])
        # dV += P^T dO
        dv = tl.dot(pT.to(tl.float16), do, dv)
        # dS^T = P^T * (dP^T - Delta), with dP^T = V dO^T.
        delta = tl.load(Delta + row0 + start_m + offs_m1)
        dpT = tl.dot(v_tile, do.T)
        dsT = pT * (dpT - delta[None, :])
        # dK += dS^T Q (sm_scale applied once, after the loop)
        dk = tl.dot(dsT.to(tl.float16), q, dk)
    desc_dv.store([row0 + kv_start, 0], dv.to(tl.float16))
    desc_dk.store([row0 + kv_start, 0], (dk * sm_scale).to(tl.float16))

    # ---- Phase 2: dQ of query rows [q_start, q_start + BLOCK_M2). ----
    q_start = pid * BLOCK_M2
    if DQ_SUBTILE:
        _dq_subtiled(desc_q2, desc_do2, desc_k2, desc_v2, desc_dq, M, Delta, row0, q_start, N_CTX, sm_scale,
                     qk_scale, HEAD_DIM, BLOCK_M2, BLOCK_N2, WARP_SPECIALIZE)
    else:
        offs_m2 = q_start + tl.arange(0, BLOCK_M2)
        q_tile = desc_q2.load([row0 + q_start, 0])
        do_tile = desc_do2.load([row0 + q_start, 0])
        m_tile = tl.load(M + row0 + offs_m2)
        delta_tile = tl.load(Delta + row0 + offs_m2)
        dq = tl.zeros([BLOCK_M2, HEAD_DIM], dtype=tl.float32)
        for start_n in tl.range(0, N_CTX, BLOCK_N2, warp_specialize=WARP_SPECIALIZE):
            start_n = tl.multiple_of(start_n, BLOCK_N2)
            k = desc_k2.load([row0 + start_n, 0])
            v = desc_v2.load([row0 + start_n, 0])
            # P = exp2(Q K^T * scale - M); dS = P * (dO V^T - Delta).
            qk = tl.dot(q_tile, k.T)
            p = tl.math.exp2(qk * qk_scale - m_tile[:, None])
            dp = tl.dot(do_tile, v.T)
            ds = p * (dp - delta_tile[:, None])
            # dQ += dS K (sm_scale applied once, after the loop)
            dq = tl.dot(ds.to(tl.float16), k, dq)
        desc_dq.store([row0 + q_start, 0], (dq * sm_scale).to(tl.float16))


@triton.jit
def _dq_subtiled(desc_q2, desc_do2, desc_k2, desc_v2, desc_dq, M, Delta, row0, q_start, N_CTX, sm_scale, qk_scale,
                 HEAD_DIM: tl.constexpr, BLOCK_M2: tl.constexpr, BLOCK_N2: tl.constexpr,
                 WARP_SPECIALIZE: tl.constexpr):
    """The dQ loop on the tile's two halves of BLOCK_M2 // 2 query rows
    (DQ_SUBTILE), each with its own S, P, dP, dS and dQ (named ..._0 and
    ..._1): the loop whose two-group schedule gives each half a group (the
    Gluon backward's split by rows, fa_bwd_gluon.py). The same values as
    the loop above."""
    HALF: tl.constexpr = BLOCK_M2 // 2
    q_0 = desc_q2.load([row0 + q_start, 0]).reshape([2, HALF, HEAD_DIM])
    q_0, q_1 = tl.split(q_0.permute(1, 2, 0))
    do_0 = desc_do2.load([row0 + q_start, 0]).reshape([2, HALF, HEAD_DIM])
    do_0, do_1 = tl.split(do_0.permute(1, 2, 0))
    offs_0 = q_start + tl.arange(0, HALF)
    m_0 = tl.load(M + row0 + offs_0)
    m_1 = tl.load(M + row0 + HALF + offs_0)
    delta_0 = tl.load(Delta + row0 + offs_0)
    delta_1 = tl.load(Delta + row0 + HALF + offs_0)
    dq_0 = tl.zeros([HALF, HEAD_DIM], dtype=tl.float32)
    dq_1 = tl.zeros([HALF, HEAD_DIM], dtype=tl.float32)
    for start_n in tl.range(0, N_CTX, BLOCK_N2, warp_specialize=WARP_SPECIALIZE):
        start_n = tl.multiple_of(start_n, BLOCK_N2)
        k = desc_k2.load([row0 + start_n, 0])
        v = desc_v2.load([row0 + start_n, 0])
        qk_0 = tl.dot(q_0, k.T)
        p_0 = tl.math.exp2(qk_0 * qk_scale - m_0[:, None])
        dp_0 = tl.dot(do_0, v.T)
        ds_0 = p_0 * (dp_0 - delta_0[:, None])
        dq_0 = tl.dot(ds_0.to(tl.float16), k, dq_0)
        qk_1 = tl.dot(q_1, k.T)
        p_1 = tl.math.exp2(qk_1 * qk_scale - m_1[:, None])
        dp_1 = tl.dot(do_1, v.T)
        ds_1 = p_1 * (dp_1 - delta_1[:, None])
        dq_1 = tl.dot(ds_1.to(tl.float16), k, dq_1)
    dq = tl.join(dq_0, dq_1).permute(2, 0, 1).reshape([BLOCK_M2, HEAD_DIM])
    desc_dq.store([row0 + q_start, 0], (dq * sm_scale).to(tl.float16))


# ---------------------------------------------------------------------------
# Configurations.
# ---------------------------------------------------------------------------

# Per target (compute capability): the main kernel's constexprs plus the
# launch options `triton.compile` takes (LAUNCH_OPTIONS).  The tutorial uses
# 32-row steps against 128-row tiles; 64-row steps keep the MMAs wider.
#
# Hopper: 8 warps (two warp groups) hold the two fp32 [128, HEAD_DIM]
# accumulators of phase 1 in registers.  WARP_SPECIALIZE=True marks both
# loops; at num_warps=8 Triton's Hopper warp specialisation leaves them alone
# (as for fa_fwd's sm90 default), so it only tags them.
#
# Blackwell: the accumulators live in tensor memory.  WARP_SPECIALIZE is
# off: Triton 3.6.0 cannot warp-specialise both loops of this kernel
# ("'nvvm.setmaxregister' op new register size must be in between 24 to
# 256" in ConvertWarpSpecializeToLLVM, at num_warps 4 or 8, with or without
# maxnreg; either loop alone is accepted), and Triton 3.9.0, which accepts
# both, needs 576 tensor-memory columns for them at BLOCK_M1 = BLOCK_N2 = 64
# and then compiles the kernel to a bare `trap` instead of failing (32-row
# steps fit).
CONFIGS = {
    "hd128": {
        90: dict(HEAD_DIM=128, BLOCK_M1=64, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=64, WARP_SPECIALIZE=True,
                 num_warps=8, num_stages=2),
        100: dict(HEAD_DIM=128, BLOCK_M1=64, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=64, WARP_SPECIALIZE=False,
                  num_warps=4, num_stages=2),
    },
    "hd64": {
        90: dict(HEAD_DIM=64, BLOCK_M1=64, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=64, WARP_SPECIALIZE=True,
                 num_warps=8, num_stages=3),
        100: dict(HEAD_DIM=64, BLOCK_M1=64, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=64, WARP_SPECIALIZE=False,
                  num_warps=4, num_stages=3),
    },
}
DEFAULT_CONFIGS = CONFIGS["hd128"]

# The preprocess kernel: rows per program, per head dim.
PREPROCESS_CONFIGS = {
    "hd128": dict(HEAD_DIM=128, BLOCK_M=128, num_warps=4),
    "hd64": dict(HEAD_DIM=64, BLOCK_M=128, num_warps=4),
}

# Keys of a configuration that are `triton.compile` options, not constexprs.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "maxnreg")


def split_config(config):
    """(constexpr keyword arguments, `triton.compile` options) of a config."""
    kwargs = {k: v for k, v in config.items() if k not in LAUNCH_OPTIONS}
    options = {k: v for k, v in config.items() if k in LAUNCH_OPTIONS}
    return kwargs, options


def _divisible(signature, names):
    """attrs: `tt.divisibility = 16` on `names`, as the JIT specialises
    16-divisible integers and 16-aligned pointers."""
    keys = list(signature)
    return {(keys.index(n), ): [["tt.divisibility", 16]] for n in names}


def preprocess_ast_source_args(HEAD_DIM=128, BLOCK_M=128, **_ignored):
    """(signature, constexprs, attrs) of `attn_bwd_preprocess_kernel`."""
    signature = {
        "O": "*fp16",
        "DO": "*fp16",
        "Delta": "*fp32",
        "N_CTX": "i32",
        "HEAD_DIM": "constexpr",
        "BLOCK_M": "constexpr",
    }
    constexprs = {"HEAD_DIM": HEAD_DIM, "BLOCK_M": BLOCK_M}
    return signature, constexprs, _divisible(signature, ("O", "DO", "Delta", "N_CTX"))


def ast_source_args(HEAD_DIM=128, BLOCK_M1=64, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=64, WARP_SPECIALIZE=True,
                    DQ_SUBTILE=False, **_ignored):
    """(signature, constexprs, attrs) of `attn_bwd_kernel`; see
    fa_fwd.ast_source_args for the format.  Launch options go in
    `options=` of `triton.compile`."""

    def desc(rows):
        return f"tensordesc<fp16[{rows}, {HEAD_DIM}]>"

    signature = {
        "sm_scale": "fp32",
        "M": "*fp32",
        "Delta": "*fp32",
        "desc_q1": desc(BLOCK_M1),
        "desc_do1": desc(BLOCK_M1),
        "desc_k1": desc(BLOCK_N1),
        "desc_v1": desc(BLOCK_N1),
        "desc_dk": desc(BLOCK_N1),
        "desc_dv": desc(BLOCK_N1),
        "desc_q2": desc(BLOCK_M2),
        "desc_do2": desc(BLOCK_M2),
        "desc_k2": desc(BLOCK_N2),
        "desc_v2": desc(BLOCK_N2),
        "desc_dq": desc(BLOCK_M2),
        "N_CTX": "i32",
        "HEAD_DIM": "constexpr",
        "BLOCK_M1": "constexpr",
        "BLOCK_N1": "constexpr",
        "BLOCK_M2": "constexpr",
        "BLOCK_N2": "constexpr",
        "WARP_SPECIALIZE": "constexpr",
    }
    constexprs = {
        "HEAD_DIM": HEAD_DIM,
        "BLOCK_M1": BLOCK_M1,
        "BLOCK_N1": BLOCK_N1,
        "BLOCK_M2": BLOCK_M2,
        "BLOCK_N2": BLOCK_N2,
        "WARP_SPECIALIZE": WARP_SPECIALIZE,
    }
    # A constexpr (folded away: False gives the TTGIR, and the replay keys,
    # of the kernel before it had the option).
    signature["DQ_SUBTILE"] = "constexpr"
    constexprs["DQ_SUBTILE"] = DQ_SUBTILE
    return signature, constexprs, _divisible(signature, ("M", "Delta", "N_CTX"))


def make_preprocess_ast_source(**config):
    """`triton.compiler.ASTSource` of `attn_bwd_preprocess_kernel` for one
    entry of PREPROCESS_CONFIGS (launch options ignored)."""
    from triton.compiler import ASTSource

    signature, constexprs, attrs = preprocess_ast_source_args(**config)
    return ASTSource(fn=attn_bwd_preprocess_kernel, signature=signature, constexprs=constexprs, attrs=attrs)


def make_ast_source(**config):
    """`triton.compiler.ASTSource` of `attn_bwd_kernel` for one entry of
    CONFIGS[name] (launch options ignored; see `split_config`)."""
    from triton.compiler import ASTSource

    signature, constexprs, attrs = ast_source_args(**config)
    return ASTSource(fn=attn_bwd_kernel, signature=signature, constexprs=constexprs, attrs=attrs)
