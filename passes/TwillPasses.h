//===- TwillPasses.h - C ABI between the Rust pass and its MLIR hosts -----===//
//
// twill's passes are written in Rust (src/mlir/). MLIR's pass infrastructure
// (PassRegistration, pass options, the diagnostic engine, MlirOptMain) is C++,
// so this thin shim defines the two pass classes and forwards their work to
// Rust through plain C function pointers that Rust hands over at registration
// time. Nothing here inspects IR: graph building, costs, solving, checking
// and write-back all live in Rust, once, for both hosts (`twill-opt` and the
// `mlir-opt --load-pass-plugin` shared library).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_PASSES_H
#define TWILL_PASSES_H

#include "mlir-c/IR.h"
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// A pass body: runs on the module `op` with the pass options rendered as
/// `key=value` lines. Returns 0 on success, nonzero to signal pass failure
/// (invalid options or invalid IR; the body has emitted an error first).
typedef int (*TwillPassBody)(MlirOperation op, const char *options,
                             size_t optionsLen);

/// The Rust side of twill's passes.
typedef struct {
  TwillPassBody schedule;    ///< --twill-schedule
  TwillPassBody exportGraph; ///< --twill-export-graph
  TwillPassBody verifyPipeline; ///< --twill-verify-pipeline
} TwillPassCallbacks;

/// Registers `twill-schedule`, `twill-export-graph` and
/// `twill-verify-pipeline` in MLIR's global pass registry. The callbacks must stay valid for the life of the process.
void twillRegisterPasses(const TwillPassCallbacks *callbacks);

/// Severity for twillEmitDiagnostic.
enum { TWILL_REMARK = 0, TWILL_WARNING = 1, TWILL_ERROR = 2 };

/// Emits a diagnostic through the context's diagnostic engine, so that
/// `--verify-diagnostics` and every host's handlers see it.
void twillEmitDiagnostic(MlirLocation loc, int severity, const char *message,
                         size_t messageLen);

/// `twill-opt`: MlirOptMain with every upstream dialect, extension and pass
/// plus twill's passes; unregistered dialects (Triton's) are allowed unless
/// the command line says otherwise.
int twillOptMain(int argc, char **argv, const TwillPassCallbacks *callbacks);

#ifdef __cplusplus
}
#endif

#endif // TWILL_PASSES_H
