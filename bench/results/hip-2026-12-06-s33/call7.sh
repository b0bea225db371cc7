#!/bin/bash
# Session 33, call 7 (carry ["build-hipdeps", "build-packs33"], kind
# nvidia-h200): runs only on an H200 (exits at once on another card).
# main (build-n), the tile rule (build-rule33, 410fe48) and st8 (the rule's
# tree with the routed decode's ring at 8 chunks a warp instead of 4,
# routed-stages8.diff; build-st8, library only): on the H200 the routed
# decode at Mixtral M = 8 takes as long as on an H100 although HBM reads
# 1.4x faster, so bytes in flight an SM may bound it. M = 3, 4, 8, both
# presets, int4 (main and rule also BF16), two rounds, graph replay, L2
# flushed; profiles of Mixtral M = 8. Sized to the session's last 400 s.
O=$OUT/s33c7
. bench/hip/device_call.sh build-packs33 main33 final33 st8
grep -q H200 $O/gpu.txt || { echo "not an H200: nothing run"; exit 0; }
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=3,4,8 WEIGHTS=int4,bf16 WEIGHTS_st8=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-n/lib rule=lib:build-rule33/lib st8=lib:build-st8/lib" \
  PROFILE_POINTS="mixtral-8x7b:8" timeout 230 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -hE "us  x1 |forward|== " $O/ab.log | tail -20
tar czf $OUT/call7.tgz -C $O .
