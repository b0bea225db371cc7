#!/bin/bash
# Session 29: the pack call1.sh carries (build-packx29/xpu.tar.xz, ~2.3 MB):
# build-x (Release, -DMOEINT4_XPU=ON -DMOEINT4_HIP=OFF, configured from
# /work/main as bench/xpu/README.md says) at 8cd95ac, without objects,
# static libraries, checkpoints and the Intel ahead-of-time binaries.
set -e
cd "$(dirname "$0")/../../.."
ninja -C build-x
mkdir -p build-packx29
tar cJf build-packx29/xpu.tar.xz --exclude='*.o' --exclude='*.a' --exclude=CMakeFiles \
  --exclude='tests/checkpoints' --exclude='kernels/aot' --exclude='Testing' build-x
