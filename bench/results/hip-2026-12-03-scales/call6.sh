#!/bin/bash
# Device call 6 of 2026-12-03 (session 12): ncu of the routed decode at
# 35dc0d7 (head: f16 scales by one conversion) at Mixtral M = 8, pipe use and
# stalls, to see what sets its pace now.
set -x
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o6
stalls=""
for r in long_scoreboard short_scoreboard wait barrier math_pipe_throttle mio_throttle \
  not_selected selected dispatch_stall no_instruction branch_resolving; do
  stalls+="${stalls:+,}smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
timeout 150 ncu --clock-control none --kernel-name "regex:int4_routed_decode" --launch-skip 20 --launch-count 2 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats \
  --section InstructionStats --metrics "$stalls" --print-details all \
  python3 bench/hip/hip_profile.py --plain --lib build-head/libmoeint4.so mixtral-8x7b:8 \
  > /tmp/o6/ncu-routed-m8-head.txt 2>&1
echo "ncu: exit $?"
grep -E "^  [a-z]|Duration|Issued Warp|Eligible Warps|Active Warps Per|stalled|  ALU  |  FMA  |highest-utilized" /tmp/o6/ncu-routed-m8-head.txt
tar czf "$OUT/call6.tgz" -C /tmp/o6 .
