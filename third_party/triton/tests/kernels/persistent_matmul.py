"""Persistent GEMMs: a fixed grid of programs walks the output tiles, C = A @ B^T
(fp16 in, fp32 accumulate), A[M, K], B[N, K], C[M, N].

Each program starts at tile `pid` and steps by the grid size; the tile loop
and the K loop are written as two nested loops with `flatten=True` on the
outer one, so Triton's `fuse_nested_loops` turns them into one loop over
(tile, k) steps whose body keeps the tile's set-up and its epilogue (the
downcast and store of C) under `scf.if`s: the shape of every persistent
kernel Triton's pipeliner sees, and the loop twill must schedule with
control flow in its body.

Two variants: `tma` reads A and B through host-side tensor descriptors and
stores C through one; `pointer` uses plain pointer loads and a masked
store. Nothing here needs a GPU to compile: `ast_source(name, **config)`
gives the `triton.compiler.ASTSource`, `CONFIGS` the launch options.
"""

import triton
import triton.language as tl


@triton.jit
def _tile_of(tile, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    # Grouped ordering of the output tiles (GROUP_M tile rows share B in L2).
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % rows, (tile % per_group) // rows


@triton.jit
def persistent_tma_kernel(a_desc, b_desc, c_desc, M, N, K, NUM_PROGRAMS: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr):
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    steps = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, NUM_PROGRAMS, flatten=True):
        tm, tn = _tile_of(tile, tiles_m, tiles_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(steps):
            a = a_desc.load([tm * BLOCK_M, k * BLOCK_K])
            b = b_desc.load([tn * BLOCK_N, k * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([tm * BLOCK_M, tn * BLOCK_N], acc.to(tl.float16))


@triton.jit
def persistent_pointer_kernel(a_ptr, b_ptr, c_ptr, M, N, K, NUM_PROGRAMS: tl.constexpr,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                              GROUP_M: tl.constexpr):
    # A, B and C row-major and contiguous: row strides K, K and N.
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    steps = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, NUM_PROGRAMS, flatten=True):
        tm, tn = _tile_of(tile, tiles_m, tiles_n, GROUP_M)
        rm = (tm * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        rn = (tn * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        rk = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(steps):
            kk = k * BLOCK_K + rk
            a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=kk[None, :] < K, other=0.0)
            b = tl.load(b_ptr + rn[:, None] * K + kk[None, :], mask=kk[None, :] < K, other=0.0)
            acc = tl.dot(a, b.T, acc)
        cm = tm * BLOCK_M + tl.arange(0, BLOCK_M)
        cn = tn * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = (cm[:, None] < M) & (cn[None, :] < N)
        tl.store(c_ptr + cm[:, None] * N + cn[None, :], acc.to(tl.float16), mask=mask)


KERNELS = {"tma": persistent_tma_kernel, "pointer": persistent_pointer_kernel}

# Launch and tile configuration (132 programs: one per H100/H200 SM).
CONFIGS = {
    "tma": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, NUM_PROGRAMS=132, num_warps=4,
                num_stages=3),
    "pointer": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, NUM_PROGRAMS=132, num_warps=4,
                    num_stages=3),
}

_CONSTEXPRS = ("NUM_PROGRAMS", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")


def split(config):
    """(constexprs, options) of a `CONFIGS` entry."""
    opts = {k: config[k] for k in ("num_warps", "num_stages")}
    return {k: config[k] for k in _CONSTEXPRS}, opts


def ast_source(name, **config):
    """(`triton.compiler.ASTSource`, options) of variant `name` ("tma" or
    "pointer") with `config` (default: `CONFIGS[name]`)."""
    from triton.compiler import ASTSource

    cx, opts = split(dict(CONFIGS[name], **config))
    if name == "tma":
        sig = {
            "a_desc": f"tensordesc<fp16[{cx['BLOCK_M']}, {cx['BLOCK_K']}]>",
            "b_desc": f"tensordesc<fp16[{cx['BLOCK_N']}, {cx['BLOCK_K']}]>",
            "c_desc": f"tensordesc<fp16[{cx['BLOCK_M']}, {cx['BLOCK_N']}]>",
        }
    else:
        sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16"}
    sig.update({"M": "i32", "N": "i32", "K": "i32"})
    sig.update({k: "constexpr" for k in _CONSTEXPRS})
    names = list(sig)
    attrs = {(names.index(n), ): [["tt.divisibility", 16]] for n in sig if n in ("M", "N", "K") or
             n.endswith("_ptr")}
    return ASTSource(fn=KERNELS[name], signature=sig, constexprs=cx, attrs=attrs), opts
