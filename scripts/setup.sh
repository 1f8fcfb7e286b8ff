#!/usr/bin/env bash
# Installs what twill needs on a fresh Debian 12 machine (as root, or with sudo):
# the C/C++ toolchain pieces HiGHS builds with (cmake, clang for bindgen), the
# Z3 SMT solver library (libz3-dev, linked by the z3 crate), and MLIR 22
# (libmlir-22-dev and friends: melior/mlir-sys link it; mlir-22-tools gives
# the mlir-opt-22 host of the pass plugin; llvm-22-tools gives lit-22 and
# FileCheck for the MLIR tests). Rust (cargo) must already be installed.
# Idempotent.
set -euo pipefail

packages=(cmake clang libclang-dev libz3-dev pkg-config
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools libpolly-22-dev
  libzstd-dev libclang-22-dev clang-22)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust (rustup) first" >&2; exit 1; }
echo "setup: system packages present: ${packages[*]}"
