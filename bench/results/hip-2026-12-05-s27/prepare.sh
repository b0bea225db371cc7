#!/bin/bash
# Session 27: the builds calls 1-4 carry (build-packs27/*.tar.xz, with
# build-hipdeps from bench/device/make_deps.sh hip), made on the development
# machine (nvcc 13 at /usr/local/cuda, no GPU). Run from the checkout:
#   git worktree add /tmp/wt-old d92c348   # base
#   bash bench/results/hip-2026-12-05-s27/prepare.sh <pack>
# base: main d92c348, libraries only; s27: branch hip-decode-s27 (call 1);
# meta: branch hip-decode-meta at fddd8bc (calls 2-3); b4: the same with
# -DMI4_DECODE13_NOZP_BLOCKS=4, a launch bound for gemm13 without zero
# points that the branch then had (call 3; the macro did not land);
# m27: main at 469a469 (call 4); routed: branch hip-routed-zeros
# (routed-zeros.diff) and res: branch hip-gemm2-resident (gemm2-resident.diff),
# both prepared for call5.sh, not run in this session. Each
# build of the tests is packed without objects.
set -euo pipefail
cd /work/main
# shellcheck source=bench/hip/nvidia_build.sh
. bench/hip/nvidia_build.sh
pack() { # NAME BUILD
  mkdir -p build-packs27
  tar cJf "build-packs27/$1.tar.xz" --exclude='*.o' --exclude='*.a' --exclude=CMakeFiles \
    --exclude='tests/checkpoints' --exclude='kernels/aot' "$2"
}
tests_build() { # BUILD [CMAKE ARGS...]
  configure_nvidia . "$1" -DMOEINT4_BUILD_TESTS=ON -DMOEINT4_PYTHON=/usr/bin/python3 "${@:2}" > /dev/null
  ninja -C "$1" -j2 > "$1.log"
}
case $1 in
base) bash bench/hip/prebuild.sh /tmp/wt-old build-base && pack base build-base ;;
s27) git checkout -q hip-decode-s27 && tests_build build-s27 && pack s27 build-s27 ;;
meta) git checkout -q hip-decode-meta && tests_build build-meta && pack meta build-meta ;;
m27) git checkout -q 469a469 && tests_build build-m27 && pack m27 build-m27 ;;
routed | res) # from worktrees (call5.sh links them to the checkout on the device)
  branch=$([ "$1" = routed ] && echo hip-routed-zeros || echo hip-gemm2-resident)
  git worktree add -f "/tmp/wt-$1" "$branch" 2>/dev/null || true
  configure_nvidia "/tmp/wt-$1" "build-$1" -DMOEINT4_BUILD_TESTS=ON -DMOEINT4_PYTHON=/usr/bin/python3 > /dev/null
  ninja -C "build-$1" -j2 > "build-$1.log" && pack "$1" "build-$1" ;;
*) echo "base | s27 | meta | m27 | routed | res (b4: meta's source with the macro, see above)" >&2; exit 2 ;;
esac
