#!/bin/bash
# Device call 1 of session 17 (2026-12-04): the warp-specialized int4 GEMM
# (MI4_TILE_Q256, hip_int4_ws.hip) run for the first time. build-nvt = the
# q256 branch's tree with tests (built on the development machine with nvcc
# 13), build-main = main 1aa47a5's libraries. A forward test first (a hang
# stops the call), then every HIP test and both conformance matrices, then
# int4 at M = 512 and 4096: main (expansion + BF16 wgmma from 256 rows an
# expert; BF16 mode too), new (q256 from 256 rows an expert), q256 (forced at
# every M), two rounds, per-kernel profiles.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o1; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
(cd build-nvt && timeout 100 ctest -R '^test_hip_forward_int4$' --output-on-failure) > $O/smoke.log 2>&1
smoke=$?
tail -5 $O/smoke.log
if [ $smoke -eq 0 ]; then
  (cd build-nvt && timeout 170 ctest -R '^(test_hip_|hip_conformance_)' --output-on-failure) > $O/tests.log 2>&1
  tail -4 $O/tests.log
  OUT=$O DEPS=build-hipdeps TOKENS=512,4096 WEIGHTS=int4 ROUNDS=2 WEIGHTS_main=bf16,int4 \
    VARIANTS="main=lib:build-main new=lib:build-nvt/lib q256=@new" ENV_q256="MOEINT4_HIP_TILE=q256" \
    PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:4096 mixtral-8x7b:512" \
    timeout 250 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
  cat $O/ab-table.md
  grep -E "q256|int4_ws|expand" $O/profile-*.log | head -30
else
  (cd build-nvt/tests/hip 2>/dev/null || cd build-nvt; timeout 120 compute-sanitizer --tool memcheck ./test_hip_forward 2>&1 | tail -40) > $O/sanitizer.log 2>&1
  tail -40 $O/sanitizer.log
fi
tar czf "$OUT/call1.tgz" -C $O .
