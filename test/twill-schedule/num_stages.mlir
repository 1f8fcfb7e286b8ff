// The user's num_stages (`num-stages=`, Triton's `num_stages`; the hook
// passes it) bounds the stages twill writes unless `stages=free`; a loop's
// own tt.num_stages wins for that loop. The remark and the report say the
// bound, the stages chosen and why. Inputs: the GEMM main loop of
// bench/kernels/matmul.py in Triton 3.6.0 TTGIR (Inputs/triton36, see
// capture.py) and Inputs/two_loops_sm90.mlir.

// Fewer stages than asked, and why (derived from the solve).
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all num-stages=3 report=%t.sm90.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FEWER
// RUN: FileCheck %s --check-prefix=FEWER-JSON < %t.sm90.json
// FEWER: remark: twill: scheduled matmul_tma_kernel_loop1: I=3 {{.*}} stages=2 {{.*}}[num_stages=3 (option): 2 stages, fewer: I=3 is the minimum at any number of stages (every smaller I refuted, none by the bound), and its shortest schedule (L=3) with the loads' prefetch takes 2; more stages would add buffers, not speed]
// FEWER-JSON: "stages": 2,
// FEWER-JSON: "num_stages": {
// FEWER-JSON-NEXT: "requested": 3,
// FEWER-JSON-NEXT: "source": "option",
// FEWER-JSON-NEXT: "mode": "bound",
// FEWER-JSON-NEXT: "cut_below": [],

// The FA forward on sm100 (Inputs/triton36/fa_fwd_sm100.before.mlir) takes
// 3 stages at its free optimum (I=20): at num_stages=2 the bound binds, the
// record names the Is it cut, and the attributes keep 2 stages.
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm100.before.mlir --twill-schedule="arch=sm100 scope=all num-stages=2" 2>&1 | FileCheck %s --check-prefix=BOUND
// BOUND: remark: twill: scheduled attn_fwd_kernel_loop1: I=26 {{.*}} stages=2 {{.*}}[num_stages=2 (option): at the bound; the bound cut the lengths searched at I=11..24, where more stages might allow a smaller I (stages=free solves without it)]
// BOUND: tt.scheduled_max_stage = 1 : i32

// On sm100 the GEMM's free optimum (I=2) takes 4 stages; within num_stages=3
// twill's schedule (I=3) is exactly Triton's own assignment
// (Inputs/triton36/gemm_sm100.triton_schedule.mlir): left to Triton.
// RUN: %twill-opt %inputs/triton36/gemm_sm100.before.mlir --twill-schedule="arch=sm100 scope=all num-stages=3" 2>&1 | FileCheck %s --check-prefix=SAME100
// SAME100: remark: twill: skipped loop: twill's schedule (I=3, L=2, 3 stages) is Triton's own assignment at num_stages=3 (loads in stage 0 after their readers, the rest in stage 2)
// SAME100-NOT: loop.stage

// stages=free: the same loop at its free optimum, above the user's number.
// RUN: %twill-opt %inputs/triton36/gemm_sm100.before.mlir --twill-schedule="arch=sm100 scope=all num-stages=3 stages=free" 2>&1 | FileCheck %s --check-prefix=FREE
// FREE: remark: twill: scheduled matmul_tma_kernel_loop1: I=2 {{.*}} stages=4 {{.*}}[num_stages=3 (option): 4 stages, above it (stages=free)]
// FREE: tt.scheduled_max_stage = 3 : i32

// Within 2 stages no schedule exists on sm100 (the load issued after its
// tcgen05 reader takes a stage of its own): the failure names what was
// tried, software pipelining only for a loop not marked warp_specialize.
// RUN: %twill-opt %inputs/triton36/gemm_sm100.before.mlir --twill-schedule="arch=sm100 scope=all num-stages=2" 2>&1 | FileCheck %s --check-prefix=NONE
// NONE: remark: twill: skipped loop: no schedule: no software-pipelined schedule with I <= {{[0-9]+}} within 2 stages [tried: software pipelining only: the loop is not marked tt.warp_specialize; at most 2 stages (num_stages)]
// NONE-NOT: loop.stage

// Twill's schedule is Triton's own assignment at num_stages=2 (loads and
// their address arithmetic in stage 0 after their readers, the rest in stage
// 1; test/Inputs/triton36/gemm_sm90.triton_schedule.mlir is Triton's at 3):
// left to Triton, reported as such.
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all num-stages=2 loads=last report=%t.same.json" 2>&1 | FileCheck %s --check-prefix=SAME
// RUN: FileCheck %s --check-prefix=SAME-JSON < %t.same.json
// SAME: remark: twill: skipped loop: twill's schedule (I=3, L=3, 2 stages) is Triton's own assignment at num_stages=2 (loads in stage 0 after their readers, the rest in stage 1)
// SAME-NOT: loop.stage
// SAME-JSON: "decision": "skipped",
// SAME-JSON-NEXT: "reason": "same_as_triton",

// num_stages=1: Triton does not pipeline the loop; neither does twill.
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all num-stages=1" 2>&1 | FileCheck %s --check-prefix=ONE
// ONE: remark: twill: skipped loop: num_stages=1: Triton does not pipeline this loop, and within one stage no load is issued ahead (stages=free lifts the bound)
// ONE-NOT: loop.stage

// A loop's own tt.num_stages (tl.range(num_stages=1)) wins over the option
// for that loop; the other loop keeps the option's.
// RUN: sed 's/} {tt.warp_specialize} loc("ws_loop")/} {tt.num_stages = 1 : i32, tt.warp_specialize} loc("ws_loop")/' %inputs/two_loops_sm90.mlir | %twill-opt --twill-schedule="arch=sm90 scope=all num-stages=3" 2>&1 | FileCheck %s --check-prefix=LOOP
// LOOP: remark: loc("ws_loop"): twill: skipped loop: num_stages=1
// LOOP: remark: loc("plain_loop"): twill: scheduled two_loops_loop2: {{.*}}[num_stages=3 (option): 2 stages, fewer

// Without num-stages nothing is bounded or reported.
// RUN: %twill-opt %inputs/triton36/gemm_sm100.before.mlir --twill-schedule="arch=sm100 scope=all" 2>&1 | FileCheck %s --check-prefix=UNSET
// UNSET: remark: twill: scheduled matmul_tma_kernel_loop1: I=2 {{.*}} stages=4
// UNSET-NOT: num_stages=
