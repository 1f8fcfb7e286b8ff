"""GEMM for Hopper in Gluon: the GEMM mainloop of `matmul.py` (C = A @ B^T,
fp16 in, fp32 accumulate, 128-row output tiles walked in GROUP_M order),
warp-specialized by hand: the family of twill's joint schedules of the
sub-tiled loop (`matmul_gluon_plan.py` derives the plan).

Partitions:

* a 1-warp producer streams, per K step, the two 64-row halves of the A tile
  and the B tile into a ring of STAGES slots (one "ready" mbarrier per slot
  with the three copies' byte count; it refills a slot once every consumer
  group has released it);
* CONSUMERS 4-warp consumer groups (the first is the default partition):
  with one, the group issues both halves' m64 wgmmas of step k
  asynchronously; with two, each group issues its half's. A group then
  waits until only step k's wgmmas are in flight (so step k - 1's have
  completed) and releases that step's slot: the tensor core always has the
  next wgmmas queued;
* with PERSISTENT, a CTA walks the tiles program_id, program_id + grid, ...
  (the same GROUP_M order, so the running tiles share panels as in
  `matmul.py`), and the producer fills the next tile's slots while the
  consumers run the previous tile's epilogue (downcast, shared memory, TMA
  store; a group waits for its previous store before it reuses its buffer).

The choices are constexprs: BLOCK_N (128 or 256 output columns per tile),
STAGES (ring slots), CONSUMERS, PERSISTENT, and the register budgets of the
partitions (`register_split`). Compile without a GPU with
`compile_for(target, ...)`; launch with `launcher(kernel, a, b, c, sms, ...)`.
"""

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

from bench.kernels import gluon_hopper
from bench.kernels.gluon_hopper import desc_type as _desc_type
from bench.kernels.gluon_hopper import nvmma_layout as _layout
from bench.kernels.gluon_hopper import tma_load as _tma_load
from bench.kernels.gluon_hopper import tma_store as _tma_store

SUB_M = 64  # rows of one consumer group's half of the tile (one m64 wgmma)
BLOCK_M = 128


@gluon.jit
def _tile_offsets(tile, M, N, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr):
    """The output tile's row and column offsets, in matmul.py's GROUP_M order."""
    tiles_m = gl.cdiv(M, BLOCK_M)
    tiles_n = gl.cdiv(N, BLOCK_N)
    tiles_per_group = GROUP_M * tiles_n
    group = tile // tiles_per_group
    first_m = group * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + ((tile % tiles_per_group) % group_rows)
    pid_n = (tile % tiles_per_group) // group_rows
    return pid_m * BLOCK_M, pid_n * BLOCK_N


@gluon.jit
def _producer(a_desc, b_desc, a_s, b_s, ready, empty, M, N, K, first_tile, n_tiles, tile_step,
              BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr):
    SUB: gl.constexpr = a_desc.block_type.shape[0]
    n_k = gl.cdiv(K, BLOCK_K)
    nbytes: gl.constexpr = 2 * a_desc.block_type.nbytes + b_desc.block_type.nbytes
    it = 0
    for tile in range(first_tile, n_tiles, tile_step):
        off_m, off_n = _tile_offsets(tile, M, N, 2 * SUB, BLOCK_N, GROUP_M)
        for k in range(n_k):
            s = it % STAGES
            # A fresh barrier passes a wait on parity 1: the first lap needs no release.
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), nbytes)
            _tma_load(a_desc, [off_m, k * BLOCK_K], ready.index(s), a_s.index(2 * s))
            _tma_load(a_desc, [off_m + SUB, k * BLOCK_K], ready.index(s), a_s.index(2 * s + 1))
            _tma_load(b_desc, [off_n, k * BLOCK_K], ready.index(s), b_s.index(s))
            it += 1


@gluon.jit
def _consumer(c_desc, a_s, b_s, c_s, ready, empty, M, N, K, first_tile, n_tiles, tile_step, C: gl.constexpr,
              BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr):
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                     instr_shape=[16, BLOCK_N, 16])
    SUB: gl.constexpr = c_desc.block_type.shape[0]
    n_k = gl.cdiv(K, BLOCK_K)
    out = c_s.index(C)
    it = 0
    for tile in range(first_tile, n_tiles, tile_step):
        off_m, off_n = _tile_offsets(tile, M, N, 2 * SUB, BLOCK_N, GROUP_M)
        acc = gl.zeros([SUB, BLOCK_N], gl.float32, layout)
        for k in range(n_k):
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            acc = warpgroup_mma(a_s.index(2 * s + C), b_s.index(s).permute((1, 0)), acc, is_async=True)
            # At most this step's wgmma in flight: the previous step's slot is free.
            acc = warpgroup_mma_wait(1, deps=[acc])
            if k > 0:
                mbarrier.arrive(empty.index((it - 1) % STAGES), count=1)
            it += 1
        acc = warpgroup_mma_wait(0, deps=[acc])
        mbarrier.arrive(empty.index((it - 1) % STAGES), count=1)
        # Epilogue: this group's previous store must have read its buffer.
        tma.store_wait(0)
        out.store(acc.to(gl.float16))
        fence_async_shared()
        _tma_store(c_desc, [off_m + C * SUB, off_n], out)
    tma.store_wait(0)


@gluon.jit
def _consumer_both(c_desc, a_s, b_s, c_s, ready, empty, M, N, K, first_tile, n_tiles, tile_step,
                   BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr):
    """One consumer group for both halves: per K step, both halves' wgmmas
    issued back to back, then a wait until only those two are in flight (the
    previous step's have completed, and its slot is released)."""
    SUB: gl.constexpr = c_desc.block_type.shape[0]
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                     instr_shape=[16, BLOCK_N, 16])
    n_k = gl.cdiv(K, BLOCK_K)
    it = 0
    for tile in range(first_tile, n_tiles, tile_step):
        off_m, off_n = _tile_offsets(tile, M, N, 2 * SUB, BLOCK_N, GROUP_M)
        acc0 = gl.zeros([SUB, BLOCK_N], gl.float32, layout)
        acc1 = gl.zeros([SUB, BLOCK_N], gl.float32, layout)
        for k in range(n_k):
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            bt = b_s.index(s).permute((1, 0))
            acc0 = warpgroup_mma(a_s.index(2 * s), bt, acc0, is_async=True)
            acc1 = warpgroup_mma(a_s.index(2 * s + 1), bt, acc1, is_async=True)
            acc0, acc1 = warpgroup_mma_wait(2, deps=[acc0, acc1])
            if k > 0:
                mbarrier.arrive(empty.index((it - 1) % STAGES), count=1)
            it += 1
        acc0, acc1 = warpgroup_mma_wait(0, deps=[acc0, acc1])
        mbarrier.arrive(empty.index((it - 1) % STAGES), count=1)
        tma.store_wait(0)
        c_s.index(0).store(acc0.to(gl.float16))
        c_s.index(1).store(acc1.to(gl.float16))
        fence_async_shared()
        _tma_store(c_desc, [off_m, off_n], c_s.index(0))
        _tma_store(c_desc, [off_m + SUB, off_n], c_s.index(1))
    tma.store_wait(0)


@gluon.jit
def matmul_gluon_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                        GROUP_M: gl.constexpr, STAGES: gl.constexpr, CONSUMERS: gl.constexpr,
                        CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    SUB: gl.constexpr = a_desc.block_type.shape[0]
    gl.static_assert(c_desc.block_type.shape[0] == SUB)
    gl.static_assert(CONSUMERS == 1 or CONSUMERS == 2)
    n_tiles = gl.cdiv(M, 2 * SUB) * gl.cdiv(N, BLOCK_N)
    first_tile = gl.program_id(0)
    tile_step = gl.num_programs(0)

    a_s = gl.allocate_shared_memory(a_desc.dtype, [2 * STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_s = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    c_s = gl.allocate_shared_memory(c_desc.dtype, [2] + c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=CONSUMERS)  # one arrival per consumer group

    if CONSUMERS == 2:
        gl.warp_specialize(
            [(_consumer, (c_desc, a_s, b_s, c_s, ready, empty, M, N, K, first_tile, n_tiles, tile_step, 0,
                          BLOCK_N, BLOCK_K, GROUP_M, STAGES)),
             (_consumer, (c_desc, a_s, b_s, c_s, ready, empty, M, N, K, first_tile, n_tiles, tile_step, 1,
                          BLOCK_N, BLOCK_K, GROUP_M, STAGES)),
             (_producer, (a_desc, b_desc, a_s, b_s, ready, empty, M, N, K, first_tile, n_tiles, tile_step,
                          BLOCK_N, BLOCK_K, GROUP_M, STAGES))],
            [4, 1],
            [CONSUMER_REGS, PRODUCER_REGS])
    else:
        gl.warp_specialize(
            [(_consumer_both, (c_desc, a_s, b_s, c_s, ready, empty, M, N, K, first_tile, n_tiles, tile_step,
                               BLOCK_N, BLOCK_K, GROUP_M, STAGES)),
             (_producer, (a_desc, b_desc, a_s, b_s, ready, empty, M, N, K, first_tile, n_tiles, tile_step,
                          BLOCK_N, BLOCK_K, GROUP_M, STAGES))],
            [1],
            [PRODUCER_REGS])

    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))


# twill's plan of the 128 x 128 loop (matmul_gluon_plan): both halves' wgmmas
# on one compute group, the deepest ring the shared memory holds at one CTA
# per SM. The bench runs the plan its model chooses per size from the
# recording (bench/gpu/expected/<triton>.json, gluon gemm: 128 x 256, two groups,
# 3 slots); this default is the 128 x 128 one.
DEFAULT_CONFIG = dict(BLOCK_N=128, BLOCK_K=64, GROUP_M=8, STAGES=6, CONSUMERS=1, PERSISTENT=True, CTAS=1,
                      CONSUMER_REGS=232, PRODUCER_REGS=24, MAXNREG=None)
CONSTEXPRS = ("BLOCK_N", "BLOCK_K", "GROUP_M", "STAGES", "CONSUMERS", "CONSUMER_REGS", "PRODUCER_REGS")
cta_warps = gluon_hopper.cta_warps


def register_split(ctas_per_sm, consumers=1, regs_per_sm=64 * 1024):
    """(MAXNREG, CONSUMER_REGS, PRODUCER_REGS as a config; the register
    limit of a compute group) for `ctas_per_sm` CTAs per SM
    (gluon_hopper.register_split). With one consumer group the default
    partition is the consumer and CONSUMER_REGS is unused."""
    return gluon_hopper.register_split(ctas_per_sm, consumers, regs_per_sm)


def slot_bytes(block_n=128, block_k=64):
    """Shared memory of one ring slot: both A halves and the B tile (fp16)."""
    return 2 * (2 * SUB_M * block_k + block_n * block_k)


def shared_bytes(**config):
    """Shared memory of the ring, the output buffers and the barriers."""
    cfg = dict(DEFAULT_CONFIG, **config)
    return (cfg["STAGES"] * slot_bytes(cfg["BLOCK_N"], cfg["BLOCK_K"]) + 2 * 2 * SUB_M * cfg["BLOCK_N"]
            + 2 * 8 * cfg["STAGES"])


def _blocks(cfg):
    return [SUB_M, cfg["BLOCK_K"]], [cfg["BLOCK_N"], cfg["BLOCK_K"]], [SUB_M, cfg["BLOCK_N"]]


def ast_source(**config):
    from triton.experimental.gluon._runtime import GluonASTSource

    cfg = dict(DEFAULT_CONFIG, **config)
    a, b, c = _blocks(cfg)
    signature = {"a_desc": _desc_type(a), "b_desc": _desc_type(b), "c_desc": _desc_type(c), "M": "i32",
                 "N": "i32", "K": "i32"}
    signature.update({k: "constexpr" for k in CONSTEXPRS})
    return GluonASTSource(fn=matmul_gluon_kernel, signature=signature, constexprs={k: cfg[k] for k in CONSTEXPRS},
                          attrs={})


def compile_for(target=None, **config):
    maxnreg = dict(DEFAULT_CONFIG, **config)["MAXNREG"]
    options = dict(num_warps=4) if maxnreg is None else dict(num_warps=4, maxnreg=maxnreg)
    return triton.compile(ast_source(**config), target=target, options=options)


def launcher(kernel, a, b, c, sms, **config):
    """A function that launches the compiled `kernel` on a [M, K], b [N, K]
    into c [M, N] (fp16, contiguous): one program per tile, or with
    PERSISTENT CTAS x `sms` programs that walk the tiles."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    cfg = dict(DEFAULT_CONFIG, **config)
    M, K = a.shape
    N = b.shape[0]
    ab, bb, cb = _blocks(cfg)
    assert M % BLOCK_M == 0 and N % cfg["BLOCK_N"] == 0 and K % cfg["BLOCK_K"] == 0
    assert M > 0 and N > 0 and K > 0, "the consumers release the last K step's slot: K must be positive"
    da = TensorDescriptor.from_tensor(a, ab, _layout(ab))
    db = TensorDescriptor.from_tensor(b, bb, _layout(bb))
    dc = TensorDescriptor.from_tensor(c, cb, _layout(cb))
    tiles = (M // BLOCK_M) * (N // cfg["BLOCK_N"])
    grid = (min(tiles, cfg["CTAS"] * sms) if cfg["PERSISTENT"] else tiles, 1, 1)
    consts = tuple(cfg[k] for k in CONSTEXPRS)

    def run():
        kernel[grid](da, db, dc, M, N, K, *consts)

    return run
