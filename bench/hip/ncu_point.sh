#!/bin/bash
# Hardware counters of one HIP-backend kernel at one (preset, M[, tile]) point,
# on the lent GPU: ncu over `hip_profile.py --plain` (no torch.profiler, whose
# CUPTI session ncu cannot share). Report text goes to $OUT.
#   OUT=/tmp/out LIB=/tmp/ab-main/lib/libmoeint4.so POINT=mixtral-8x7b:512 \
#   KERNEL=int4_wgmma_gemm bash bench/hip/ncu_point.sh
# KERNEL: an ncu --kernel-name regex (regex: is added); COUNT: launches
# profiled (default 2: gemm13 and gemm2 when KERNEL matches both), after SKIP
# (default 20) launches of the timing forwards; SECTIONS: ncu sections;
# DEPS: the carried dependencies (the core library links cJSON). SASS=1 also
# keeps the report and prints ncu's source page: per SASS instruction, its
# executed count and warp-stall samples by reason (ncu-<name>-sass.csv;
# bench/hip/sass_stalls.py sums it up).
set -u
OUT=${OUT:-$PWD/out-ncu}
: "${LIB:?the libmoeint4.so to profile}" "${POINT:?preset:M[:tile]}" "${KERNEL:?kernel name regex}"
SECTIONS=${SECTIONS:-SpeedOfLight SchedulerStats WarpStateStats Occupancy MemoryWorkloadAnalysis LaunchStats}
mkdir -p "$OUT"
# shellcheck source=bench/hip/nvidia_build.sh
. "$(dirname "$0")/nvidia_build.sh"
use_hip_deps "${DEPS:-build-hipdeps}"
name=$(echo "$POINT-$KERNEL" | tr -c 'A-Za-z0-9.-' '_')
section_args=()
for s in $SECTIONS; do section_args+=(--section "$s"); done
# the first launches are the timing forwards of hip_profile.py: skip them
# clocks left alone: the device's METHOD.md asks it, and graph timings ran so
report=()
[ "${SASS:-0}" = 1 ] && report=(-f -o "$OUT/ncu-$name")
ncu --clock-control none --kernel-name "regex:$KERNEL" --launch-skip "${SKIP:-20}" --launch-count "${COUNT:-2}" \
  "${report[@]}" "${section_args[@]}" python3 bench/hip/hip_profile.py --plain --lib "$LIB" "$POINT" \
  > "$OUT/ncu-$name.txt" 2>&1
echo "ncu $POINT $KERNEL: exit $? ($OUT/ncu-$name.txt)"
if [ "${SASS:-0}" = 1 ]; then
  ncu --import "$OUT/ncu-$name.ncu-rep" --page details "${section_args[@]}" >> "$OUT/ncu-$name.txt" 2>&1
  ncu --import "$OUT/ncu-$name.ncu-rep" --page source --csv --print-source sass \
    > "$OUT/ncu-$name-sass.csv" 2> "$OUT/ncu-$name-sass.err"
  echo "source page: exit $? ($(wc -l < "$OUT/ncu-$name-sass.csv") lines)"
fi
grep -E "Duration|Throughput|Issued|Eligible|Achieved Occupancy|Registers|No Eligible|Stall" \
  "$OUT/ncu-$name.txt" | head -30
