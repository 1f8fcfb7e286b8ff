"""twill for pip-installed Triton.

    import twill_triton
    twill_triton.enable()      # or TRITON_TWILL=1 in the environment
    ...                        # compile / launch Triton kernels as usual
    twill_triton.disable()

twill replaces Triton's own loop scheduler (`add_assign_latencies` +
`add_schedule_loops`) in the `ttgir` stage: the module is exported in MLIR
generic form, the loops are scheduled by twill's MLIR pass (`twill-opt
--twill-schedule`, run as a subprocess with a timeout), the result is parsed
back by Triton, and Triton continues from `add_pipeline` (and its warp
specialization) to cubin. Any failure falls back to Triton's own schedule with
one warning on the `twill` logger (`TWILL_STRICT=1` raises instead).

Environment:
    TRITON_TWILL=1      enable at startup (needs `pip install ./third_party/triton`)
    TWILL_OPT=PATH      the twill-opt binary (default: the wheel's bundled one, on PATH, or the repo's target/release)
    TWILL_TIMEOUT=SECS  wall-clock guard per loop (default 30; the budget decides)
    TWILL_BUDGET=M      the solver's work per kernel, millions of z3 resource units
                        (default: the pass's, about 2 s on a 2-core machine; 0: none);
                        deterministic: the same schedule under any load
    TWILL_SCOPE=ws|all  which loops (default ws: those marked warp_specialize)
    TWILL_DUMP_DIR=DIR  write every exported loop, the pass output and the decisions
    TWILL_STRICT=1      raise TwillError instead of falling back
    TWILL_CACHE_DIR=D   the schedule cache (default ~/.triton/twill, beside
                        Triton's cache, under TRITON_HOME if set; `off`: none):
                        a kernel compiled again, in any process, takes twill's
                        answer from it without running twill-opt
    TWILL_REPLAY_DIR=D  read D as a schedule cache copied from another machine
                        (read-only, no twill-opt needed); an older hook's
                        TWILL_DUMP_DIR is read there too
    TWILL_PARTITIONS=0  on sm100, write stages only and let Triton partition
                        around them (default: twill's own partitions where
                        Triton can build them)
    TWILL_LOWER=1       on sm90, lower each loop twill can to its own warp-specialized
                        code (verified before it is emitted), before Triton's
                        Hopper warp specialization; the others as without it
    TWILL_TIES=triton   where twill's model gives Triton's own schedule of a loop the
                        same I, keep Triton's; twill: twill's (default deeper:
                        Triton's where it has more stages, else twill's)
    TWILL_UNVERIFIABLE=schedule  also solve the loops Triton warp-specializes on
                        sm100, whose code the pipeline verifier does not model
                        (default skip: left to Triton unsolved; the kernel
                        falls back either way)
    TWILL_OPTIONS=S     more pass options, space separated, as twill-opt's
                        --twill-schedule takes them (e.g. "objective=slack
                        loads=last"); enable(extra_options=...) overrides it

Configuration choice by twill's model (no GPU, no autotuning):
`twill_triton.configure.choose` compiles candidate configurations with twill
and ranks them by modeled time on the machine (twill's I and L per loop, the
busiest unit's cycles, CTAs per SM from the compiled kernel's shared memory,
registers and warps). It reads the pass's typed report, which every
decision keeps (`Decision.report`, schema twill.schedule-report/1,
docs/report-schema.md), never the remarks' prose.
"""

from .hook import TwillError, decisions, disable, enable, is_enabled

__all__ = ["enable", "disable", "is_enabled", "decisions", "TwillError"]
__version__ = "0.1.0"
