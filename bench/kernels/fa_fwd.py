"""FlashAttention forward (non-causal) with TMA tensor descriptors.

One program computes a BLOCK_M x HEAD_DIM tile of O for one (batch, head):

    S = Q K^T * sm_scale,   P = softmax(S),   O = P V

using the online-softmax recurrence of FlashAttention-2, in base 2 (the scale
is pre-multiplied by log2(e) so that `exp2` can be used).  Q, K, V and O are
viewed as 2-D [Z * H * N_CTX, HEAD_DIM] fp16 tensors and accessed through
host-side tensor descriptors; M (the log-sum-exp per row, needed by the
backward pass) is written through a plain pointer.

The inner loop over K/V blocks is a `tl.range(..., warp_specialize=...)`, so
Triton's automatic warp specialisation sees it (the loop gets the
`tt.warp_specialize` attribute).  Structure follows the standard Triton
fused-attention tutorial; written for twill's test inputs and benchmarks.

`ast_source_args()` returns what `triton.compiler.ASTSource` wants, so the
kernel can be compiled for a GPUTarget on a machine without a GPU.
"""

import triton
import triton.language as tl


@triton.jit
def attn_fwd_kernel(
    sm_scale,  # fp32 softmax scale (usually 1/sqrt(HEAD_DIM))
    M,  # *fp32 [Z * H * N_CTX]: row-wise log2-sum-exp, for the backward pass
    Z,
    H,
    desc_q,  # tensordesc<fp16[BLOCK_M, HEAD_DIM]>
    desc_k,  # tensordesc<fp16[BLOCK_N, HEAD_DIM]>
    desc_v,  # tensordesc<fp16[BLOCK_N, HEAD_DIM]>
    desc_o,  # tensordesc<fp16[BLOCK_M, HEAD_DIM]>
    N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
):
    tl.static_assert(BLOCK_N <= HEAD_DIM)
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H

    # Row offsets into the flattened [Z * H * N_CTX, HEAD_DIM] views.
    row0 = off_z * (H * N_CTX) + off_h * N_CTX  # first row of this (z, h)
    q_row = row0 + start_m * BLOCK_M

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)

    # Running statistics of the online softmax, and the output accumulator.
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # running max
    l_i = tl.full([BLOCK_M], 1.0, dtype=tl.float32)  # running denominator
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    # Work in base 2: exp(x * s) == exp2(x * s * log2(e)).
    qk_scale = sm_scale * 1.44269504  # log2(e)

    # Q stays resident (registers/shared memory) for the whole loop.
    q = desc_q.load([q_row, 0])

    # Non-causal: every K/V block of this (z, h) contributes.
    kv_row = row0
    for start_n in tl.range(0, N_CTX, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        # S = Q K^T (K is loaded [BLOCK_N, HEAD_DIM] and transposed).
        k = desc_k.load([kv_row, 0])
        qk = tl.dot(q, k.T)

        # Online softmax update.
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)  # rescale factor for old state
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]

        # O += P V.
        v = desc_v.load([kv_row, 0])
        acc = tl.dot(p.to(tl.float16), v, acc)

        m_i = m_ij
        kv_row += BLOCK_N

    # Epilogue: normalise, store the log-sum-exp and the output tile.
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(M + off_hz * N_CTX + offs_m, m_i)
    desc_o.store([q_row, 0], acc.to(tl.float16))


# Default configurations per target, in the spirit of the tutorial's tuned
# choices for HEAD_DIM=128, fp16.  On Blackwell with warp specialisation the
# tutorial caps registers with maxnreg=168 for this shape.
DEFAULT_CONFIGS = {
    90: dict(HEAD_DIM=128, BLOCK_M=128, BLOCK_N=128, WARP_SPECIALIZE=True, num_warps=8, num_stages=3),
    100: dict(HEAD_DIM=128, BLOCK_M=128, BLOCK_N=128, WARP_SPECIALIZE=True, num_warps=4, num_stages=3, maxnreg=168),
}


def ast_source_args(HEAD_DIM=128, BLOCK_M=128, BLOCK_N=128, WARP_SPECIALIZE=True, **_ignored):
    """Return (signature, constexprs, attrs) for `triton.compiler.ASTSource`.

    * signature: every kernel argument -> Triton type string (`*fp32` for a
      pointer, `tensordesc<fp16[rows, cols]>` for a host tensor descriptor,
      "constexpr" for constexpr arguments).
    * constexprs: values of the constexpr arguments, keyed by name.
    * attrs: the JIT's specialisation for the M pointer and N_CTX
      (`tt.divisibility = 16`), keyed by argument index path.

    Launch options (num_warps, num_stages, maxnreg) go in `options=` of
    `triton.compile`, not here.
    """
    signature = {
        "sm_scale": "fp32",
        "M": "*fp32",
        "Z": "i32",
        "H": "i32",
        "desc_q": f"tensordesc<fp16[{BLOCK_M}, {HEAD_DIM}]>",
        "desc_k": f"tensordesc<fp16[{BLOCK_N}, {HEAD_DIM}]>",
        "desc_v": f"tensordesc<fp16[{BLOCK_N}, {HEAD_DIM}]>",
        "desc_o": f"tensordesc<fp16[{BLOCK_M}, {HEAD_DIM}]>",
        "N_CTX": "i32",
        "HEAD_DIM": "constexpr",
        "BLOCK_M": "constexpr",
        "BLOCK_N": "constexpr",
        "WARP_SPECIALIZE": "constexpr",
    }
    constexprs = {"HEAD_DIM": HEAD_DIM, "BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "WARP_SPECIALIZE": WARP_SPECIALIZE}
    names = list(signature)
    attrs = {(names.index(n), ): [["tt.divisibility", 16]] for n in ("M", "N_CTX")}
    return signature, constexprs, attrs


def make_ast_source(**config):
    """Build the `triton.compiler.ASTSource` for `config` (see DEFAULT_CONFIGS)."""
    from triton.compiler import ASTSource

    signature, constexprs, attrs = ast_source_args(**config)
    return ASTSource(fn=attn_fwd_kernel, signature=signature, constexprs=constexprs, attrs=attrs)
