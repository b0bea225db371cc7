#!/bin/bash
# Session 33, call 4 (carry ["build-hipdeps", "build-packs33"]): main
# (build-n, as call 3). Call 3 showed Mixtral M = 4 at 1.44-1.45x of the
# int4 floor on an H100 where M = 2 and 8 sit at 1.18-1.21x: M = 2 to 4 take
# the direct decode (slots <= local experts), which reads an expert once per
# slot, and 8 slots over 8 experts hit about 5.3 distinct ones. A/B of the
# tile choice: main (default) against d8 (MOEINT4_HIP_TILE=d8: the routed
# decode, each expert read once) at M = 2, 3, 4, 8 of both presets, int4,
# three rounds, graph replay, L2 flushed; profiles of Mixtral M = 4.
O=$OUT/s33c4
. bench/hip/device_call.sh build-packs33 main33
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=2,3,4,8 WEIGHTS=int4 ROUNDS=3 \
  VARIANTS="main=lib:build-n/lib d8=@main" ENV_d8="MOEINT4_HIP_TILE=d8" \
  PROFILE_POINTS="mixtral-8x7b:4 mixtral-8x7b:2" timeout 400 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -h "copy .* GB/s" $O/ab.log | head -2
grep -hE "us  x1 |forward" $O/ab/profile-*.log | head -30
tar czf $OUT/call4.tgz -C $O .
