//===- TwillPasses.cpp - MLIR pass classes that forward to Rust -----------===//
//
// See TwillPasses.h. The pass classes own their MLIR-style options (so that
// `--help`, pipeline parsing and `--dump-pass-pipeline` work as for any MLIR
// pass), render them as `key=value` lines and call the Rust body, which
// validates them.
//
//===----------------------------------------------------------------------===//

#include "TwillPasses.h"

#include "mlir/CAPI/IR.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include <string>
#include <vector>

using namespace mlir;

namespace {

const TwillPassCallbacks *gCallbacks = nullptr;

/// Appends `key=value\n`.
void render(std::string &out, llvm::StringRef key, const std::string &value) {
  out += key.str();
  out += '=';
  out += value;
  out += '\n';
}

/// Runs a Rust pass body on `module`; fails the pass if it reports failure.
void runBody(Pass &pass, TwillPassBody body, ModuleOp module,
             const std::string &options, void (*signal)(Pass &)) {
  if (!body) {
    module.emitError("twill: pass callbacks were not registered");
    signal(pass);
    return;
  }
  if (body(wrap(module.getOperation()), options.data(), options.size()) != 0)
    signal(pass);
}

struct TwillSchedulePass
    : public PassWrapper<TwillSchedulePass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TwillSchedulePass)

  TwillSchedulePass() = default;
  TwillSchedulePass(const TwillSchedulePass &other) : PassWrapper(other) {}

  StringRef getArgument() const final { return "twill-schedule"; }
  StringRef getDescription() const final {
    return "Optimal software pipelining and warp specialization of Triton "
           "loops (writes loop.stage, loop.cluster, tt.scheduled_max_stage "
           "and warp-specialization partitions)";
  }

  Option<std::string> arch{*this, "arch",
                           llvm::cl::desc("Target: sm90 (Hopper) or sm100 "
                                          "(Blackwell)"),
                           llvm::cl::init("sm90")};
  Option<std::string> machine{
      *this, "machine",
      llvm::cl::desc("Machine description: a bundled name (h100, h200, "
                     "b200) or a TOML path; default from arch"),
      llvm::cl::init("")};
  Option<std::string> triton{
      *this, "triton",
      llvm::cl::desc("Triton version whose pipeliner consumes the schedule "
                     "(3.6 keeps every sm90 warp_group_dot in the last "
                     "stage)"),
      llvm::cl::init("3.6")};
  Option<std::string> scope{
      *this, "scope",
      llvm::cl::desc("ws: loops marked tt.warp_specialize; all: every "
                     "pipelinable innermost scf.for"),
      llvm::cl::init("ws")};
  Option<double> timeout{
      *this, "timeout",
      llvm::cl::desc("Wall-clock guard per loop, seconds (the budget decides)"),
      llvm::cl::init(30.0)};
  Option<double> budget{
      *this, "budget",
      llvm::cl::desc("Deterministic solver work per kernel, millions of z3 "
                     "resource units (0: none, the timeout alone)"),
      llvm::cl::init(16.0)};
  Option<unsigned> jobs{
      *this, "jobs",
      llvm::cl::desc("A kernel's loops solved at once (0: by the cores); "
                     "the answer does not depend on it"),
      llvm::cl::init(0)};
  Option<unsigned> u{*this, "u",
                     llvm::cl::desc("Cost-normalization bound U (section 5.2)"),
                     llvm::cl::init(30)};
  Option<std::string> encoding{
      *this, "encoding",
      llvm::cl::desc("Joint solver encoding: default, int or paper"),
      llvm::cl::init("default")};
  Option<unsigned> groups{
      *this, "groups",
      llvm::cl::desc("Most warp groups to use (0: the target's default)"),
      llvm::cl::init(0)};
  Option<bool> ws{*this, "ws",
                  llvm::cl::desc("Warp-specialize (false: software "
                                 "pipelining only)"),
                  llvm::cl::init(true)};
  Option<unsigned> prefetch{
      *this, "prefetch",
      llvm::cl::desc("Extra stages of prefetch for streaming (TMA) loads, on "
                     "top of the depth that hides their modeled latency"),
      llvm::cl::init(0)};
  Option<std::string> order{
      *this, "order",
      llvm::cl::desc("Order of the ops within a stage: program (one cluster, "
                     "program order) or slot (by the modulo schedule's slot)"),
      llvm::cl::init("program")};
  Option<std::string> loads{
      *this, "loads",
      llvm::cl::desc("Prefetched loads first in the body (full lead time, one "
                     "more buffer), last (one buffer fewer), or auto (first, "
                     "except in a kernel with a loop mixing descriptor and "
                     "pointer loads: all last, one stage deeper; see rotate)"),
      llvm::cl::init("auto")};
  Option<std::string> rotate{
      *this, "rotate",
      llvm::cl::desc("Under loads=auto, rotate every loop of a kernel with a "
                     "mixed loop (kernel) or only the mixed loops (loop)"),
      llvm::cl::init("kernel")};
  Option<std::string> pointerLoads{
      *this, "pointer-loads",
      llvm::cl::desc("Pointer loads (tt.load, cp.async) first or last, "
                     "apart from the descriptor loads (empty: as `loads`)"),
      llvm::cl::init("")};
  Option<int> pointerPrefetch{
      *this, "pointer-prefetch",
      llvm::cl::desc("Extra stages of prefetch for pointer loads (-1: as "
                     "`prefetch`)"),
      llvm::cl::init(-1)};
  Option<unsigned> ctas{
      *this, "ctas",
      llvm::cl::desc("CTAs that are to share each SM: solve within one CTA's "
                     "share of registers and shared memory, and prefetch as "
                     "deep as an iteration takes with the SM shared"),
      llvm::cl::init(1)};
  Option<std::string> objective{
      *this, "objective",
      llvm::cl::desc("After the minimum I: length (the paper's shortest L) "
                     "or slack (the most latency slack between asynchronous "
                     "ops at as many stages, then the shortest L)"),
      llvm::cl::init("length")};
  Option<bool> partitions{
      *this, "partitions",
      llvm::cl::desc("Write the solved warp partitions (false: solve for "
                     "warp specialization but write stages only, and let "
                     "Triton partition)"),
      llvm::cl::init(true)};
  Option<std::string> report{
      *this, "report",
      llvm::cl::desc("Write the JSON report (twill.schedule-report/1, "
                     "docs/report-schema.md) of every loop here"),
      llvm::cl::init("")};

  Option<std::string> lower{
      *this, "lower",
      llvm::cl::desc("off: write the schedule as attributes; on: lower "
                     "supported sm90 loops to warp-specialized TTGIR when "
                     "the pipeline verifier proves it, else attributes; "
                     "only: as on, no attributes for the others; force: "
                     "lower without the verifier (for tests); "
                     "docs/ws-lowering.md"),
      llvm::cl::init("off")};

  Option<std::string> ring{
      *this, "ring",
      llvm::cl::desc("Ring depth of a lowered loop: schedule (the schedule's "
                     "prefetch plus the slots a consumer holds) or max (as "
                     "deep as shared memory allows, at most 8)"),
      llvm::cl::init("schedule")};

  Option<std::string> cache{
      *this, "cache",
      llvm::cl::desc("Schedule cache directory (off: none; empty: "
                     "$TWILL_CACHE_DIR, none without it); a cached "
                     "schedule is checked again before it is written"),
      llvm::cl::init("")};
  Option<unsigned> numStages{
      *this, "num-stages",
      llvm::cl::desc("Triton's num_stages (0: not given); a loop's own "
                     "tt.num_stages wins for that loop"),
      llvm::cl::init(0)};

  Option<std::string> stages{
      *this, "stages",
      llvm::cl::desc("bound: at most num_stages pipeline stages; free: any "
                     "number (num_stages is only reported)"),
      llvm::cl::init("bound")};

  Option<std::string> ties{
      *this, "ties",
      llvm::cl::desc("deeper: a tie with Triton's own schedule in twill's "
                     "model keeps the schedule with more stages (twill's on "
                     "equal stages); twill: it keeps twill's; triton: it "
                     "keeps Triton's"),
      llvm::cl::init("deeper")};

  Option<std::string> unverifiable{
      *this, "unverifiable",
      llvm::cl::desc("schedule: solve every loop; skip: leave to Triton a "
                     "loop whose pipeline the pipeline verifier does not "
                     "model (Triton's sm100 warp specialization), before "
                     "solving it"),
      llvm::cl::init("schedule")};

  void runOnOperation() override {
    std::string o;
    render(o, "arch", arch);
    render(o, "machine", machine);
    render(o, "triton", triton);
    render(o, "scope", scope);
    render(o, "timeout", std::to_string(timeout));
    render(o, "budget", std::to_string(budget));
    render(o, "jobs", std::to_string(jobs));
    render(o, "u", std::to_string(u));
    render(o, "encoding", encoding);
    render(o, "groups", std::to_string(groups));
    render(o, "ws", ws ? "true" : "false");
    render(o, "partitions", partitions ? "true" : "false");
    render(o, "prefetch", std::to_string(prefetch));
    render(o, "order", order);
    render(o, "loads", loads);
    render(o, "rotate", rotate);
    render(o, "pointer-loads", pointerLoads);
    render(o, "pointer-prefetch", std::to_string(pointerPrefetch));
    render(o, "ctas", std::to_string(ctas));
    render(o, "objective", objective);
    render(o, "num-stages", std::to_string(numStages));
    render(o, "stages", stages);
    render(o, "ties", ties);
    render(o, "unverifiable", unverifiable);
    render(o, "report", report);
    render(o, "lower", lower);
    render(o, "ring", ring);
    render(o, "cache", cache);
    runBody(*this, gCallbacks ? gCallbacks->schedule : nullptr,
            getOperation(), o,
            [](Pass &p) { static_cast<TwillSchedulePass &>(p).fail(); });
  }
  void fail() { signalPassFailure(); }
};

struct TwillExportGraphPass
    : public PassWrapper<TwillExportGraphPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TwillExportGraphPass)

  TwillExportGraphPass() = default;
  TwillExportGraphPass(const TwillExportGraphPass &other)
      : PassWrapper(other) {}

  StringRef getArgument() const final { return "twill-export-graph"; }
  StringRef getDescription() const final {
    return "Write each candidate loop's dependence graph as TOML readable by "
           "`twill solve`";
  }

  Option<std::string> dir{*this, "dir",
                          llvm::cl::desc("Directory to write graphs into"),
                          llvm::cl::init("")};
  Option<std::string> arch{*this, "arch",
                           llvm::cl::desc("Target: sm90 or sm100"),
                           llvm::cl::init("sm90")};
  Option<std::string> machine{
      *this, "machine",
      llvm::cl::desc("Machine description (default from arch)"),
      llvm::cl::init("")};
  Option<std::string> scope{*this, "scope",
                            llvm::cl::desc("ws or all (as twill-schedule)"),
                            llvm::cl::init("ws")};
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("Code generator the graphs describe: triton (the "
                     "schedule pass's graph) or gluon-sm90 (a Gluon kernel: "
                     "no last-stage pins, registers of one warp group)"),
      llvm::cl::init("triton")};
  Option<std::string> gluon{
      *this, "gluon",
      llvm::cl::desc("Changes of target=gluon-sm90, comma-separated: "
                     "keep-pins, fp16-crossings, complete-accumulators"),
      llvm::cl::init("")};

  void runOnOperation() override {
    std::string o;
    render(o, "dir", dir);
    render(o, "arch", arch);
    render(o, "machine", machine);
    render(o, "scope", scope);
    render(o, "target", target);
    render(o, "gluon", gluon);
    runBody(*this, gCallbacks ? gCallbacks->exportGraph : nullptr,
            getOperation(), o,
            [](Pass &p) { static_cast<TwillExportGraphPass &>(p).fail(); });
  }
  void fail() { signalPassFailure(); }
};

struct TwillVerifyPipelinePass
    : public PassWrapper<TwillVerifyPipelinePass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TwillVerifyPipelinePass)

  TwillVerifyPipelinePass() = default;
  TwillVerifyPipelinePass(const TwillVerifyPipelinePass &other)
      : PassWrapper(other) {}

  StringRef getArgument() const final { return "twill-verify-pipeline"; }
  StringRef getDescription() const final {
    return "Prove the protocol of every pipelined loop (rings, async copies, "
           "mbarriers, async wgmma) safe for every trip count; remarks and "
           "an optional JSON report";
  }

  Option<std::string> report{
      *this, "report",
      llvm::cl::desc("Write the JSON report (twill.pipeline-verify/1) here"),
      llvm::cl::init("")};

  void runOnOperation() override {
    std::string o;
    render(o, "report", report);
    runBody(*this, gCallbacks ? gCallbacks->verifyPipeline : nullptr,
            getOperation(), o,
            [](Pass &p) { static_cast<TwillVerifyPipelinePass &>(p).fail(); });
  }
  void fail() { signalPassFailure(); }
};

} // namespace

extern "C" void twillRegisterPasses(const TwillPassCallbacks *callbacks) {
  gCallbacks = callbacks;
  static bool registered = false;
  if (registered)
    return;
  registered = true;
  PassRegistration<TwillSchedulePass>();
  PassRegistration<TwillExportGraphPass>();
  PassRegistration<TwillVerifyPipelinePass>();
}

extern "C" void twillEmitDiagnostic(MlirLocation loc, int severity,
                                    const char *message, size_t messageLen) {
  llvm::StringRef text(message, messageLen);
  Location l = unwrap(loc);
  switch (severity) {
  case TWILL_REMARK:
    emitRemark(l) << text;
    break;
  case TWILL_WARNING:
    emitWarning(l) << text;
    break;
  default:
    emitError(l) << text;
    break;
  }
}

extern "C" int twillOptMain(int argc, char **argv,
                            const TwillPassCallbacks *callbacks) {
  DialectRegistry registry;
  registry.insert<arith::ArithDialect, cf::ControlFlowDialect,
                  func::FuncDialect, math::MathDialect, scf::SCFDialect,
                  ub::UBDialect>();
  registerTransformsPasses();
  twillRegisterPasses(callbacks);

  // Triton's dialects are not registered here: allow them (opaque, printed
  // verbatim) unless the command line already decides.
  std::vector<char *> args(argv, argv + argc);
  bool decided = false;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef a(argv[i]);
    if (a.ltrim('-').starts_with("allow-unregistered-dialect"))
      decided = true;
  }
  static char allow[] = "--allow-unregistered-dialect";
  if (!decided)
    args.insert(args.begin() + 1, allow);
  return failed(MlirOptMain(static_cast<int>(args.size()), args.data(),
                            "twill-opt: MLIR driver with twill's passes\n",
                            registry))
             ? 1
             : 0;
}
