#!/bin/bash
# Prepared in session 27, not run (no device time left): the routed decode
# (d8: 2-4 rows an expert) without zero-point registers, as the direct
# decode landed in fddd8bc, and gemm2 beside gemm13 at one token (branch
# hip-gemm2-resident). Carry ["build-hipdeps", "build-packs27"] with packs
# m27, routed and res (prepare.sh m27 / routed / res): the decode, graph and
# int4-conformance entries on each branch, the d8 points and Qwen3 M = 1
# against main;
# then ncu over qw32's gemm13 at Mixtral M = 64 and the decode kernels at
# Qwen3 M = 1 (stall samples). PART=ab runs the tests and A/B only,
# PART=ncu the profiles only (each fits one 10-minute call).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/wt-routed; ln -sfn "$PWD" /tmp/wt-res # the builds name their source trees
for t in build-packs27/m27 build-packs27/routed build-packs27/res; do tar xJf $t.tar.xz; done
O=/tmp/s27c5; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
if [ "${PART:-all}" != ncu ]; then
hip bash -c 'cd build-routed && timeout 150 ctest --timeout 140 -j3 -R "^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4)$" --output-on-failure' > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -6
hip bash -c 'cd build-res && timeout 150 ctest --timeout 140 -j3 -R "^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4)$" --output-on-failure' > $O/tests-res.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests-res.log | tail -6
# gemm2 beside gemm13 at Qwen3 M = 1 (Mixtral M = 1 keeps the ring: 256 output blocks)
hip env OUT=$O/res DEPS=build-hipdeps TOKENS=1,2 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-m27/lib res=lib:build-res/lib ring=@res" ENV_ring=MOEINT4_HIP_DECODE_GEMM2=ring \
  PROFILE_POINTS="qwen3-30b-a3b:1" timeout 150 bash bench/hip/ab_bench.sh > $O/res.log 2>&1
cat $O/res/ab-table.md || tail -30 $O/res.log
grep -E "us  x|forward" $O/res/profile-*.log
hip env OUT=$O/routed DEPS=build-hipdeps TOKENS=8,16,32 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-m27/lib routed=lib:build-routed/lib" \
  PROFILE_POINTS="mixtral-8x7b:8 qwen3-30b-a3b:32" timeout 200 bash bench/hip/ab_bench.sh > $O/routed.log 2>&1
cat $O/routed/ab-table.md || tail -30 $O/routed.log
grep -E "us  x|forward" $O/routed/profile-*.log
fi
[ "${PART:-all}" = ab ] && { tar czf "$OUT/call5.tgz" -C $O .; exit 0; }
# where qw32's gemm13 spends Mixtral M = 64 (2.2x its floor on the H200):
# stall reasons and memory traffic of main's kernel
hip env OUT=$O/ncu LIB=build-m27/lib/libmoeint4.so POINT=mixtral-8x7b:64 KERNEL='int4_ws_gemm<32, true' \
  COUNT=1 SECTIONS="SpeedOfLight SchedulerStats WarpStateStats Occupancy MemoryWorkloadAnalysis MemoryWorkloadAnalysis_Tables InstructionStats" \
  timeout 150 bash bench/hip/ncu_point.sh > $O/ncu.log 2>&1
tail -32 $O/ncu.log
# where Qwen3 M = 1's gemm2 waits (8.5 us alone under ncu in session 10, 16% of DRAM): stall samples
hip env OUT=$O/ncu LIB=build-m27/lib/libmoeint4.so POINT=qwen3-30b-a3b:1 KERNEL=int4_decode_gemm \
  COUNT=2 SECTIONS="SpeedOfLight WarpStateStats SourceCounters LaunchStats Occupancy" \
  timeout 120 bash bench/hip/ncu_point.sh > $O/ncu-qwen3.log 2>&1
tail -32 $O/ncu-qwen3.log
tar czf "$OUT/call5.tgz" -C $O .
