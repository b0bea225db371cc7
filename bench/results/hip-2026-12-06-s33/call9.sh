#!/bin/bash
# Session 33, call 9 (carry ["build-hipdeps", "build-packs33"], kind
# nvidia-h200), sized to the session's last 270 device seconds: runs only on
# an H200 (exits at once on another card). main (build-n) against the tile
# rule (build-rule33, 410fe48) at Mixtral's and Qwen3's M = 3 and 4, both
# weights modes, two rounds, graph replay, L2 flushed: the rule's effect on
# the card issue 15's targets name.
O=$OUT/s33c9
. bench/hip/device_call.sh build-packs33 main33 final33
grep -q H200 $O/gpu.txt || { echo "not an H200: nothing run"; exit 0; }
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=3,4 WEIGHTS=int4,bf16 ROUNDS=2 \
  VARIANTS="main=lib:build-n/lib rule=lib:build-rule33/lib" PROFILE_POINTS="mixtral-8x7b:4" \
  timeout 120 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
tar czf $OUT/call9.tgz -C $O .
