// A pipelined loop nested in loops whose trip counts the verifier does not
// bind: the grouped GEMM as Triton 3.6.0 pipelined it from twill's schedule
// (Inputs/pipelined/grouped_matmul_*.mlir), its K loop inside an scf.while
// over the program's tiles of a group, inside the loop over groups. The
// while runs one representative iteration, entered and left with nothing
// in flight; the K loop's trip counts come from the group's loaded K, which
// each run pins. Both loops are proved on cuda:90 (cp.async, wgmma) and
// cuda:100 (cp.async, tcgen05 MMA with its barriers).
// RUN: %twill-opt %inputs/pipelined/grouped_matmul_sm90_triton36.mlir --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM90
// RUN: %twill-opt %inputs/pipelined/grouped_matmul_sm100_triton36.mlir --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM100
// SM90: remark: twill: pipeline proved safe: 2 rings (3, 3), trip counts 0..=11 [@grouped_matmul_kernel loop loc("first"
// SM90: remark: twill: pipeline proved safe: 2 rings (3, 3), trip counts 0..=11 [@grouped_matmul_kernel loop loc("acc"
// SM100: remark: twill: pipeline proved safe: 3 rings (2, 3, 2), trip counts 0..=20 [@grouped_matmul_kernel loop loc("first"
// SM100: remark: twill: pipeline proved safe: 3 rings (2, 3, 2), trip counts 0..=20 [@grouped_matmul_kernel loop loc("acc"
//
// Mutants, each rejected or not proved:
// The wait for every copy after the K loop deleted: the rings are freed
// with copies in flight.
// RUN: sed '/%acc_86 = "ttg.async_wait"() <{num = 0 : i32}>/d' %inputs/pipelined/grouped_matmul_sm90_triton36.mlir \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=DRAIN
// DRAIN: warning: twill: pipeline rejected: rule 7 (NotDrained): ttg.local_dealloc
//
// The K loop's wait leaves two commit groups too many outstanding: the
// wgmma reads a slot before its copy lands.
// RUN: sed 's/%x_119 = "ttg.async_wait"(%arg18, %arg19) <{num = 2 : i32}>/%x_119 = "ttg.async_wait"(%arg18, %arg19) <{num = 4 : i32}>/' %inputs/pipelined/grouped_matmul_sm90_triton36.mlir \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=EARLY
// EARLY: warning: twill: pipeline rejected: rule 3 (ReadBeforeWrite): ttng.warp_group_dot
//
// Neither that wait nor the deallocation: each iteration of the while
// leaves copies in flight for the next, so one iteration no longer stands
// for all of them.
// RUN: sed '/%acc_86 = "ttg.async_wait"() <{num = 0 : i32}>/d; /"ttg.local_dealloc"(%[xy]_5[45])/d' %inputs/pipelined/grouped_matmul_sm90_triton36.mlir \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=CARRY
// CARRY: warning: twill: pipeline not verified: a loop with asynchronous operations whose trip count is unknown, whose iteration leaves asynchronous state to the next (scf.while
