#!/bin/bash
# Session 19, call 2 (carry ["build-hipdeps", "build-packed"]): the tree with
# both of call 1's kept changes (two wgmmas queued in q256, the BF16
# epilogue one instance an activation), built with its tests as build-nvt;
# build-main is 32e2640 (bench/hip/prebuild.sh).
# 1. every HIP test entry and both conformance matrices;
# 2. the README's table: main vs new, both weights modes, M = 1 .. 4096;
# 3. ncu (where the warps wait) of gemm13 at Mixtral M = 64: the q32 tile
#    (the default there) and q256 forced (0.9 us a stage at any width, call 1).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o2; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
(cd build-nvt && timeout 200 ctest --timeout 120 -R '^(test_hip_|hip_conformance_)' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -24
OUT=$O/ab DEPS=build-hipdeps TOKENS=1,8,64,512,4096 WEIGHTS=bf16,int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main new=lib:build-nvt/lib" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:512 mixtral-8x7b:64" \
  timeout 280 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x" $O/ab/profile-new.log | head -40
for v in q32 q256; do
  MOEINT4_HIP_TILE=$v timeout 60 ncu --clock-control none --kernel-name regex:'int4_(ws|wgmma)_gemm' --launch-skip 10 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SchedulerStats --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section Occupancy -o $O/m64-$v \
    python3 bench/hip/hip_profile.py --plain --lib build-nvt/lib/libmoeint4.so mixtral-8x7b:64 > $O/ncu-$v.log 2>&1
  echo "ncu $v: exit $?"
  ncu -i $O/m64-$v.ncu-rep --page details > $O/details-$v.txt 2>&1
  ncu -i $O/m64-$v.ncu-rep --page source --csv --print-source sass > $O/source-$v.csv 2>&1
  xz -T4 $O/source-$v.csv; rm -f $O/m64-$v.ncu-rep
  grep -E "Duration|Issued Warp|Eligible Warps|Stall|Throughput|Function Name|Kernel Name" $O/details-$v.txt | head -14
done
tar czf "$OUT/call2.tgz" -C $O .
