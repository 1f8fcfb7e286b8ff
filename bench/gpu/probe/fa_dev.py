"""FlashAttention forward (non-causal) with *device-side* tensor descriptors.

The same computation as `bench/kernels/fa_fwd.py::attn_fwd_kernel`, but the
descriptors are made in the kernel (`tl.make_tensor_descriptor`) from plain
pointers instead of being passed from the host. That is the one difference
that lets Triton's Hopper warp specialization (`warp_specialize=True`,
num_warps=4: one producer and two consumer warp groups) compile this loop:
with host descriptors both Triton 3.6 and 3.9 stop in
NVGPUWarpSpecialization (the data partitioning splits the Q load into two
64-row halves, which a host descriptor typed [128, HEAD_DIM] cannot take).
Device-side descriptors need `triton.set_allocator` at launch.

Used by bench/gpu/probe/ws_probe.py only.
"""
import triton
import triton.language as tl

@triton.jit
def attn_fwd_dev(sm_scale, M, Z, H, Q, K, V, O, N_CTX,
                 HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 WARP_SPECIALIZE: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    rows = Z * H * N_CTX
    desc_q = tl.make_tensor_descriptor(Q, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_M, HEAD_DIM])
    desc_k = tl.make_tensor_descriptor(K, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM])
    desc_v = tl.make_tensor_descriptor(V, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM])
    desc_o = tl.make_tensor_descriptor(O, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_M, HEAD_DIM])
    row0 = off_z * (H * N_CTX) + off_h * N_CTX
    q_row = row0 + start_m * BLOCK_M
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.full([BLOCK_M], 1.0, dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    q = desc_q.load([q_row, 0])
    kv_row = row0
    for start_n in tl.range(0, N_CTX, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        k = desc_k.load([kv_row, 0])
        qk = tl.dot(q, k.T)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = desc_v.load([kv_row, 0])
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
        kv_row += BLOCK_N
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(M + off_hz * N_CTX + offs_m, m_i)
    desc_o.store([q_row, 0], acc.to(tl.float16))

def src(BLOCK_N=128, HEAD_DIM=128, BLOCK_M=128, WS=True):
    """`triton.compiler.ASTSource` of the kernel at this configuration."""
    from triton.compiler import ASTSource
    sig = {"sm_scale": "fp32", "M": "*fp32", "Z": "i32", "H": "i32", "Q": "*fp16", "K": "*fp16", "V": "*fp16", "O": "*fp16",
           "N_CTX": "i32", "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "WARP_SPECIALIZE": "constexpr"}
    cst = dict(HEAD_DIM=HEAD_DIM, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, WARP_SPECIALIZE=WS)
    names = list(sig)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in ("M", "Q", "K", "V", "O", "N_CTX")}
    return ASTSource(fn=attn_fwd_dev, signature=sig, constexprs=cst, attrs=attrs)
