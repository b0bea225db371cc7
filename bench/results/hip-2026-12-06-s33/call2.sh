#!/bin/bash
# Session 33, call 2 (carry ["build-hipdeps", "build-packs33"]): the fused
# decode with 8, 16 or 32 warps a block (MOEINT4_HIP_FUSED_WARPS, one build,
# build-n) and the sum's loads all at once. The forward and graph tests and
# the int4 conformance matrix, then Qwen3 M = 1 in int4: two (the two-kernel
# decode, MOEINT4_HIP_DECODE_FUSED=0), w8, w16, w32, rounds alternating,
# graph replay, L2 flushed; then each one's kernels.
O=$OUT/s33c2
. bench/hip/device_call.sh build-packs33 fused33b
hip bash -c 'cd build-n && timeout 150 ctest --timeout 140 -j3 -R "^(test_hip_forward|test_hip_graph|hip_conformance_int4)" --output-on-failure' > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -8
grep -E "FAILED|LINE" $O/tests.log | head -10
order="two w8 w16 w32"
envs() { case $1 in two) echo MOEINT4_HIP_DECODE_FUSED=0;; w8) echo MOEINT4_HIP_FUSED_WARPS=8;; w16) echo MOEINT4_HIP_FUSED_WARPS=16;; w32) echo MOEINT4_HIP_FUSED_WARPS=32;; esac; }
for r in 0 1 2; do
  for v in $order; do
    hip env $(envs $v) PYTHONUNBUFFERED=1 python3 bench/hip/hip_bench.py --lib build-n/lib/libmoeint4.so \
      --json $O/$v-r$r.json --commit $v --no-baselines --graph --weights int4 --tokens 1 --presets qwen3-30b-a3b 2>&1 |
      grep -E " graph " | sed "s/^/[$v r$r] /"
  done
  order=$(echo $order | tr ' ' '\n' | tac | tr '\n' ' ')
done | tee $O/ab.log
for v in two w8 w16 w32; do
  echo "== $v"; hip env $(envs $v) python3 bench/hip/hip_profile.py --lib build-n/lib/libmoeint4.so qwen3-30b-a3b:1 2>&1 | grep -E "us  x[0-9]|forward"
done | tee $O/profile.log
tar czf $OUT/call2.tgz -C $O .
