#!/bin/bash
# Session 31, call 1 (carry ["build-hipdeps", "build-packs29", "build-packs31"]):
# session 29's call 3 (lagB: main's HIP code; lagBrow / lagCrow: the
# row-pointer producer with lags 1, 1, 2, 2 and with every lag 1) plus
# lagBmap: branch hip-identity-map (landed unchanged as 1213fa3: no expert_map
# load where the map is the identity, a dependent HBM round trip less before
# gemm13's first weights at one token). M = 1 (the decode chain), 64, 256,
# 1024, 4096 of both presets, then the tests of each candidate. LIMIT (the
# call's seconds) sizes the A/B and gates the tests; outputs land under $OUT
# as they come. Ran as LIMIT=320 AB=170 TOKENS=1,64,4096 BUILDS="lagB lagBmap
# lagBrow" (the device time left), on a lent H100: call1.tgz.
O=$OUT/s31c1
. bench/hip/device_call.sh build-packs29 lagB lagBrow lagCrow
. bench/hip/device_call.sh build-packs31 lagBmap
BUILDS=${BUILDS:-lagB lagBmap lagBrow lagCrow} # the first: the baseline
left() { echo $(( ${LIMIT:-600} - SECONDS )); }
ab=${AB:-$(( $(left) - 250 ))}; [ $ab -gt 300 ] && ab=300 # AB: the A/B's seconds
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=${TOKENS:-1,64,256,1024,4096} WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="$(for b in $BUILDS; do printf '%s=lib:build-%s/lib ' $b $b; done)" \
  PROFILE_POINTS="qwen3-30b-a3b:1 qwen3-30b-a3b:4096" timeout $ab bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x1 .*(int4_ws|decode)|forward" $O/ab/profile-*.log
tests() { # build, ctest regex
  hip bash -c "cd build-$1 && timeout 100 ctest --timeout 90 -j4 -R '$2' --output-on-failure" > $O/tests-$1.log 2>&1
  echo "$1:"; grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests-$1.log | tail -6
}
int4='^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4|test_hip_weights)$'
[ "$(left)" -gt 110 ] && tests lagBmap '^(test_hip_forward_int4|test_hip_forward_bf16|test_hip_route_int4|test_hip_graph_int4|hip_conformance_int4|hip_conformance_bf16)$'
[ "$(left)" -gt 100 ] && tests lagBrow "$int4"
[ "$(left)" -gt 100 ] && [[ " $BUILDS " == *" lagCrow "* ]] && tests lagCrow "$int4"
tar czf $OUT/call1.tgz -C $O .
