#!/bin/bash
# Device call 3 of session 18 (2026-12-04): where q256's warps wait. ncu's
# source counters (warp stall samples per SASS instruction) of gemm13 at
# Qwen3 M = 4096 for main's register-A q256 (build-main) and for call 1-2's
# shared-memory A tiles (build-nvt); both forced by MOEINT4_HIP_TILE=q256.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o3; mkdir -p $O
for v in main nvt; do
  lib=build-$v; [ $v = nvt ] && lib=build-nvt/lib
  MOEINT4_HIP_TILE=q256 timeout 150 ncu --clock-control none --kernel-name regex:int4_ws_gemm --launch-skip 20 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SchedulerStats --section SpeedOfLight -o $O/q256-$v \
    python3 bench/hip/hip_profile.py --plain --lib $lib/libmoeint4.so qwen3-30b-a3b:4096 > $O/ncu-$v.log 2>&1
  echo "ncu $v: exit $?"
  ncu -i $O/q256-$v.ncu-rep --page details > $O/details-$v.txt 2>&1
  ncu -i $O/q256-$v.ncu-rep --page source --csv --print-source sass > $O/source-$v.csv 2>&1
  echo "source $v: exit $? $(wc -l < $O/source-$v.csv) lines"
  grep -E "Duration|Issued Warp|Eligible Warps|Stall|Throughput" $O/details-$v.txt | head -12
done
ls -la $O
tar czf "$OUT/call3.tgz" -C $O .
