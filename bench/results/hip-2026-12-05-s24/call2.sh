#!/bin/bash
# Session 24, call 2 (carry ["build-hipdeps", "build-xpudeps", "build-packx",
# "build-packq", "build-packn"]): session 23's call 5, which no lent machine
# ran, on the builds prepare.sh makes (build-new: main, HIP for sm_90a with
# the tests; build-xpu: main's XPU backend; build-q32: hip-qw32-gemm13).
# 1. every HIP test entry on main (act-order int4 and whole-chunk stages
#    landed), the memory entries alone, the command's device test and the
#    Python HIP tests (both check --gpu-weights / Context(gpu_weights=) by
#    the device bytes of each mode); meanwhile the XPU test entries on
#    NVIDIA's OpenCL, and qw32's warp-specialized gemm13 through the int4
#    matrix (qw32 forced) and the int4 forward test;
# 2. the README's table: main in both weights modes;
# 3. the XPU bench, with the rows switches MI4_ROWS_EARLY / CHAINS as variants;
# 4. A/B: qw32 with q32's gemm13 (main) / the ws gemm13 / qw64 forced.
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/wt-q32
for t in build-packn/new build-packq/q32 build-packx/xpu; do tar xJf $t.tar.xz; done
ln -sfn build-xpu build-x
O=/tmp/s24c2; mkdir -p $O/xpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
hip bash -c 'cd build-new && timeout 170 ctest --timeout 160 -j3 -R "^(test_hip_|hip_conformance_)" -E memory --output-on-failure' > $O/tests-hip.log 2>&1 &
hip bash -c 'cd build-new && timeout 150 ctest --timeout 140 -R "^cli_device_hip$" --output-on-failure; MOEINT4_LIBRARY=$PWD/lib/libmoeint4.so timeout 150 python3 -m pytest ../tests/python -q -rs -p no:cacheprovider -k "hip_backend"' > $O/tests-cli-python.log 2>&1 &
hip bash -c 'cd build-q32 && MOEINT4_HIP_QW32_GEMM13=ws MOEINT4_HIP_TILE=qw32 timeout 60 ctest --timeout 50 -R "^hip_conformance_int4$" --output-on-failure; MOEINT4_HIP_QW32_GEMM13=ws timeout 100 ctest --timeout 90 -R "^test_hip_forward_int4$" --output-on-failure' > $O/tests-qw32ws.log 2>&1 &
( mkdir -p /tmp/xpudeps && tar xJf build-xpudeps/deps.tar.xz -C /tmp/xpudeps
  lib=$(ldconfig -p | awk '/libnvidia-opencl\.so\.1 /{print $NF; exit}')
  mkdir -p /tmp/vendors && echo "$lib" > /tmp/vendors/nvidia.icd
  LD_LIBRARY_PATH=/tmp/xpudeps/lib OCL_ICD_VENDORS=/tmp/vendors MOEINT4_XPU_TEST_ANY_GPU=1 \
  MOEINT4_BACKEND_PATH=/work/main/build-x/lib timeout 170 ctest --test-dir /work/main/build-x --output-on-failure -j3 \
    -R '^test_xpu_(kernels|backend|conformance)(_gemv_walk|_gemv_lanes|_gemv_rows|_gemv_staged|_variant_(nibbles|lanes_late|rows_pipeline_ahead2|rows_bits_scales|rows_early|rows_early_chains2|x_global|split_columns4|lockstep2_ahead2|preload|preload_nibbles_piece_major_ahead2))?$' ) > $O/xpu/ctest.txt 2>&1 &
wait
hip bash -c 'cd build-new && timeout 60 ctest --timeout 50 -R "^test_hip_memory" --output-on-failure' > $O/tests-hip-memory.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Skipped| passed" $O/tests-hip.log $O/tests-hip-memory.log $O/tests-qw32ws.log $O/tests-cli-python.log $O/xpu/ctest.txt | tail -18
hip env OUT=$O/table DEPS=build-hipdeps TOKENS=1,8,64,256,512,4096 WEIGHTS=bf16,int4 ROUNDS=2 \
  VARIANTS="main=lib:build-new/lib" PROFILE_POINTS="mixtral-8x7b:512 qwen3-30b-a3b:4096" \
  timeout 150 bash bench/hip/ab_bench.sh > $O/table.log 2>&1
cat $O/table/ab-table.md || tail -20 $O/table.log
OUT=$O/xpu COMMIT=$(cat build-new/COMMIT) BUILT_AT=/work/main SKIP_TESTS=1 \
  VARIANTS="X=1;MOEINT4_XPU_BUILD_OPTIONS=-DMI4_ROWS_EARLY=1;MOEINT4_XPU_BUILD_OPTIONS=-DMI4_ROWS_CHAINS=2;MOEINT4_XPU_BUILD_OPTIONS=-DMI4_ROWS_EARLY=1 -DMI4_ROWS_CHAINS=2" \
  timeout 120 bash bench/xpu/h200_run.sh > $O/xpu-stdout.txt 2>&1
grep -E "copy_bandwidth|== |xpu profile|^ +1 " $O/xpu-stdout.txt | head -60
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=64,96,256,384 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-q32/lib ws=@main qw64=@main" \
  ENV_ws=MOEINT4_HIP_QW32_GEMM13=ws ENV_qw64=MOEINT4_HIP_TILE=qw64 \
  PROFILE_POINTS="mixtral-8x7b:64 qwen3-30b-a3b:256" \
  timeout 80 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -E "us  x" $O/ab/profile-*.log | grep gemm
tar czf "$OUT/call2.tgz" -C $O .
