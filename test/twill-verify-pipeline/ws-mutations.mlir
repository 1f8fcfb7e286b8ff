// Warp-specialized code: the TMA GEMM lowered by lower=force (Triton 3.6
// captures), each mutant editing its text once. None is proved.
//
// The consumer waits on `full` with the other parity (its phase off by
// one): its wgmma reads a slot whose copy has not landed, and its waits
// observe phases that happens-before does not fix (rule 8).
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir "--twill-schedule=lower=force scope=all arch=sm90 triton=3.6" 2>/dev/null \
// RUN:   | sed '0,/"ttng.wait_barrier"(%42, %41,/s//%flip = arith.xori %41, %c1_i32_8 : i32\n        "ttng.wait_barrier"(%42, %flip,/' \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=PHASE
// PHASE: warning: twill: pipeline rejected:
// PHASE-SAME: rule 3 (ReadBeforeWrite): ttng.warp_group_dot
// PHASE-SAME: rule 8 (PhaseRace): phase 0 of barrier slot 0 can complete before ttng.wait_barrier @ loc({{.*}}) returns, which observes phase -1
//
// The producer runs one iteration more than the consumer (its captured
// upper bound plus one): it starts a phase of `full` the consumer never
// waits for (rule 9) and
// its last copy is never waited for (rule 7).
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir "--twill-schedule=lower=force scope=all arch=sm90 triton=3.6" 2>/dev/null \
// RUN:   | sed 's/^\( *\)\(%28 = "ttg.warp_specialize"(%c64_i32, %arg0, %14, %arg5, %15, %c0_i32, \)%17,/\1%ubp = arith.addi %17, %c1_i32 : i32\n\1\2%ubp,/' \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=TRIPS
// TRIPS: warning: twill: pipeline rejected:
// TRIPS-SAME: rule 9 (ExitImbalance): the default region consumes 1 of the 2 phases started on a barrier the copies land on
// TRIPS-SAME: rule 7 (NotDrained)
//
// A second `full` wait on the first five iterations only: harmless, but
// the consumer's events stop repeating, so the runs cannot stand for every
// trip count.
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir "--twill-schedule=lower=force scope=all arch=sm90 triton=3.6" 2>/dev/null \
// RUN:   | sed -e '0,/^\( *\)\("ttng.wait_barrier"(%42, %41, \).true\(.*\)$/s//&\n\1%early = arith.cmpi slt, %arg18, %c5_e : i32\n\1\2%early\3/' \
// RUN:         -e '0,/%c3_i32 = arith.constant 3 : i32/s//&\n        %c5_e = arith.constant 5 : i32/' \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=PERIOD
// PERIOD: warning: twill: pipeline not verified: the events of a loop do not repeat every 6 iterations
