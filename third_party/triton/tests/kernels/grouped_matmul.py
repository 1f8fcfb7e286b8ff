"""A grouped GEMM: one launch computes C_g = A_g @ B_g for every group g of
independent problems (fp16 in, fp32 accumulate), the kind of kernel Triton's
tutorial on grouped GEMMs teaches and MoE layers use.

Each group's sizes (M, N, K), leading dimensions and the addresses of its
three matrices are read from device arrays. A fixed grid of programs walks
the tiles of all groups in turn: program `p` takes tiles p, p + P, p + 2P,
... of the concatenated tile list. The K loop of a tile is the innermost
loop, nested in a `while` over the program's tiles of one group, nested in
the loop over groups: twill schedules the innermost loop and must leave the
loops around it as they are. Nothing here needs a GPU to compile:
`ast_source(**config)` gives the `triton.compiler.ASTSource` and the launch
options, `CONFIGS` the configurations.
"""

import triton
import triton.language as tl


@triton.jit
def grouped_matmul_kernel(a_addrs, b_addrs, c_addrs, sizes, lds, group_count, NUM_PROGRAMS: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    tile = tl.program_id(0)
    first = 0  # the first tile of group g in the concatenated list
    for g in range(group_count):
        # Sizes, leading dimensions and addresses multiples of 16, as a
        # caller that wants cp.async (16-byte copies, masks constant over 8
        # elements) guarantees.
        m = tl.multiple_of(tl.load(sizes + 3 * g), 16)
        n = tl.multiple_of(tl.load(sizes + 3 * g + 1), 16)
        k_size = tl.multiple_of(tl.load(sizes + 3 * g + 2), 16)
        lda = tl.multiple_of(tl.load(lds + 3 * g), 16)
        ldb = tl.multiple_of(tl.load(lds + 3 * g + 1), 16)
        ldc = tl.multiple_of(tl.load(lds + 3 * g + 2), 16)
        tiles_n = tl.cdiv(n, BLOCK_N)
        tiles = tl.cdiv(m, BLOCK_M) * tiles_n
        a = tl.multiple_of(tl.load(a_addrs + g).to(tl.pointer_type(tl.float16)), 16)
        b = tl.multiple_of(tl.load(b_addrs + g).to(tl.pointer_type(tl.float16)), 16)
        c = tl.multiple_of(tl.load(c_addrs + g).to(tl.pointer_type(tl.float16)), 16)
        while tile >= first and tile < first + tiles:
            here = tile - first
            rows = (here // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
            cols = (here % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
            ks = tl.arange(0, BLOCK_K)
            a_tile = a + rows[:, None] * lda + ks[None, :]
            b_tile = b + ks[:, None] * ldb + cols[None, :]
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for step in range(tl.cdiv(k_size, BLOCK_K)):
                left = k_size - step * BLOCK_K
                x = tl.load(a_tile, mask=(rows[:, None] < m) & (ks[None, :] < left), other=0.0)
                y = tl.load(b_tile, mask=(ks[:, None] < left) & (cols[None, :] < n), other=0.0)
                acc = tl.dot(x, y, acc)
                a_tile += BLOCK_K
                b_tile += BLOCK_K * ldb
            inside = (rows[:, None] < m) & (cols[None, :] < n)
            tl.store(c + rows[:, None] * ldc + cols[None, :], acc.to(tl.float16), mask=inside)
            tile += NUM_PROGRAMS
        first += tiles


# Tile and launch configurations (132 programs: one per H100/H200 SM).
CONFIGS = {
    "128x128x32_w4_s3": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, NUM_PROGRAMS=132, num_warps=4, num_stages=3),
}

_CONSTEXPRS = ("NUM_PROGRAMS", "BLOCK_M", "BLOCK_N", "BLOCK_K")


def ast_source(**config):
    """(`triton.compiler.ASTSource`, launch options) of a configuration
    (default: the first of `CONFIGS`)."""
    from triton.compiler import ASTSource

    config = dict(next(iter(CONFIGS.values())), **config)
    const = {k: config[k] for k in _CONSTEXPRS}
    opts = {k: config[k] for k in ("num_warps", "num_stages")}
    sig = {"a_addrs": "*i64", "b_addrs": "*i64", "c_addrs": "*i64", "sizes": "*i32", "lds": "*i32",
           "group_count": "i32"}
    sig.update({k: "constexpr" for k in _CONSTEXPRS})
    names = list(sig)
    attrs = {(names.index(n), ): [["tt.divisibility", 16]] for n in ("a_addrs", "b_addrs", "c_addrs", "sizes",
                                                                      "lds")}
    return ASTSource(fn=grouped_matmul_kernel, signature=sig, constexprs=const, attrs=attrs), opts
