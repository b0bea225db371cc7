#!/bin/bash
# Device call 3 of session 16 (2026-12-04): the new default checked and
# timed. Default now: the warp-specialized BF16 wgmma GEMM for both GEMMs
# with the weight rows by TMA (gemm2 only when TMA cannot take the weights;
# MOEINT4_HIP_WGMMA_TMA=0 and MOEINT4_HIP_WGMMA_PIPE=gemm2|ws|sync as
# knobs). build-nvt = the working tree (tests' tree), build-main = HEAD
# e64847a's libraries. Every HIP test and both conformance matrices with the
# default, the forward and graph tests with TMA off (the fallback), then
# both weights modes at M = 1 .. 4096, new against main, two rounds: the
# README's table.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
grep -aq 'CUtensorMap_st' build-nvt/lib/libmoeint4-hip.so || { echo "build-nvt is not the TMA tree"; exit 3; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o3; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
(cd build-nvt && timeout 200 ctest -R '^(test_hip_|hip_conformance_)' --output-on-failure) > $O/tests-default.log 2>&1
tail -4 $O/tests-default.log
(cd build-nvt && MOEINT4_HIP_WGMMA_TMA=0 timeout 60 ctest -R '^(test_hip_forward_|test_hip_graph_)' --output-on-failure) > $O/tests-tma-off.log 2>&1
tail -4 $O/tests-tma-off.log
OUT=$O DEPS=build-hipdeps TOKENS=1,8,64,512,4096 WEIGHTS=bf16,int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main new=lib:build-nvt/lib" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:4096 mixtral-8x7b:512" \
  timeout 280 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab-table.md
tar czf "$OUT/call3.tgz" -C $O .
