#!/bin/bash
# Device call 3 of 2026-12-03: ncu of the routed decode at Mixtral M = 8 and
# of the direct decode at M = 1 (HEAD and the two-chunk step), with the
# warp stall breakdown.
set -x
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
stalls=""
for r in long_scoreboard short_scoreboard wait barrier math_pipe_throttle mio_throttle lg_throttle \
  not_selected selected dispatch_stall no_instruction membar tex_throttle drain branch_resolving \
  imc_miss misc sleeping; do
  stalls+="${stalls:+,}smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
profile() { # name lib point kernel
  ncu --clock-control none --kernel-name "regex:$4" --launch-skip 20 --launch-count 2 \
    --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section Occupancy \
    --section InstructionStats --section LaunchStats --section MemoryWorkloadAnalysis --metrics "$stalls" \
    python3 bench/hip/hip_profile.py --plain --lib "$2" "$3" > "$OUT/ncu-$1.txt" 2>&1
  echo "ncu $1: exit $?"
}
profile routed-m8-main build-main/libmoeint4.so mixtral-8x7b:8 int4_routed_decode
profile decode-m1-main build-main/libmoeint4.so mixtral-8x7b:1 int4_decode_gemm
profile decode-m1-s2 build-nvt/lib/libmoeint4.so mixtral-8x7b:1 int4_decode_gemm
profile routed-q8-main build-main/libmoeint4.so qwen3-30b-a3b:8 int4_routed_decode
grep -E "^  [a-z]|Duration|DRAM Throughput|Issued Warp|Eligible Warps|Active Warps Per|Executed Instructions  |stalled|Registers Per" "$OUT"/ncu-*.txt
