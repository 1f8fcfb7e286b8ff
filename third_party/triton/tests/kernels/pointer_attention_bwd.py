"""Pointer-load (cp.async) attention backward in the style of Triton's
tutorial 06 (fused attention): the kernel shape whose twill schedule made
Triton's pipeliner issue a cp.async into a ring slot an in-flight wgmma still
read (dK / dV wrong by orders of magnitude at head dim 64, causal, 4 warps,
5 stages). Written for this repository; every load is plain pointer
arithmetic (no tensor descriptors, no block pointers), so Triton pipelines
them as cp.async. Test fixtures of the product: no GPU is needed to compile
them (`ast_source` gives `triton.compiler.ASTSource` arguments for cuda:90).

Tensors are contiguous [Z, H, N_CTX, HEAD_DIM] (fp16: q, k, v, o, do, and
the gradients dq, dk, dv) and [Z, H, N_CTX] (fp32: M, Delta); the kernels
index head `z * H + h` as program id 1.

* `attn_bwd_preprocess_kernel`: Delta = rowsum(O * dO) (fp32), BLOCK_M rows
  per program, masked (any N_CTX).
* `attn_bwd_kernel`: program (pid, head) computes dK and dV of key rows
  [pid * BLOCK_N1, +BLOCK_N1) (k and v in registers, a loop over query
  blocks of BLOCK_M1 rows loading q, dO, M and Delta) and dQ of query rows
  [pid * BLOCK_M2, +BLOCK_M2) (q, dO, M, Delta in registers, a loop over key
  blocks of BLOCK_N2 rows loading k and v); BLOCK_M2 == BLOCK_N1, grid
  (cdiv(N_CTX, BLOCK_N1), Z * H). fp32 accumulation, P and dS rounded to fp16
  for the tensor-core products. Causal: each half has a masked loop over
  the diagonal block and an unmasked loop over the rest (four loops);
  otherwise one loop each, over every block. Rows past N_CTX are masked
  (loads give 0 and M = +inf, so P = 0; the dQ loop masks key columns past
  N_CTX where it is not causal), so N_CTX need not be a multiple of any block.

M is the forward's log-sum-exp of each score row in base-2 units: with
S = sm_scale * Q K^T (causal: S_ij = -inf for j > i),
M_i = logsumexp_j(S_ij) * log2(e), so that P = exp2(S * log2(e) - M).
The forward itself is not here: a reference in torch gives O and M.
"""

import triton
import triton.language as tl
from triton.compiler import ASTSource

LOG2E = 1.4426950408889634


@triton.jit
def attn_bwd_preprocess_kernel(O, DO, Delta, N_CTX, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr):
    pid_m = tl.program_id(0)
    head = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, HEAD_DIM)
    inside = rows < N_CTX
    offs = head * N_CTX * HEAD_DIM + rows[:, None] * HEAD_DIM + cols[None, :]
    o = tl.load(O + offs, mask=inside[:, None], other=0.0).to(tl.float32)
    do = tl.load(DO + offs, mask=inside[:, None], other=0.0).to(tl.float32)
    tl.store(Delta + head * N_CTX + rows, tl.sum(o * do, axis=1), mask=inside)


@triton.jit
def _key_block_grads(dk, dv, k, v, Q, DO, M, Delta, key_rows, first_query, steps, qk_scale, N_CTX,
                     BLOCK_M1: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL_MASK: tl.constexpr):
    """dK, dV of one key block (k, v [BLOCK_N1, HEAD_DIM] in registers) over
    `steps` query blocks from `first_query`: the transposed scores, so that
    the key rows stay the M dimension of every product."""
    cols = tl.arange(0, HEAD_DIM)
    for i in range(steps):
        q_rows = first_query + i * BLOCK_M1 + tl.arange(0, BLOCK_M1)
        q_in = q_rows < N_CTX
        q = tl.load(Q + q_rows[:, None] * HEAD_DIM + cols[None, :], mask=q_in[:, None], other=0.0)
        m = tl.load(M + q_rows, mask=q_in, other=float("inf"))
        # S^T (keys x queries), in log2 units.
        st = tl.dot(k, tl.trans(q)) * qk_scale
        pt = tl.math.exp2(st - m[None, :])
        if CAUSAL_MASK:
            pt = tl.where(q_rows[None, :] >= key_rows[:, None], pt, 0.0)
        do = tl.load(DO + q_rows[:, None] * HEAD_DIM + cols[None, :], mask=q_in[:, None], other=0.0)
        dv = tl.dot(pt.to(tl.float16), do, dv)
        delta = tl.load(Delta + q_rows, mask=q_in, other=0.0)
        dpt = tl.dot(v, tl.trans(do))
        dst = pt * (dpt - delta[None, :])
        dk = tl.dot(dst.to(tl.float16), q, dk)
    return dk, dv


@triton.jit
def _query_block_grad(dq, q, do, m, delta, K, V, query_rows, first_key, steps, qk_scale, N_CTX,
                      BLOCK_N2: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL_MASK: tl.constexpr,
                      KEY_BOUND: tl.constexpr):
    """dQ of one query block (q, dO, M, Delta in registers) over `steps` key
    blocks from `first_key`."""
    cols = tl.arange(0, HEAD_DIM)
    for i in range(steps):
        k_rows = first_key + i * BLOCK_N2 + tl.arange(0, BLOCK_N2)
        k_in = k_rows < N_CTX
        k = tl.load(K + k_rows[:, None] * HEAD_DIM + cols[None, :], mask=k_in[:, None], other=0.0)
        v = tl.load(V + k_rows[:, None] * HEAD_DIM + cols[None, :], mask=k_in[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        p = tl.math.exp2(s - m[:, None])
        if CAUSAL_MASK:
            p = tl.where(query_rows[:, None] >= k_rows[None, :], p, 0.0)
        if KEY_BOUND:
            p = tl.where(k_in[None, :], p, 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(tl.float16), k, dq)
    return dq


@triton.jit
def attn_bwd_kernel(Q, K, V, DO, DQ, DK, DV, M, Delta, sm_scale, N_CTX, HEAD_DIM: tl.constexpr,
                    BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr, BLOCK_M2: tl.constexpr, BLOCK_N2: tl.constexpr,
                    CAUSAL: tl.constexpr):
    tl.static_assert(BLOCK_M2 == BLOCK_N1)
    tl.static_assert(BLOCK_N1 % BLOCK_M1 == 0)
    tl.static_assert(BLOCK_M2 % BLOCK_N2 == 0)
    pid = tl.program_id(0)
    head = tl.program_id(1)
    tensor = head * N_CTX * HEAD_DIM
    Q += tensor
    K += tensor
    V += tensor
    DO += tensor
    DQ += tensor
    DK += tensor
    DV += tensor
    M += head * N_CTX
    Delta += head * N_CTX
    qk_scale = sm_scale * 1.4426950408889634
    cols = tl.arange(0, HEAD_DIM)

    # dK and dV of key rows [n0, n0 + BLOCK_N1).
    n0 = pid * BLOCK_N1
    key_rows = n0 + tl.arange(0, BLOCK_N1)
    key_in = key_rows < N_CTX
    key_offs = key_rows[:, None] * HEAD_DIM + cols[None, :]
    k = tl.load(K + key_offs, mask=key_in[:, None], other=0.0)
    v = tl.load(V + key_offs, mask=key_in[:, None], other=0.0)
    dk = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        # Queries of the diagonal block (masked), then every later query.
        dk, dv = _key_block_grads(dk, dv, k, v, Q, DO, M, Delta, key_rows, n0, BLOCK_N1 // BLOCK_M1, qk_scale,
                                  N_CTX, BLOCK_M1, HEAD_DIM, True)
        later = n0 + BLOCK_N1
        dk, dv = _key_block_grads(dk, dv, k, v, Q, DO, M, Delta, key_rows, later,
                                  tl.maximum(tl.cdiv(N_CTX - later, BLOCK_M1), 0), qk_scale, N_CTX, BLOCK_M1,
                                  HEAD_DIM, False)
    else:
        dk, dv = _key_block_grads(dk, dv, k, v, Q, DO, M, Delta, key_rows, 0, tl.cdiv(N_CTX, BLOCK_M1), qk_scale,
                                  N_CTX, BLOCK_M1, HEAD_DIM, False)
    dk *= sm_scale
    tl.store(DK + key_offs, dk.to(tl.float16), mask=key_in[:, None])
    tl.store(DV + key_offs, dv.to(tl.float16), mask=key_in[:, None])

    # dQ of query rows [m0, m0 + BLOCK_M2).
    m0 = pid * BLOCK_M2
    query_rows = m0 + tl.arange(0, BLOCK_M2)
    query_in = query_rows < N_CTX
    query_offs = query_rows[:, None] * HEAD_DIM + cols[None, :]
    q = tl.load(Q + query_offs, mask=query_in[:, None], other=0.0)
    do = tl.load(DO + query_offs, mask=query_in[:, None], other=0.0)
    m = tl.load(M + query_rows, mask=query_in, other=float("inf"))
    delta = tl.load(Delta + query_rows, mask=query_in, other=0.0)
    dq = tl.zeros([BLOCK_M2, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        # Keys of the diagonal block (masked; a key past N_CTX is past every
        # query row that is stored), then every earlier key (all inside).
        dq = _query_block_grad(dq, q, do, m, delta, K, V, query_rows, m0, BLOCK_M2 // BLOCK_N2, qk_scale, N_CTX,
                               BLOCK_N2, HEAD_DIM, True, False)
        dq = _query_block_grad(dq, q, do, m, delta, K, V, query_rows, 0, m0 // BLOCK_N2, qk_scale, N_CTX, BLOCK_N2,
                               HEAD_DIM, False, False)
    else:
        dq = _query_block_grad(dq, q, do, m, delta, K, V, query_rows, 0, tl.cdiv(N_CTX, BLOCK_N2), qk_scale, N_CTX,
                               BLOCK_N2, HEAD_DIM, False, True)
    dq *= sm_scale
    tl.store(DQ + query_offs, dq.to(tl.float16), mask=query_in[:, None])


# Configurations after the tutorial's Hopper settings (name -> constexprs and
# launch options). The tutorial runs BLOCK_M1 / BLOCK_N2 = 32 and BLOCK_N1 /
# BLOCK_M2 = 128 at 4 warps and 5 stages; head dim 128 here at 8 warps and 3
# stages with 64-row blocks (dK and dV of 128 x 128 in fp32 alone would take
# 256 registers per thread at 8 warps).
CONFIGS = {
    "hd64_causal_w4_s5": dict(HEAD_DIM=64, CAUSAL=True, BLOCK_M1=32, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=32,
                              num_warps=4, num_stages=5),
    "hd64_w4_s5": dict(HEAD_DIM=64, CAUSAL=False, BLOCK_M1=32, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=32,
                       num_warps=4, num_stages=5),
    "hd128_causal_w8_s3": dict(HEAD_DIM=128, CAUSAL=True, BLOCK_M1=32, BLOCK_N1=64, BLOCK_M2=64, BLOCK_N2=32,
                               num_warps=8, num_stages=3),
}
# The preprocess kernel's configuration (its only loop-free kernel).
PREPROCESS_CONFIG = dict(BLOCK_M=128, num_warps=4)
LAUNCH = ("num_warps", "num_stages")


def split(config):
    """(constexprs, launch options) of a configuration."""
    const = {k: v for k, v in config.items() if k not in LAUNCH}
    return const, {k: config[k] for k in LAUNCH if k in config}


BWD_ARGS = ["Q", "K", "V", "DO", "DQ", "DK", "DV", "M", "Delta", "sm_scale", "N_CTX"]
PREPROCESS_ARGS = ["O", "DO", "Delta", "N_CTX"]
_TYPES = dict(Q="*fp16", K="*fp16", V="*fp16", DO="*fp16", DQ="*fp16", DK="*fp16", DV="*fp16", O="*fp16",
              M="*fp32", Delta="*fp32", sm_scale="fp32", N_CTX="i32")


def grid(kernel, n_ctx, heads, **config):
    """The launch grid of `kernel` ('bwd' or 'preprocess') for `heads`
    (Z * H) heads of `n_ctx` rows."""
    block = config["BLOCK_N1"] if kernel == "bwd" else config["BLOCK_M"]
    return (triton.cdiv(n_ctx, block), heads, 1)


def ast_source(kernel="bwd", n_ctx=None, **config):
    """(ASTSource, launch options) for `kernel` in {'bwd', 'preprocess'}, with
    what the JIT specializes for 16-byte aligned tensors and, when `n_ctx`
    is None or a multiple of 16, N_CTX divisible by 16 (the same as the
    JIT's binder gives for such arguments). `config`: an entry of CONFIGS
    for 'bwd'; PREPROCESS_CONFIG plus HEAD_DIM for 'preprocess'."""
    const, launch = split(config)
    fn, names = (attn_bwd_kernel, BWD_ARGS) if kernel == "bwd" else (attn_bwd_preprocess_kernel, PREPROCESS_ARGS)
    sig = {n: _TYPES[n] for n in names}
    sig.update({k: "constexpr" for k in const})
    attrs = {(i, ): [["tt.divisibility", 16]] for i, n in enumerate(names) if _TYPES[n].startswith("*")}
    if n_ctx is None or n_ctx % 16 == 0:
        attrs[(names.index("N_CTX"), )] = [["tt.divisibility", 16]]
    return ASTSource(fn=fn, signature=sig, constexprs=const, attrs=attrs), launch
