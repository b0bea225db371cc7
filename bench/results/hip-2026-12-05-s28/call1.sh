#!/bin/bash
# Session 28, call 1: gemm13 starting gemm2's weights into L2 at one and two
# tokens (branch hip-l2-prefetch, 935e402) against main (m27: 469a469, the
# same HIP sources as main's cd822ec). Carry ["build-hipdeps",
# "build-packs27", "build-packs28"]: the decode, graph and int4-conformance
# entries on the branch (prefetch by default, then forced on with gemm13's
# own rows too), A/B at M = 1, 2, 4 (l2: the default, where the experts'
# gemm2 bytes fit half of L2; off / on / self: MOEINT4_HIP_DECODE_PREFETCH
# 0 / 1 / self), then ncu's stall samples of qw32's gemm13 at Mixtral M = 64.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packs27/m27.tar.xz; tar xJf build-packs28/l2.tar.xz
O=/tmp/s28c1; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
cat $O/gpu.txt
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
T='^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4)$'
hip bash -c "cd build-l2 && timeout 150 ctest --timeout 140 -j3 -R '$T' --output-on-failure" > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -6
hip bash -c "cd build-l2 && MOEINT4_HIP_DECODE_PREFETCH=self timeout 100 ctest --timeout 90 -j3 -R '^(test_hip_forward_int4|test_hip_graph_int4)$' --output-on-failure" > $O/tests-self.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests-self.log | tail -6
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=1,2,4 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-m27/lib l2=lib:build-l2/lib off=@l2 on=@l2 self=@l2" \
  ENV_off=MOEINT4_HIP_DECODE_PREFETCH=0 ENV_on=MOEINT4_HIP_DECODE_PREFETCH=1 ENV_self=MOEINT4_HIP_DECODE_PREFETCH=self \
  PROFILE_POINTS="qwen3-30b-a3b:1 qwen3-30b-a3b:4" timeout 330 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x|forward" $O/ab/profile-*.log
tar czf "$OUT/call1.tgz" -C $O .
# where qw32's gemm13 spends Mixtral M = 64 (2.2x its floor on the H200)
hip env OUT=$O/ncu LIB=build-m27/lib/libmoeint4.so POINT=mixtral-8x7b:64 KERNEL='int4_ws_gemm' \
  COUNT=1 SECTIONS="SpeedOfLight SchedulerStats WarpStateStats Occupancy MemoryWorkloadAnalysis InstructionStats SourceCounters" \
  timeout 100 bash bench/hip/ncu_point.sh > $O/ncu.log 2>&1
tail -40 $O/ncu.log
tar czf "$OUT/call1.tgz" -C $O .
