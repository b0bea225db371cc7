#!/bin/bash
# Session 26, call 4 (carry ["build-hipdeps", "build-xpudeps", "build-packx",
# "build-packi", "build-packm"]): calls 1-3 folded into one, for a session
# whose machine came late: at once, every HIP entry on main d600039 (m25:
# session 25's two landed changes in one tree), the decode entries on
# hip-decode-item and the XPU entries session 25's call 2 did not finish;
# then the memory entries; gemm13's item width at the direct decode points;
# q256 against the expansion from 512 rows an expert (Mixtral M = 2048 ..
# 3584). Packs: prepare.sh beside this file (build-x at 98583da).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/wt-item # build-item names its source tree
for t in build-packx/xpu build-packi/item build-packm/m25; do tar xJf $t.tar.xz; done
O=/tmp/s26c4; mkdir -p $O/xpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
hip bash -c 'cd build-m25 && timeout 270 ctest --timeout 260 -j3 -R "^(test_hip_|hip_conformance_)" -E memory --output-on-failure' > $O/tests-m25.log 2>&1 &
hip bash -c 'cd build-item && timeout 270 ctest --timeout 260 -j2 -R "^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4)$" --output-on-failure' > $O/tests-item.log 2>&1 &
( mkdir -p /tmp/xpudeps && tar xJf build-xpudeps/deps.tar.xz -C /tmp/xpudeps
  lib=$(ldconfig -p | awk '/libnvidia-opencl\.so\.1 /{print $NF; exit}')
  mkdir -p /tmp/vendors && echo "$lib" > /tmp/vendors/nvidia.icd
  LD_LIBRARY_PATH=/tmp/xpudeps/lib OCL_ICD_VENDORS=/tmp/vendors MOEINT4_XPU_TEST_ANY_GPU=1 \
  MOEINT4_BACKEND_PATH=/work/main/build-x/lib timeout 280 ctest --test-dir /work/main/build-x --output-on-failure -j4 --timeout 270 \
    -R '^test_xpu_(kernels|backend|conformance|backend_gemv_(walk|lanes|rows)|kernels_variant_(rows_early|rows_early_chains2|x_global|lockstep2_ahead2|preload))$' ) > $O/xpu/ctest.txt 2>&1 &
wait
hip bash -c 'cd build-m25 && timeout 60 ctest --timeout 50 -R "^test_hip_memory" --output-on-failure' > $O/tests-m25-memory.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests-m25.log $O/tests-m25-memory.log $O/tests-item.log $O/xpu/ctest.txt | tail -30
hip env OUT=$O/item DEPS=build-hipdeps TOKENS=1,4,8 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="m25=lib:build-m25/lib item=lib:build-item/lib" \
  PROFILE_POINTS="mixtral-8x7b:1 qwen3-30b-a3b:8" timeout 90 bash bench/hip/ab_bench.sh > $O/item.log 2>&1
cat $O/item/ab-table.md || tail -30 $O/item.log
grep -E "us  x" $O/item/profile-*.log | grep -i gemm
hip env OUT=$O/q256 DEPS=build-hipdeps TOKENS=2048,2560,3072,3584 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="m25=lib:build-m25/lib q256=@m25" ENV_q256=MOEINT4_HIP_INT4_PREFILL=q256 \
  PROFILE_POINTS="mixtral-8x7b:3072" timeout 130 bash bench/hip/ab_bench.sh > $O/q256.log 2>&1
cat $O/q256/ab-table.md || tail -30 $O/q256.log
tar czf "$OUT/call4.tgz" -C $O .
