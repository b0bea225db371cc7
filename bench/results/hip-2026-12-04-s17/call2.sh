#!/bin/bash
# Device call 2 of session 17 (2026-12-04): the warp-specialized int4 GEMM
# reworked after call 1 (there 3-6 us a 128-input chunk, 2-3x the matrix
# cores' time): stages of 64 inputs (6 x 36 KB), QW_LAG + 1 stages of copies
# in flight a producer thread (call 1: at most 2 of 3), the tile's input rows
# and router weights in a shared table made once a tile, 4 wgmmas a stage
# from one set of register fragments while the next stage's are dequantized.
# build-nvt = the tests' tree (LAG 3); build-lag1 / build-lag5 the same with
# MI4_QW_LAG 1 / 5; build-main = main 1aa47a5. Smoke test, every HIP test
# and both conformance matrices, the A/B at M = 512 and 4096 (q256: forced
# at every M), then ncu of the new gemm13 at Qwen3 M = 4096.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o2; mkdir -p $O
(cd build-nvt && timeout 100 ctest -R '^test_hip_forward_int4$' --output-on-failure) > $O/smoke.log 2>&1
smoke=$?
tail -3 $O/smoke.log
if [ $smoke -eq 0 ]; then
  (cd build-nvt && timeout 170 ctest -R '^(test_hip_|hip_conformance_)' --output-on-failure) > $O/tests.log 2>&1
  grep -E "tests passed|\*\*\*|Failed" $O/tests.log | tail -5
  OUT=$O DEPS=build-hipdeps TOKENS=512,4096 WEIGHTS=int4 ROUNDS=2 WEIGHTS_main=bf16,int4 \
    VARIANTS="main=lib:build-main new=lib:build-nvt/lib lag1=lib:build-lag1 lag5=lib:build-lag5 q256=@new" \
    ENV_q256="MOEINT4_HIP_TILE=q256" \
    PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:4096 mixtral-8x7b:512" \
    timeout 260 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
  cat $O/ab-table.md
  grep -E "int4_ws|expand|int4_wgmma" $O/profile-*.log | head -40
  OUT=$O LIB=build-nvt/lib/libmoeint4.so POINT=qwen3-30b-a3b:4096 KERNEL=int4_ws_gemm \
    timeout 100 bash bench/hip/ncu_point.sh > $O/ncu.log 2>&1
  tail -32 $O/ncu.log
else
  (cd build-nvt/tests/hip && timeout 150 compute-sanitizer --tool memcheck ./test_hip_forward 2>&1 | tail -60) > $O/sanitizer.log 2>&1
  tail -40 $O/sanitizer.log
fi
tar czf "$OUT/call2.tgz" -C $O .
