"""Small Triton kernels written only to produce test inputs (see capture.py).

loop_with_if_kernel
    A block-sparse GEMM mainloop: C[M, N] = sum over the K blocks k whose
    flag `kmask[k]` is non-zero of A[:, k-block] @ B[k-block, :].  The flag
    is loaded from memory inside the loop, so the branch is data dependent
    and cannot be folded at compile time; the then-branch holds a load and a
    dot, so it is not turned into an `arith.select` either.  In TTGIR the
    single `scf.for` therefore keeps an `scf.if` in its body.  A is loaded
    unconditionally, B only under the if.  Plain pointer loads (no TMA), so
    the kernel also compiles for targets without tensor descriptors.

`make_ast_source()` returns the `triton.compiler.ASTSource` for it, so it can
be compiled for a GPUTarget on a machine without a GPU.
"""

import triton
import triton.language as tl


@triton.jit
def loop_with_if_kernel(
    a_ptr,  # *fp16 [M, K], row-major
    b_ptr,  # *fp16 [K, N], row-major
    kmask_ptr,  # *i32 [cdiv(K, BLOCK_K)]: K block k contributes iff kmask[k] != 0
    c_ptr,  # *fp32 [M, N], row-major
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * N + offs_n[None, :]

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs)
        if tl.load(kmask_ptr + k) != 0:
            b = tl.load(b_ptrs)
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * N

    c_ptrs = c_ptr + offs_m[:, None] * N + offs_n[None, :]
    tl.store(c_ptrs, acc)


LOOP_WITH_IF_CONFIG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=3)


def make_ast_source(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, **_ignored):
    """`triton.compiler.ASTSource` for loop_with_if_kernel (M, N, K and the
    pointers specialised as 16-divisible, as the JIT would for aligned data)."""
    from triton.compiler import ASTSource

    signature = {
        "a_ptr": "*fp16",
        "b_ptr": "*fp16",
        "kmask_ptr": "*i32",
        "c_ptr": "*fp32",
        "M": "i32",
        "N": "i32",
        "K": "i32",
        "BLOCK_M": "constexpr",
        "BLOCK_N": "constexpr",
        "BLOCK_K": "constexpr",
    }
    constexprs = {"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "BLOCK_K": BLOCK_K}
    names = list(signature)
    attrs = {(names.index(n), ): [["tt.divisibility", 16]]
             for n in ("a_ptr", "b_ptr", "kmask_ptr", "c_ptr", "M", "N", "K")}
    return ASTSource(fn=loop_with_if_kernel, signature=signature, constexprs=constexprs, attrs=attrs)
