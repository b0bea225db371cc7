#!/bin/bash
# Session 23, call 4 (carry ["build-hipdeps", "build-xpudeps", "build-packx",
# "build-packq"]):
# 1. the XPU backend of main (zero-point kernels, act-order, the rows GEMVs'
#    new opt-in switches MI4_ROWS_EARLY / MI4_ROWS_CHAINS) on NVIDIA's
#    OpenCL: bench/xpu/h200_run.sh with those switches as variants;
# 2. meanwhile (tests only) the HIP branch hip-qw32-gemm13 (build-q32, tests
#    build): qw32 with the warp-specialized gemm13 (MOEINT4_HIP_QW32_GEMM13=ws)
#    through the int4 matrix with qw32 forced and the int4 forward test;
# 3. then A/B: main's qw32 (q32's gemm13) vs the ws gemm13 vs qw64 forced.
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/wt-q32
tar xJf build-packq/q32.tar.xz
O=/tmp/s23c4; mkdir -p $O/xpu
( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
  cd build-q32 && MOEINT4_HIP_QW32_GEMM13=ws MOEINT4_HIP_TILE=qw32 timeout 100 ctest --timeout 90 \
    -R '^hip_conformance_int4$' --output-on-failure > $O/tests-qw32ws-conformance.log 2>&1
  MOEINT4_HIP_QW32_GEMM13=ws timeout 120 ctest --timeout 110 -R '^test_hip_forward_int4$' \
    --output-on-failure > $O/tests-qw32ws-forward.log 2>&1 ) &
OUT=$O/xpu COMMIT=${COMMIT:?} BUILT_AT=/work/main \
  VARIANTS="X=1;MOEINT4_XPU_BUILD_OPTIONS=-DMI4_ROWS_EARLY=1;MOEINT4_XPU_BUILD_OPTIONS=-DMI4_ROWS_CHAINS=2;MOEINT4_XPU_BUILD_OPTIONS=-DMI4_ROWS_EARLY=1 -DMI4_ROWS_CHAINS=2" \
  timeout 330 bash -c '(tar xJf build-packx/xpu.tar.xz && ln -sfn build-xpu build-x && bash bench/xpu/h200_run.sh)' > $O/xpu-stdout.txt 2>&1
wait
grep -E "tests passed|\*\*\*|Failed" $O/tests-qw32ws-*.log
grep -E "ctest exit|tests passed|copy_bandwidth|== |xpu profile|^ +1 " $O/xpu-stdout.txt | head -80
( . bench/hip/nvidia_build.sh
  OUT=$O/ab DEPS=build-hipdeps TOKENS=64,96,256,384 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-q32/lib ws=@main qw64=@main" \
  ENV_ws=MOEINT4_HIP_QW32_GEMM13=ws ENV_qw64=MOEINT4_HIP_TILE=qw64 \
  PROFILE_POINTS="mixtral-8x7b:64 qwen3-30b-a3b:256" \
  timeout 200 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
  cat $O/ab/ab-table.md || tail -20 $O/ab.log
  grep -E "us  x" $O/ab/profile-*.log | grep gemm )
tar czf "$OUT/call4.tgz" -C $O .
