# lit configuration for twill's MLIR tests (test/).
#
#   lit -v test/                      # uses target/release binaries
#   TWILL_BIN_DIR=target/debug lit -v test/
#
# Substitutions:
#   %twill-opt     our mlir-opt-style driver (cargo build --release)
#   %twill         the solver CLI (`twill solve`)
#   %mlir-opt      upstream mlir-opt of MLIR 22 (mlir-22-tools)
#   %twill-plugin  the pass plugin, target/<profile>/libtwill.so
#   %inputs        test/Inputs
# FileCheck and not come from LLVM 22 (llvm-22-tools).

import os
import shutil

import lit.formats

config.name = "twill"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir"]
config.excludes = ["Inputs", "lit.cfg.py"]

root = os.path.dirname(os.path.abspath(__file__))
config.test_source_root = root
config.test_exec_root = os.path.join(root, "target", "lit")

llvm_bin = os.environ.get("LLVM_BIN_DIR", "/usr/lib/llvm-22/bin")
bin_dir = os.path.abspath(os.environ.get("TWILL_BIN_DIR", os.path.join(root, "target", "release")))

def need(path, hint):
    if not os.path.exists(path):
        lit_config.fatal(f"{path} not found: {hint}")
    return path

twill_opt = need(os.path.join(bin_dir, "twill-opt"), "run `cargo build --release` (or set TWILL_BIN_DIR)")
twill = need(os.path.join(bin_dir, "twill"), "run `cargo build --release` (or set TWILL_BIN_DIR)")
plugin = need(os.path.join(bin_dir, "libtwill.so"), "run `cargo build --release` (or set TWILL_BIN_DIR)")
mlir_opt = shutil.which("mlir-opt-22") or need(os.path.join(llvm_bin, "mlir-opt"), "install mlir-22-tools")
need(os.path.join(llvm_bin, "FileCheck"), "install llvm-22-tools")

config.environment["PATH"] = os.pathsep.join([llvm_bin, config.environment.get("PATH", os.environ.get("PATH", ""))])
# Deterministic, quiet solver logs inside tests.
config.environment["RUST_LOG"] = "off"

config.substitutions.append(("%twill-opt", twill_opt))
config.substitutions.append(("%twill-plugin", plugin))
config.substitutions.append(("%twill", twill))
config.substitutions.append(("%mlir-opt", mlir_opt))
config.substitutions.append(("%inputs", os.path.join(root, "test", "Inputs")))
