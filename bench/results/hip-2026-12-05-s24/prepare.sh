#!/bin/bash
# Session 24: the builds calls 1 and 2 carry, made on the development
# machine (nvcc 13 at /usr/local/cuda, no GPU) and packed into the carried
# folders (the device machine builds nothing). Run from the checkout of main
# (/work/main), with the branches in worktrees:
#   git worktree add /tmp/wt-s24 hip-s24          # split scales + combine
#   git worktree add /tmp/wt-split hip-split-scale
#   git worktree add /tmp/wt-q32 hip-qw32-gemm13
# (without those local branches: worktrees of main with split-scale.diff and
# combine.diff applied (wt-s24), split-scale.diff (wt-split) and
# qw32-gemm13.diff (wt-q32), all in this folder)
#   bash bench/results/hip-2026-12-05-s24/prepare.sh
# Makes build-packn/new.tar.xz (main, HIP for sm_90a with the tests),
# build-packs/s24.tar.xz (hip-s24 with the tests, and hip-split-scale's
# libraries alone in build-split), build-packq/q32.tar.xz (hip-qw32-gemm13),
# build-packx/xpu.tar.xz (main's XPU backend) and, when missing,
# build-xpudeps (bench/device/make_deps.sh). build-hipdeps is session 20's
# (cmocka, OpenBLAS, pkg-config for the lent machine).
set -euo pipefail
cd /work/main
# shellcheck source=bench/hip/nvidia_build.sh
. bench/hip/nvidia_build.sh
hip_tests() { # SOURCE BUILD
  configure_nvidia "$1" "$2" -DMOEINT4_BUILD_TESTS=ON -DMOEINT4_PYTHON=/usr/bin/python3 > /dev/null
  ninja -C "$2" -j2 > "$2.log"
  git -C "$1" rev-parse --short HEAD > "$2/COMMIT"
}
pack() { # DIR TARBALL BUILD...
  mkdir -p "$1"
  tar cJf "$1/$2" --exclude='*.o' --exclude='*.a' --exclude=CMakeFiles \
    --exclude='tests/checkpoints' --exclude='kernels/aot' "${@:3}"
}
hip_tests . build-new
hip_tests /tmp/wt-s24 build-s24
hip_tests /tmp/wt-q32 build-q32
bash bench/hip/prebuild.sh /tmp/wt-split build-split > /dev/null
ninja -C build-xpu > build-xpu.log
pack build-packn new.tar.xz build-new
pack build-packs s24.tar.xz build-s24 build-split
pack build-packq q32.tar.xz build-q32
pack build-packx xpu.tar.xz build-xpu
[ -f build-xpudeps/deps.tar.xz ] || bash bench/device/make_deps.sh xpu build-xpudeps
for b in new s24 split q32; do echo "build-$b: $(cat build-$b/COMMIT)"; done
du -ch build-hipdeps build-xpudeps build-packn build-packs build-packq build-packx | tail -1
