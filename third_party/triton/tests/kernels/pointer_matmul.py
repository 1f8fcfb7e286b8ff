"""Pointer-load (cp.async) matmul kernels in the style of Triton's tutorial 03:
the shape of kernel that users write first, and the one twill's schedules made
Triton pipeline unsafely (a cp.async into a ring slot an in-flight wgmma
still read). Test fixtures of the product: no GPU is needed to compile them
(`ast_source` gives `triton.compiler.ASTSource` arguments).

* `matmul_kernel`: C = A @ B (A: M x K, B: K x N, fp16 in, fp32 accumulate),
  grouped tile order, a K loop of masked pointer loads (`other=0`), so K need
  not be a multiple of BLOCK_K.
* `matmul_bias_relu_kernel`: the same loop, an epilogue adding a bias row and
  applying ReLU.
"""

import triton
import triton.language as tl
from triton.compiler import ASTSource


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    rows = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % in_group) % rows)
    pid_n = (pid % in_group) // rows
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(tl.float16)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def matmul_bias_relu_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                            stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
    acc = tl.maximum(acc + bias[None, :].to(tl.float32), 0.0)
    c_ptrs = c_ptr + stride_cm * offs_m[:, None] + stride_cn * offs_n[None, :]
    tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# Configurations from the tutorial's autotuning list for Hopper-class GPUs
# (name -> constexprs and launch options).
CONFIGS = {
    "128x64x64_w4_s4": dict(BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=4),
    "128x256x64_w8_s3": dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3),
    "64x128x32_w4_s4": dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=32, GROUP_M=8, num_warps=4, num_stages=4),
    "128x128x32_w4_s2": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8, num_warps=4, num_stages=2),
}
BIAS_CONFIGS = {
    "128x128x64_w8_s3": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3),
}
LAUNCH = ("num_warps", "num_stages")


def split(config):
    """(constexprs, launch options) of a configuration."""
    const = {k: v for k, v in config.items() if k not in LAUNCH}
    return const, {k: config[k] for k in LAUNCH if k in config}


_ARGS = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm",
         "stride_cn"]


def _signature(names, ptrs, consts):
    sig = {n: ("*fp16" if n in ptrs else "i32") for n in names}
    sig.update({k: "constexpr" for k in consts})
    return sig


def ast_source(kernel="matmul", **config):
    """(ASTSource, launch options) for `kernel` in {'matmul', 'bias_relu'}."""
    const, launch = split(config)
    if kernel == "matmul":
        fn, names, ptrs = matmul_kernel, _ARGS, {"a_ptr", "b_ptr", "c_ptr"}
    else:
        fn = matmul_bias_relu_kernel
        names = _ARGS[:2] + ["bias_ptr"] + _ARGS[2:]
        ptrs = {"a_ptr", "b_ptr", "bias_ptr", "c_ptr"}
    # What the JIT specializes: unit strides become constants.
    const = dict(const, stride_ak=1, stride_bn=1, stride_cn=1)
    sig = _signature(names, ptrs, const)
    # What the JIT specializes for 16-divisible pointers and strides.
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in ptrs}
    for n in ("stride_am", "stride_bk", "stride_cm", "M", "N", "K"):
        attrs[(names.index(n),)] = [["tt.divisibility", 16]]
    return ASTSource(fn=fn, signature=sig, constexprs=const, attrs=attrs), launch
