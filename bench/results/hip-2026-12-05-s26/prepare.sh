#!/bin/bash
# Session 26: the builds calls 1-3 carry, made on the development machine
# (nvcc 13 at /usr/local/cuda, no GPU; the device machine builds nothing).
# Run from the checkout of main at d600039 with two worktrees:
#   git worktree add /tmp/wt-old 4f763da          # session 25's A/B baseline
#   git worktree add /tmp/wt-item hip-decode-item # gemm13's four-block items
#   bash bench/results/hip-2026-12-05-s26/prepare.sh
# (hip-decode-item: main d600039 with decode-item.diff beside this file)
# Makes build-hipdeps (bench/device/make_deps.sh hip), build-packm/m25.tar.xz
# (main, HIP for sm_90a with the tests), build-packn/new.tar.xz (4f763da),
# build-packi/item.tar.xz (hip-decode-item), build-x + build-packx/xpu.tar.xz
# (main's XPU backend, Release, with the tests) and build-xpudeps.
set -euo pipefail
cd /work/main
# shellcheck source=bench/hip/nvidia_build.sh
. bench/hip/nvidia_build.sh
bash bench/device/make_deps.sh hip build-hipdeps
bash bench/device/make_deps.sh xpu build-xpudeps
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
hip_tests . build-m25 && pack build-packm m25.tar.xz build-m25
hip_tests /tmp/wt-old build-new && pack build-packn new.tar.xz build-new
hip_tests /tmp/wt-item build-item && pack build-packi item.tar.xz build-item
cmake -S . -B build-x -G Ninja -DMOEINT4_XPU=ON -DMOEINT4_HIP=OFF -DCMAKE_BUILD_TYPE=Release \
  -DMOEINT4_BUILD_TESTS=ON > /dev/null
ninja -C build-x > build-x.log
git rev-parse --short HEAD > build-x/COMMIT # 98583da for call 4
pack build-packx xpu.tar.xz build-x
