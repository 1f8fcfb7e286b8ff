"""FlashAttention forward, pipelined by hand in the source: S = Q K^T for
block j+1 is issued before the softmax of block j (FA3's intra-warpgroup
overlap, written the only way Triton's language allows).

It tests whether Triton keeps the next S's wgmma in flight across the
softmax. It does not: Triton 3.6 and 3.9 both make the wgmma async and then
wait for it (`warp_group_dot_wait {pendings = 0}`) right after issuing it,
because its result is not the accumulator of the same dot in the next
iteration (the only pattern Triton's wgmma pipelining keeps in flight). Run
`python -m bench.gpu.probe.show_waits` (CPU only) to see the loop body.
Used by that script only; BENCHMARKS.md has the finding.
"""

import triton
import triton.language as tl

from third_party.triton.tests.kernels import fa_fwd  # noqa: E402
from third_party.triton.tests.kernels.fa_fwd import _attn_fwd_store, _softmax_update  # noqa: E402


@triton.jit
def attn_fwd_pp(sm_scale, M, Z, H, desc_q, desc_k, desc_v, desc_o, N_CTX,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                WARP_SPECIALIZE: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    row0 = off_z * (H * N_CTX) + off_h * N_CTX
    q_row = row0 + start_m * BLOCK_M
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.full([BLOCK_M], 1.0, dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    q = desc_q.load([q_row, 0])
    # Source-level pipelining: S for block j+1 is issued before the softmax of block j.
    k = desc_k.load([row0, 0])
    qk = tl.dot(q, k.T)
    for start_n in tl.range(0, N_CTX - BLOCK_N, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        k_next = desc_k.load([row0 + start_n + BLOCK_N, 0])
        qk_next = tl.dot(q, k_next.T)
        p, m_i, l_i, acc = _softmax_update(qk, m_i, l_i, acc, qk_scale, offs_m, offs_n, start_n, False)
        v = desc_v.load([row0 + start_n, 0])
        acc = tl.dot(p.to(tl.float16), v, acc)
        qk = qk_next
    # The last block, whose S the loop issued.
    p, m_i, l_i, acc = _softmax_update(qk, m_i, l_i, acc, qk_scale, offs_m, offs_n, N_CTX - BLOCK_N, False)
    v = desc_v.load([row0 + N_CTX - BLOCK_N, 0])
    acc = tl.dot(p.to(tl.float16), v, acc)
    _attn_fwd_store(acc, l_i, m_i, M, off_hz * N_CTX + offs_m, desc_o, q_row)


def src(BLOCK_N=128, HEAD_DIM=128, BLOCK_M=128):
    """`triton.compiler.ASTSource` of the kernel: the arguments of
    fa_fwd.attn_fwd_kernel (host-side descriptors)."""
    from triton.compiler import ASTSource

    signature, constexprs, attrs = fa_fwd.ast_source_args(HEAD_DIM=HEAD_DIM, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                                          WARP_SPECIALIZE=False)
    return ASTSource(fn=attn_fwd_pp, signature=signature, constexprs=constexprs, attrs=attrs)
