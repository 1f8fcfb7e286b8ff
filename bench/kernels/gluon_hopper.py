"""What the Hopper Gluon kernels of the bench share (fa_fwd_gluon.py,
fa_bwd_gluon.py, matmul_gluon.py): the TMA copies under either Triton's
names, a producer's ring load of two operands, fp16 shared layouts and
descriptor types for a GluonASTSource signature, and the register split of
a warp-specialized CTA."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

# TMA copies were renamed in Triton 3.7 (the old names raise there).
if hasattr(tma, "async_load"):
    tma_load = tma.async_load
    tma_store = tma.async_store
else:
    tma_load = tma.async_copy_global_to_shared
    tma_store = tma.async_copy_shared_to_global


@gluon.jit
def ring_load_pair(desc_a, desc_b, a_s, b_s, a_ready, b_ready, a_empty, b_empty, row, g, STAGES: gl.constexpr):
    """A producer's load of ring iteration g: the blocks of `desc_a` and
    `desc_b` at `row` into slot g % STAGES, each once its slot's readers
    have released it (the first lap waits on parity 1 of a fresh barrier,
    which returns at once)."""
    s = g % STAGES
    ph = ((g // STAGES) & 1) ^ 1
    mbarrier.wait(a_empty.index(s), ph)
    mbarrier.expect(a_ready.index(s), desc_a.block_type.nbytes)
    tma_load(desc_a, [row, 0], a_ready.index(s), a_s.index(s))
    mbarrier.wait(b_empty.index(s), ph)
    mbarrier.expect(b_ready.index(s), desc_b.block_type.nbytes)
    tma_load(desc_b, [row, 0], b_ready.index(s), b_s.index(s))


# Registers per thread of the producer's warpgroup (one TMA warp, padded by
# Triton to a warpgroup so that every warp can hand back registers).
PRODUCER_WARPGROUP_REGS = 24


def nvmma_layout(block):
    """The fp16 shared layout of a [rows, cols] TMA block."""
    return gl.NVMMASharedLayout.get_default_for(block, gl.float16)


def desc_type(block):
    """A host tensor descriptor over fp16 with `block`, as a signature type."""
    return f"tensordesc<fp16[{block[0]}, {block[1]}],{nvmma_layout(block)!r}>"


def cta_warps(consumers):
    """Warps of one CTA: a warpgroup per consumer group (the first is the
    default partition) and the producer's warp, padded by Triton to a
    warpgroup so that every warp can hand back registers."""
    return 4 * consumers + 4


def register_split(ctas_per_sm, consumers, regs_per_sm=64 * 1024):
    """The register configuration of a CTA of `consumers` 4-warp consumer
    groups (the first is the default partition) and a producer warpgroup for
    `ctas_per_sm` CTAs per SM: MAXNREG, the registers per thread at launch
    (a multiple of 8 with ctas_per_sm x warps x 32 x MAXNREG within the
    register file; None at one CTA, where Triton's own choice is the same),
    and the setmaxnreg budgets the partitions then get. Triton
    (AllocateWarpGroups) gives the default partition what the workers leave
    of the CTA's MAXNREG x warps x 32, rounded down to 8; with two groups the
    consumer worker asks for CONSUMER_REGS, so that the two get within 8 of
    each other; with one, the default partition is the consumer and
    CONSUMER_REGS is unused. Returns (the config's MAXNREG, CONSUMER_REGS
    and PRODUCER_REGS; the smallest consumer budget: the register limit of a
    compute group in twill's solve)."""
    warps = cta_warps(consumers)
    maxnreg = min(regs_per_sm // (ctas_per_sm * warps * 32) // 8 * 8, 256)
    # The CTA's budget per thread of one 128-thread warpgroup.
    budget = warps // 4 * maxnreg
    if consumers == 2:
        consumer = (budget - PRODUCER_WARPGROUP_REGS) // 2 // 8 * 8
        default = (budget - PRODUCER_WARPGROUP_REGS - consumer) // 8 * 8
        limit = min(consumer, default)
    elif consumers == 1:
        consumer = limit = min((budget - PRODUCER_WARPGROUP_REGS) // 8 * 8, 256)
    else:
        raise ValueError(f"{consumers} consumer groups: the kernels have one or two")
    return (dict(MAXNREG=None if ctas_per_sm == 1 else maxnreg, CONSUMER_REGS=consumer,
                 PRODUCER_REGS=PRODUCER_WARPGROUP_REGS), limit)


# A barrier among the warps of one partition (a group publishes a buffer it
# wrote from registers before one of its threads arrives on the buffer's
# mbarrier). Triton 3.7 renamed thread_barrier to barrier.
group_barrier = getattr(gl, "thread_barrier", None) or gl.barrier
