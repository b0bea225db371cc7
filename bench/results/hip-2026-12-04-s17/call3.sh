#!/bin/bash
# Device call 3 of session 17 (2026-12-04): the warp-specialized int4 GEMM
# with the k loop of call 1 (one wgmma k step at a time, the next step's
# fragment dequantized once the one before has completed: the accumulator
# chain never drains inside a tile) on call 2's 64-input stages and shared
# tile tables. Call 2's stages of 4 wgmmas, each stage waited for in full,
# took 3.4x the matrix cores' time; its LAG 5 variant deadlocked (now a
# static_assert). build-nvt = the tests' tree (LAG 3), build-lag1 (LAG 1),
# build-probe (timing probe: no dequantization, wrong results, no tests),
# build-main = main 1aa47a5. Tests, the A/B at M = 512 and 4096, ncu.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o3; mkdir -p $O
(cd build-nvt && timeout 100 ctest -R '^test_hip_forward_int4$' --output-on-failure) > $O/smoke.log 2>&1
smoke=$?
tail -3 $O/smoke.log
if [ $smoke -eq 0 ]; then
  (cd build-nvt && timeout 170 ctest -R '^(test_hip_|hip_conformance_)' --output-on-failure) > $O/tests.log 2>&1
  grep -E "tests passed|\*\*\*|Failed" $O/tests.log | tail -5
  OUT=$O DEPS=build-hipdeps TOKENS=512,4096 WEIGHTS=int4 ROUNDS=2 WEIGHTS_main=bf16,int4 \
    VARIANTS="main=lib:build-main new=lib:build-nvt/lib lag1=lib:build-lag1 probe=lib:build-probe q256=@new" \
    ENV_q256="MOEINT4_HIP_TILE=q256" \
    PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:4096 mixtral-8x7b:512" \
    timeout 280 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
  cat $O/ab-table.md || tail -20 $O/ab.log
  grep -E "int4_ws|expand|int4_wgmma" $O/profile-*.log | head -40
  OUT=$O LIB=build-nvt/lib/libmoeint4.so POINT=qwen3-30b-a3b:4096 KERNEL=int4_ws_gemm COUNT=1 \
    timeout 80 bash bench/hip/ncu_point.sh > $O/ncu.log 2>&1
  tail -20 $O/ncu.log
else
  (cd build-nvt/tests/hip && timeout 150 compute-sanitizer --tool memcheck ./test_hip_forward 2>&1 | tail -60) > $O/sanitizer.log 2>&1
  tail -40 $O/sanitizer.log
fi
tar czf "$OUT/call3.tgz" -C $O .
