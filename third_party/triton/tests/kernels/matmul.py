"""GEMM mainloop with TMA tensor descriptors (fp16 in, fp32 accumulate).

C[M, N] = A[M, K] @ B[N, K]^T, one 128x128 output tile per program, K walked
in 64-wide steps.  A and B are read through host-side TMA tensor descriptors
(`triton.tools.tensor_descriptor.TensorDescriptor` at launch time), and C is
written back through a descriptor too.  B is stored N x K (K-major) and
transposed in registers with `.T`, the layout the Hopper/Blackwell MMA units
like best for the B operand.

The kernel follows the structure of the standard Triton matmul tutorials
(grouped program ordering + a single K loop), written for twill's test inputs
and benchmarks.  It needs no GPU to *compile*: `ast_source_args()` returns
what `triton.compiler.ASTSource` wants, so a CPU-only machine can run
`triton.compile(...)` for a `GPUTarget("cuda", 90 or 100, 32)`.
"""

import triton
import triton.language as tl


@triton.jit
def matmul_tma_kernel(
    a_desc,  # tensordesc<fp16[BLOCK_M, BLOCK_K]> over A[M, K]
    b_desc,  # tensordesc<fp16[BLOCK_N, BLOCK_K]> over B[N, K]
    c_desc,  # tensordesc<fp16[BLOCK_M, BLOCK_N]> over C[M, N]
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # Grouped ("swizzled") ordering of output tiles: GROUP_M consecutive
    # programs walk down a column of tiles so that they share B tiles in L2.
    pid = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_per_group = GROUP_M * tiles_n
    group = pid // tiles_per_group
    first_m = group * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % tiles_per_group) % group_rows)
    pid_n = (pid % tiles_per_group) // group_rows

    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N

    # Mainloop: one TMA load of A and B per K step, one MMA into the fp32
    # accumulator.  This is the loop the software pipeliner schedules.
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        off_k = k * BLOCK_K
        a = a_desc.load([off_m, off_k])
        b = b_desc.load([off_n, off_k])
        acc = tl.dot(a, b.T, acc)

    # Epilogue: downcast and store the tile through the C descriptor.
    c_desc.store([off_m, off_n], acc.to(tl.float16))


# Default configuration: 128x128x64 tiles, as in the brief for twill's inputs.
DEFAULT_CONFIG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=3)


def ast_source_args(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, WARP_SPECIALIZE=False, SUBTILE=False,
                    **_ignored):
    """Return (signature, constexprs, attrs) for `triton.compiler.ASTSource`.

    * signature: every kernel argument -> Triton type string.  Host tensor
      descriptors are spelled `tensordesc<dtype[block shape]>` (parsed by
      `triton.language.str_to_ty`); constexpr arguments are "constexpr".
    * constexprs: values of the constexpr arguments, keyed by name.
    * attrs: the specialisation the JIT would add for 16-divisible integer
      arguments (`tt.divisibility = 16`), keyed by argument index path.

    Launch options (num_warps, num_stages, ...) are not part of the
    ASTSource; pass them in `options=` of `triton.compile`.

    WARP_SPECIALIZE=True describes `matmul_tma_ws_kernel` (which has the
    extra constexpr) instead of `matmul_tma_kernel`; see there. SUBTILE=True
    describes `matmul_tma_subtile_kernel` (A and C blocks of BLOCK_M / 2 rows).
    """
    assert not (WARP_SPECIALIZE and SUBTILE), "no kernel has both"
    rows = BLOCK_M // 2 if SUBTILE else BLOCK_M
    signature = {
        "a_desc": f"tensordesc<fp16[{rows}, {BLOCK_K}]>",
        "b_desc": f"tensordesc<fp16[{BLOCK_N}, {BLOCK_K}]>",
        "c_desc": f"tensordesc<fp16[{rows}, {BLOCK_N}]>",
        "M": "i32",
        "N": "i32",
        "K": "i32",
        "BLOCK_M": "constexpr",
        "BLOCK_N": "constexpr",
        "BLOCK_K": "constexpr",
        "GROUP_M": "constexpr",
    }
    constexprs = {"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "BLOCK_K": BLOCK_K, "GROUP_M": GROUP_M}
    if WARP_SPECIALIZE:
        signature["WARP_SPECIALIZE"] = "constexpr"
        constexprs["WARP_SPECIALIZE"] = True
    if SUBTILE:
        signature["SUBTILE"] = "constexpr"
        constexprs["SUBTILE"] = True
    names = list(signature)
    # M, N, K are assumed to be multiples of 16 (what the JIT specialises on).
    attrs = {(names.index(n), ): [["tt.divisibility", 16]] for n in ("M", "N", "K")}
    return signature, constexprs, attrs


def make_ast_source(**config):
    """Build the `triton.compiler.ASTSource` for `config` (see DEFAULT_CONFIG)."""
    from triton.compiler import ASTSource

    signature, constexprs, attrs = ast_source_args(**config)
    fn = (matmul_tma_ws_kernel if config.get("WARP_SPECIALIZE", False) else
          matmul_tma_subtile_kernel if config.get("SUBTILE", False) else matmul_tma_kernel)
    return ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)


# Same kernel with the K loop written as `tl.range(..., warp_specialize=...)`,
# so that Triton's automatic warp specialisation sees it (the loop gets the
# `tt.warp_specialize` attribute).  It is a separate function, not a flag on
# `matmul_tma_kernel`, on purpose: any edit to the source of
# `matmul_tma_kernel`'s loop header (a keyword argument to `tl.range`) moves
# the debug location Triton gives to the loop and its bound constants, and
# the TTGIR captured from that kernel (test/Inputs/triton36/gemm_*) is meant
# to stay byte-identical.  Select it with `make_ast_source(...,
# WARP_SPECIALIZE=True)`; launch it with `WARP_SPECIALIZE=True` as a
# constexpr keyword.
@triton.jit
def matmul_tma_ws_kernel(
    a_desc,  # tensordesc<fp16[BLOCK_M, BLOCK_K]> over A[M, K]
    b_desc,  # tensordesc<fp16[BLOCK_N, BLOCK_K]> over B[N, K]
    c_desc,  # tensordesc<fp16[BLOCK_M, BLOCK_N]> over C[M, N]
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_per_group = GROUP_M * tiles_n
    group = pid // tiles_per_group
    first_m = group * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % tiles_per_group) % group_rows)
    pid_n = (pid % tiles_per_group) // group_rows

    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_K), warp_specialize=WARP_SPECIALIZE):
        off_k = k * BLOCK_K
        a = a_desc.load([off_m, off_k])
        b = b_desc.load([off_n, off_k])
        acc = tl.dot(a, b.T, acc)

    c_desc.store([off_m, off_n], acc.to(tl.float16))


# The same GEMM with each output tile split into two BLOCK_M / 2-row halves
# ("sub-tiles"), each with its own A load, dot and accumulator, sharing the B
# tile: the loop twill reads for the warp-specialized Gluon GEMM
# (`matmul_gluon.py`, one consumer group per half; `matmul_gluon_plan.py`).
# A separate function for the reason given above `matmul_tma_ws_kernel`.
# Select it with `make_ast_source(..., SUBTILE=True)`: A and C descriptors
# then have BLOCK_M / 2-row blocks.
@triton.jit
def matmul_tma_subtile_kernel(
    a_desc,  # tensordesc<fp16[BLOCK_M // 2, BLOCK_K]> over A[M, K]
    b_desc,  # tensordesc<fp16[BLOCK_N, BLOCK_K]> over B[N, K]
    c_desc,  # tensordesc<fp16[BLOCK_M // 2, BLOCK_N]> over C[M, N]
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SUBTILE: tl.constexpr,
):
    HALF: tl.constexpr = BLOCK_M // 2
    pid = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_per_group = GROUP_M * tiles_n
    group = pid // tiles_per_group
    first_m = group * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % tiles_per_group) % group_rows)
    pid_n = (pid % tiles_per_group) // group_rows

    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N

    acc0 = tl.zeros((HALF, BLOCK_N), dtype=tl.float32)
    acc1 = tl.zeros((HALF, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        off_k = k * BLOCK_K
        a0 = a_desc.load([off_m, off_k])
        a1 = a_desc.load([off_m + HALF, off_k])
        b = b_desc.load([off_n, off_k])
        acc0 = tl.dot(a0, b.T, acc0)
        acc1 = tl.dot(a1, b.T, acc1)

    c_desc.store([off_m, off_n], acc0.to(tl.float16))
    c_desc.store([off_m + HALF, off_n], acc1.to(tl.float16))


# A user's warp-specialized TMA GEMM as written without Triton's help: the
# descriptors are made in the kernel (`tl.make_tensor_descriptor`, which
# needs `triton.set_allocator` at launch), the K loop is
# `tl.range(..., warp_specialize=True)`, and the epilogue adds a bias
# vector (fp32, a pointer load) and applies ReLU. Launch on a
# (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)) grid with row-major A [M, K],
# B [N, K], C [M, N]. Appended after the kernels above so that their
# locations do not move.
@triton.jit
def gemm_bias_relu(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_K), warp_specialize=True):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([off_n, k * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    cols = off_n + tl.arange(0, BLOCK_N)
    bias = tl.load(bias_ptr + cols, mask=cols < N, other=0.0)
    out = tl.maximum(acc + bias[None, :], 0.0)
    c_desc.store([off_m, off_n], out.to(tl.float16))


# `gemm_bias_relu`'s signature for `triton.compiler.ASTSource` (argument
# order: the four pointers, then M, N, K).
BIAS_RELU_SIGNATURE = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "bias_ptr": "*fp32", "M": "i32",
                       "N": "i32", "K": "i32", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
                       "BLOCK_K": "constexpr"}
