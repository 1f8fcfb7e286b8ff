// A function holding a ttg.warp_specialize is verified as the ws op's
// threads; a loop that issues asynchronous ops beside it is not covered and
// is reported unsupported (a warning), never proved with the ws op.
//
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir "--twill-schedule=lower=force scope=all arch=sm90 triton=3.6" --mlir-print-op-generic 2>/dev/null \
// RUN:   | sed 's|"tt.return"() : () -> ()|%c0_9 = "arith.constant"() <{value = 0 : i32}> : () -> i32 %c1_9 = "arith.constant"() <{value = 1 : i32}> : () -> i32 "scf.for"(%c0_9, %c1_9, %c1_9) ({ ^bb0(%i9: i32): "ttng.warp_group_dot_wait"() {pendings = 0 : i32} : () -> () "scf.yield"() : () -> () }) : (i32, i32, i32) -> () "tt.return"() : () -> ()|' \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s
// CHECK: remark: twill: pipeline proved safe: 4 rings (3, 3, 3, 3), trip counts 0..=12 [@matmul_tma_kernel
// CHECK: warning: twill: pipeline not verified: {{.*}}a pipelined loop beside a ttg.warp_specialize in one function is not verified
