#!/bin/bash
# The int4 decode kernels' knobs swept on a built tree (bench/hip/h200_run.sh
# build first): for each "RING:BLOCKS" setting (MOEINT4_HIP_DECODE_RING,
# MOEINT4_HIP_DECODE_BLOCKS; "auto" leaves it unset) the graph-replay time of
# the int4 forward at M = 1 and 8, and the baseline library LIBS names.
#   OUT=/tmp/out LIB=build-h200/lib/libmoeint4.so SETTINGS="auto:auto 8:auto 6:auto"
#   BASE_LIB=other/lib/libmoeint4.so bench/hip/decode_sweep.sh
set -u
OUT=${OUT:-$PWD/out-h200}
LIB=${LIB:-build-h200/lib/libmoeint4.so}
COMMIT=${COMMIT:-unknown}
mkdir -p "$OUT"
run() { # name lib
  PYTHONUNBUFFERED=1 python3 bench/hip/hip_bench.py --lib "$2" --json "$OUT/sweep-$1.json" \
    --commit "$COMMIT" --no-baselines --graph --weights int4 --tokens "${TOKENS:-1,8}" 2>&1 |
    grep -E "graph|copy" | sed "s/^/[$1] /"
}
if [ -n "${BASE_LIB:-}" ]; then run base "$BASE_LIB"; fi
for s in ${SETTINGS:-auto:auto}; do
  ring=${s%%:*} blocks=${s##*:}
  ( [ "$ring" = auto ] || export MOEINT4_HIP_DECODE_RING=$ring
    [ "$blocks" = auto ] || export MOEINT4_HIP_DECODE_BLOCKS=$blocks
    run "ring$ring-blocks$blocks" "$LIB" )
done
