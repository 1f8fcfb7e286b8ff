"""FlashAttention forward, pipelined by hand in the source: S = Q K^T for
block j+1 is issued before the softmax of block j (FA3's intra-warpgroup
overlap, written the only way Triton's language allows).

It tests whether Triton keeps the next S's wgmma in flight across the
softmax. It does not: Triton 3.6 and 3.9 both make the wgmma async and then
wait for it (`warp_group_dot_wait {pendings = 0}`) right after issuing it,
because its result is not the accumulator of the same dot in the next
iteration (the only pattern Triton's wgmma pipelining keeps in flight). Run
`python bench/gpu/probe/show_waits.py` (CPU only) to see the loop body.
Used by that script only; BENCHMARKS.md has the finding.
"""
import triton
import triton.language as tl

@triton.jit
def attn_fwd_pp(sm_scale, M, Z, H, desc_q, desc_k, desc_v, desc_o, N_CTX,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    row0 = off_z * (H * N_CTX) + off_h * N_CTX
    q_row = row0 + start_m * BLOCK_M
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.full([BLOCK_M], 1.0, dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    q = desc_q.load([q_row, 0])
    # Source-level pipelining: S for block j+1 is issued before the softmax of block j.
    k = desc_k.load([row0, 0])
    qk = tl.dot(q, k.T)
    kv_row = row0
    for start_n in tl.range(0, N_CTX - BLOCK_N, BLOCK_N):
        k_next = desc_k.load([kv_row + BLOCK_N, 0])
        qk_next = tl.dot(q, k_next.T)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = desc_v.load([kv_row, 0])
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
        qk = qk_next
        kv_row += BLOCK_N
    m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
    alpha = tl.math.exp2(m_i - m_ij)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    v = desc_v.load([kv_row, 0])
    acc = tl.dot(p.to(tl.float16), v, acc)
    m_i = m_ij
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(M + off_hz * N_CTX + offs_m, m_i)
    desc_o.store([q_row, 0], acc.to(tl.float16))

def src(BLOCK_N=128, HEAD_DIM=128, BLOCK_M=128):
    """`triton.compiler.ASTSource` of the kernel (host-side descriptors)."""
    from triton.compiler import ASTSource
    sig = {"sm_scale": "fp32", "M": "*fp32", "Z": "i32", "H": "i32",
           "desc_q": f"tensordesc<fp16[{BLOCK_M}, {HEAD_DIM}]>", "desc_k": f"tensordesc<fp16[{BLOCK_N}, {HEAD_DIM}]>",
           "desc_v": f"tensordesc<fp16[{BLOCK_N}, {HEAD_DIM}]>", "desc_o": f"tensordesc<fp16[{BLOCK_M}, {HEAD_DIM}]>",
           "N_CTX": "i32", "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
    cst = dict(HEAD_DIM=HEAD_DIM, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    names = list(sig)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in ("M", "N_CTX")}
    return ASTSource(fn=attn_fwd_pp, signature=sig, constexprs=cst, attrs=attrs)
