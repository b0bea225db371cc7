#!/bin/bash
# Builds the whole project with the HIP plugin for NVIDIA (nvcc, sm_90), runs
# the HIP tests, the conformance matrix on the hip backend, the command's and
# the Python binding's GPU tests (CI's GPU-only entries), then the bench
# (bench/hip/hip_bench.py); logs and JSON go to $OUT. Made for the lent H200
# (nothing can be installed there): cmocka, OpenBLAS and pkg-config travel as
# build-hipdeps/deps.tar.xz (bench/hip/README.md says how to make them).
#   OUT=/tmp/out COMMIT=abc1234 bench/hip/h200_run.sh [build|test|bench|cli|profile|all ...]
# (all = build test bench cli; profile: per-kernel device times, hip_profile.py;
# TARGETS narrows the build to some ninja targets, TESTS the ctest regex)
set -u
steps=${*:-all}
OUT=${OUT:-$PWD/out-h200}
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
BUILD=${BUILD:-build-h200}
DEPS=${DEPS:-build-hipdeps}
mkdir -p "$OUT"
want() { [[ ( " $steps " == *" all "* && $1 != profile ) || " $steps " == *" $1 "* ]]; }

# shellcheck source=bench/hip/nvidia_build.sh
. "$(dirname "$0")/nvidia_build.sh"
use_hip_deps "$DEPS"

if want build; then
  { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    nvcc --version | tail -1; cmake --version | head -1
    python3 -c 'import torch; print("torch", torch.__version__)'; } > "$OUT/build.log" 2>&1
  # shellcheck disable=SC2086 # TARGETS: one target a word
  # the Python tests with the machine's python3 (torch, pytest), not /usr/bin/python3 (no pytest)
  { MOEINT4_COMMIT=$COMMIT configure_nvidia . "$BUILD" -DMOEINT4_BUILD_TESTS=ON \
      -DMOEINT4_PYTHON="$(command -v python3)" &&
    ninja -C "$BUILD" -k 0 ${TARGETS:-}; } >> "$OUT/build.log" 2>&1  # -k 0: others' half-done files do not stop ours
  echo "build: exit $?"; grep -E "^FAILED" "$OUT/build.log"; ls "$BUILD/lib"
fi

if want test; then
  (cd "$BUILD" && ctest -V --timeout 900 \
     -R "${TESTS:-^(test_hip_.*|hip_conformance.*|cli_device_hip|python_gpu)$}") > "$OUT/tests.log" 2>&1
  echo "tests: exit $?"; grep -E "tests passed|Passed|Failed|Skipped|\*\*\*" "$OUT/tests.log" | tail -8
fi

if want bench; then
  # shellcheck disable=SC2086 # BENCH_ARGS: one argument a word
  PYTHONUNBUFFERED=1 python3 bench/hip/hip_bench.py --lib "$BUILD/lib/libmoeint4.so" \
    --json "$OUT/hip-bench.json" --commit "$COMMIT" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
fi

# Our side timed by the moeint4 command itself (host wall clock around each
# synchronous forward; its own routing), next to hip_bench.py's event times.
if want cli; then
  for preset in qwen3-30b-a3b mixtral-8x7b; do
    "$BUILD/bin/moeint4" bench --backend hip --preset $preset --tokens 1,8,64,512,4096 \
      --iters 20 --json "$OUT/cli-$preset.json"
    "$BUILD/bin/moeint4" run --backend hip --preset $preset --tokens 3
  done > "$OUT/cli.log" 2>&1
  echo "cli: exit $?"; grep -E "^ +[0-9]+ |max_rel|error" "$OUT/cli.log" | head -20
fi

if want profile; then
  # shellcheck disable=SC2086 # PROFILE_POINTS: one point a word
  PYTHONUNBUFFERED=1 python3 bench/hip/hip_profile.py --lib "$BUILD/lib/libmoeint4.so" ${PROFILE_POINTS:-qwen3-30b-a3b:1 qwen3-30b-a3b:8 qwen3-30b-a3b:4096 mixtral-8x7b:1 mixtral-8x7b:512 mixtral-8x7b:4096} \
    2>&1 | tee "$OUT/profile.log"
fi
