#!/usr/bin/env bash
# Installs what libmoeint4 needs on Debian 12 (run as root). Each package and
# why: see README.md, "Dependencies".
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libopenblas-dev          # moeint4 bench: the sgemm peer baseline (the library makes no BLAS call)
  libcmocka-dev            # unit and conformance tests
  libcjson-dev             # checkpoints: safetensors headers, config.json, index files (linked privately)
  python3-numpy python3-pytest python3-setuptools python3-pip  # Python binding tests
  gnuplot-nox              # bench --plot
  libze-dev                # XPU: Level Zero headers + loader (dlopen'ed at run time)
  ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd  # XPU: OpenCL runtime; PoCL runs its kernels on the CPU in tests
  clang-15 llvm-spirv-15 spirv-tools                   # XPU: OpenCL C -> SPIR-V, validated
  llvm-15                  # XPU tests: the SPIR-V module back to SPIR for PoCL (llvm-dis, llvm-as, opt)
  libdnnl-dev              # XPU: oneDNN matmul for experts with many tokens
  intel-opencl-icd         # XPU: ocloc (Intel's GPU compiler) compiles the kernels at build time; Intel's real Level Zero / OpenCL GPU driver for the probe tests
  hipcc libamdhip64-dev rocm-device-libs               # HIP backend: AMD compile check (gfx90a, gfx940)
  valgrind libclang-common-15-dev                      # reliability: memcheck; libFuzzer + sanitizer runtimes for clang-15
)
# Installed without their recommendations (python3-torch would bring libtorch-dev and a desktop stack).
lean_packages=(
  python3-torch            # torch operator, torch.distributed expert-parallel example (CPU, gloo)
)
missing() { # package... -> those not installed
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t missing_packages < <(missing "${packages[@]}")
mapfile -t missing_lean < <(missing "${lean_packages[@]}")
if [ $((${#missing_packages[@]} + ${#missing_lean[@]})) -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  [ ${#missing_packages[@]} -eq 0 ] || apt-get install -y -q "${missing_packages[@]}"
  [ ${#missing_lean[@]} -eq 0 ] || apt-get install -y -q --no-install-recommends "${missing_lean[@]}"
fi
