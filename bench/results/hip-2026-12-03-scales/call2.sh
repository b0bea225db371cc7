#!/bin/bash
# Device call 2 of 2026-12-03 (session 12): where the routed gemm13's
# instructions go (SASS of HEAD's routed kernels; ncu with pipe use and the
# stall sampling's top lines), a deeper ring for the staged kernels (r5: 8
# warps, ring 5), and the routed tiles forced (MOEINT4_HIP_TILE=d8) at
# 16, 48 and 64 tokens against today's choice.
set -x
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o2
cuobjdump -sass build-grid/libmoeint4-hip.so |
  awk '/Function : /{p = /int4_routed_decode/} p' > /tmp/o2/sass-routed-head.txt
# committed: only the staged gemm13 kernel (ILb1ELb0E), encodings stripped,
# as call2-sass-routed-gemm13-staged.txt
grep -c . /tmp/o2/sass-routed-head.txt
stalls=""
for r in long_scoreboard short_scoreboard wait barrier math_pipe_throttle mio_throttle lg_throttle \
  not_selected selected dispatch_stall no_instruction branch_resolving; do
  stalls+="${stalls:+,}smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
ncu --clock-control none --kernel-name "regex:int4_routed_decode" --launch-skip 20 --launch-count 1 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
  --section SchedulerStats --section WarpStateStats --section SourceCounters --metrics "$stalls" \
  python3 bench/hip/hip_profile.py --plain --lib build-grid/libmoeint4.so mixtral-8x7b:8 \
  > /tmp/o2/ncu-routed13-m8.txt 2>&1
echo "ncu sections: exit $?"
ncu --clock-control none --kernel-name "regex:int4_routed_decode" --launch-skip 20 --launch-count 1 \
  --section ComputeWorkloadAnalysis --section InstructionStats --print-details all \
  python3 bench/hip/hip_profile.py --plain --lib build-grid/libmoeint4.so mixtral-8x7b:8 \
  > /tmp/o2/ncu-routed13-m8-details.txt 2>&1
echo "ncu details: exit $?"
export ENV_oldd8="MOEINT4_HIP_TILE=d8" TOKENS_oldd8=16,48,64 TOKENS_r5=8,32
OUT=/tmp/o2 DEPS=build-hipdeps TOKENS=8,16,32,48,64 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="old=lib:build-grid r5=lib:build-r5 oldd8=@old" \
  PROFILE_POINTS="mixtral-8x7b:8 mixtral-8x7b:16 qwen3-30b-a3b:64" \
  bash bench/hip/ab_bench.sh > /tmp/o2/ab.log 2>&1
grep graph /tmp/o2/ab.log
grep -h "us  x1\|forward" /tmp/o2/profile-*.log
grep -E "Pipe|pipe|Utilization|Executed Ipc|Issue Slots" /tmp/o2/ncu-routed13-m8*.txt | head -40
tar czf "$OUT/call2.tgz" -C /tmp/o2 .
