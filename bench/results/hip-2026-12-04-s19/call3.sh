#!/bin/bash
# Session 19, call 3 (carry ["build-hipdeps", "build-packed"]): qw64, the
# warp-specialized int4 GEMM with 64-row tiles, exact chunks and a 16-stage
# ring, in the tests' tree (build-nvt; not yet a default: forced by
# MOEINT4_HIP_TILE=qw64).
# 1. int4 forward tests (the tile test forces qw64 too, also on 2 blocks),
#    the graph test, and the int4 conformance matrix with qw64 forced;
# 2. A/B: the defaults against qw64 forced, same build, M = 32 .. 1024;
# 3. ncu of qw64's gemm13 at Mixtral M = 64.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o3; mkdir -p $O
(cd build-nvt && timeout 150 ctest --timeout 140 -R '^(test_hip_forward_int4|test_hip_graph_int4)$' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -4
(cd build-nvt && MOEINT4_HIP_TILE=qw64 timeout 100 ctest --timeout 90 -R '^hip_conformance_int4$' --output-on-failure) > $O/tests-conformance-qw64.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-conformance-qw64.log | tail -2
OUT=$O/ab DEPS=build-hipdeps TOKENS=32,64,128,256,512,1024 WEIGHTS=int4 ROUNDS=2 \
  ENV_qw="MOEINT4_HIP_TILE=qw64" VARIANTS="new=lib:build-nvt/lib qw=@new" \
  PROFILE_POINTS="mixtral-8x7b:64 qwen3-30b-a3b:512 mixtral-8x7b:512" \
  timeout 240 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x" $O/ab/profile-*.log | head -40
MOEINT4_HIP_TILE=qw64 timeout 60 ncu --clock-control none --kernel-name regex:'int4_ws_gemm' --launch-skip 10 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --section SchedulerStats --section SpeedOfLight \
  --section MemoryWorkloadAnalysis -o $O/m64-qw64 \
  python3 bench/hip/hip_profile.py --plain --lib build-nvt/lib/libmoeint4.so mixtral-8x7b:64 > $O/ncu-qw64.log 2>&1
echo "ncu: exit $?"
ncu -i $O/m64-qw64.ncu-rep --page details > $O/details-qw64.txt 2>&1
ncu -i $O/m64-qw64.ncu-rep --page source --csv --print-source sass > $O/source-qw64.csv 2>&1
xz -T4 $O/source-qw64.csv; rm -f $O/m64-qw64.ncu-rep
grep -E "Duration|Issued Warp|Eligible Warps|Throughput|Kernel Name" $O/details-qw64.txt | head -14
tar czf "$OUT/call3.tgz" -C $O .
