#!/bin/bash
# Session 26, call 2 (carry ["build-hipdeps", "build-xpudeps", "build-packx",
# "build-packi"]): the XPU entries that session 25's call 2 did not finish
# on NVIDIA's OpenCL (its 170 s limit cut them; the other 10 passed there),
# with a longer limit; meanwhile the HIP decode entries on branch
# hip-decode-item (gemm13's items of four output blocks, build-item).
# Packs: prepare.sh beside this file.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/wt-item # build-item names its source tree
tar xJf build-packx/xpu.tar.xz; tar xJf build-packi/item.tar.xz
O=/tmp/s26c2; mkdir -p $O/xpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && cd build-item &&
  timeout 300 ctest --timeout 290 -j2 -R '^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4)$' \
  --output-on-failure ) > $O/tests-item.log 2>&1 &
( mkdir -p /tmp/xpudeps && tar xJf build-xpudeps/deps.tar.xz -C /tmp/xpudeps
  lib=$(ldconfig -p | awk '/libnvidia-opencl\.so\.1 /{print $NF; exit}')
  mkdir -p /tmp/vendors && echo "$lib" > /tmp/vendors/nvidia.icd
  LD_LIBRARY_PATH=/tmp/xpudeps/lib OCL_ICD_VENDORS=/tmp/vendors MOEINT4_XPU_TEST_ANY_GPU=1 \
  MOEINT4_BACKEND_PATH=/work/main/build-x/lib timeout 380 ctest --test-dir /work/main/build-x --output-on-failure -j4 --timeout 370 \
    -R '^test_xpu_(kernels|backend|conformance|backend_gemv_(walk|lanes|rows)|kernels_variant_(rows_early|rows_early_chains2|x_global|lockstep2_ahead2|preload))$' ) > $O/xpu/ctest.txt 2>&1
wait
grep -E "tests passed|\*\*\*|Failed|Passed|Total Test" $O/xpu/ctest.txt $O/tests-item.log | tail -20
tar czf "$OUT/call2.tgz" -C $O .
