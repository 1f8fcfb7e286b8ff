// Each rule of the pipeline-protocol verifier broken once by editing one
// line of a pipeline Triton built and the verifier proved (stock.mlir): the
// tutorial-style cp.async matmul (rings of 4 slots, loads 3 iterations
// ahead, one wgmma in flight) and the TMA GEMM (rings of 3 with an mbarrier
// ring). Every mutant is rejected, by the rule it breaks.
//
// One wgmma too many left in flight: the copy for iteration i + 3 lands in
// the slot the wgmma of iteration i - 1 still reads.
// RUN: sed 's/<{pendings = 1 : i32}>/<{pendings = 2 : i32}>/' %inputs/pipelined/ptr_matmul_128x64x64_stock_triton36.mlir \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=R1
// R1: warning: twill: pipeline rejected: rule 1 (WriteWhileRead): ttg.async_copy_global_to_local @ loc("a"({{.*}})) writes slot {{[0-9]}} of loc("a"({{.*}})) while ttng.warp_group_dot @ loc("acc"({{.*}})) may still read it
//
// The insert index never advances: each copy lands on the one before it.
// RUN: sed 's/%acc_114 = "arith.addi"(%arg13, %3)/%acc_114 = "arith.addi"(%arg13, %4)/' %inputs/pipelined/ptr_matmul_128x64x64_stock_triton36.mlir \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=R2
// R2: rule 2 (WriteWhileWriting): ttg.async_copy_global_to_local @ loc("a"({{.*}})) writes slot {{[0-9]}} of loc("a"({{.*}})) while the write of ttg.async_copy_global_to_local @ loc("a"({{.*}})) is in flight
//
// The wait leaves two commit groups too many outstanding.
// RUN: sed 's/<{num = 4 : i32}>/<{num = 6 : i32}>/' %inputs/pipelined/ptr_matmul_128x64x64_stock_triton36.mlir \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=R3
// R3: rule 3 (ReadBeforeWrite): ttng.warp_group_dot @ loc("acc"({{.*}})) reads slot 0 of loc("a"({{.*}})) before the write of ttg.async_copy_global_to_local @ loc("a"({{.*}})) completed
//
// The extract index wraps at 3 in a ring of 4: reads leave the ring's order.
// RUN: sed 's/%acc_105 = "arith.cmpi"(%acc_104, %12)/%acc_105 = "arith.cmpi"(%acc_104, %14)/' %inputs/pipelined/ptr_matmul_128x64x64_stock_triton36.mlir \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=R4
// R4: rule 4 (WrongSlot): ttng.warp_group_dot @ loc("acc"({{.*}})) on loc("{{a|b}}"({{.*}})): read #{{[0-9]+}} of the ring reads slot {{[0-9]}}, the value #{{[0-9]+}} was written to slot {{[0-9]}}
//
// No expect on the loop's barrier: the wait for its phase never returns.
// RUN: sed '/"ttng.barrier_expect"(%acc_45, %acc_29)/d' %inputs/pipelined/tma_gemm_stock_triton36.mlir \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=R5
// R5: rule 5 (WaitWithoutArrival): ttng.wait_barrier @ loc({{.*}}) waits on barrier loc({{.*}}) slot {{[0-9]}} (phase parity {{[01]}}) whose open phase has 0 of its 1 arrivals: it never returns
//
// Two expects on one phase.
// RUN: sed '/"ttng.barrier_expect"(%acc_45, %acc_29)/p' %inputs/pipelined/tma_gemm_stock_triton36.mlir \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=R6
// R6: rule 6 (PhaseOverrun): ttng.barrier_expect @ loc({{.*}}) arrives on barrier loc({{.*}}) slot {{[0-9]}} whose open phase already has its 1 arrivals
//
// The phase never flips (an off-by-one phase after the first lap): the wait
// returns on a completed phase before the copies of the open one landed.
// RUN: sed 's/%acc_34 = "arith.select"(%acc_31, %acc_33, %arg22)/%acc_34 = "arith.select"(%acc_31, %arg22, %arg22)/' %inputs/pipelined/tma_gemm_stock_triton36.mlir \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=PHASE
// PHASE: rule 3 (ReadBeforeWrite): ttng.warp_group_dot @ loc({{.*}}) reads slot {{[0-9]}} of loc({{.*}}) before the write of ttng.async_tma_copy_global_to_local @ loc({{.*}}) completed
//
// No wait for the copies still in flight after the loop (the masked copies of
// iterations past the trip count), nor for the epilogue's TMA store.
// RUN: sed '/"ttg.async_wait"() <{num = 0/d' %inputs/pipelined/ptr_matmul_128x64x64_stock_triton36.mlir \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=R7
// R7: rule 7 (NotDrained): ttg.local_dealloc @ loc({{.*}}): the write of ttg.async_copy_global_to_local @ loc("{{a|b}}"({{.*}})) to slot {{[0-9]}} of loc({{.*}}) is still in flight
// RUN: sed '/"ttng.async_tma_store_wait"/d' %inputs/pipelined/tma_gemm_stock_triton36.mlir \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=STORE
// STORE: rule 7 (NotDrained): tt.return @ loc({{.*}}): ttng.async_tma_copy_local_to_global @ loc({{.*}}) may still read slot 0 of loc({{.*}})
//
// An op the machine does not model on a ring: not proven (never passed).
// RUN: sed 's/"ttg.local_dealloc"(%a)/"ttg.mystery"(%a)/' %inputs/pipelined/ptr_matmul_128x64x64_stock_triton36.mlir \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNMODELED
// UNMODELED: warning: twill: pipeline not verified: `ttg.mystery` on a shared-memory buffer is not modeled (ttg.mystery @ loc({{.*}}))
