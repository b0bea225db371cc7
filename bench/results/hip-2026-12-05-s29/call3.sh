#!/bin/bash
# Session 29, call 3 (carry ["build-hipdeps", "build-packs29"]): call 1 had
# lagB (q256 1, qw128 1, qw64 2, qw32 2) fastest at every warp-specialized
# point and rowptr 1.6-2.9% faster where q256 runs. lagB is main's HIP code
# since 0403859. As reshaped in session 30 (not yet run on a GPU): lagB
# against the row-pointer producer (ws-row-pointers.diff applied to
# 1efbecb) with lagB's lags (lagBrow) and with every tile's lag 1
# (lagCrow), at M = 64, 256, 1024, 4096 (each tile once a preset); then the
# int4 tests of lagBrow and lagCrow and, on an H200 (issue 15's card), the
# README's table in both weights modes for lagB. The device was scarce
# (session 30: eleven failed starts left 509 of its 1800 device seconds):
# m27 and lagC were dropped, LIMIT (the call's seconds) sizes the A/B and
# gates the steps after it, and BUILDS (default lagB lagBrow lagCrow) picks
# the builds. Outputs land under $OUT as they come, so a call cut at its
# limit keeps what finished.
O=$OUT/s29c3
BUILDS=${BUILDS:-lagB lagBrow lagCrow} # the A/B's builds, the first its baseline
. bench/hip/device_call.sh build-packs29 $BUILDS
left() { echo $(( ${LIMIT:-600} - SECONDS )); } # seconds this call has left
ab=$(( $(left) - 100 )); [ $ab -gt 200 ] && ab=200
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=${TOKENS:-64,256,1024,4096} WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="$(for b in $BUILDS; do printf '%s=lib:build-%s/lib ' $b $b; done)" \
  PROFILE_POINTS="mixtral-8x7b:64 qwen3-30b-a3b:4096" timeout $ab bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x1 .*int4_ws|forward" $O/ab/profile-*.log
int4_tests() {
  for v in "$@"; do
  hip bash -c "cd build-$v && timeout 80 ctest --timeout 75 -j4 -R '^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4|test_hip_weights)$' --output-on-failure" > $O/tests-$v.log 2>&1
  echo "$v:"; grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests-$v.log | tail -5
  done
}
[ "$(left)" -gt 85 ] && int4_tests lagBrow
[ "$(left)" -gt 85 ] && [[ " $BUILDS " == *" lagCrow "* ]] && int4_tests lagCrow
grep -q H200 $O/gpu.txt && [ "$(left)" -gt 120 ] && {
  hip env OUT=$O/table DEPS=build-hipdeps TOKENS=1,8,64,256,512,4096 WEIGHTS=bf16,int4 ROUNDS=2 \
    VARIANTS="main=lib:build-lagB/lib" PROFILE_POINTS="qwen3-30b-a3b:1" \
    timeout $(( $(left) - 15 )) bash bench/hip/ab_bench.sh > $O/table.log 2>&1
  cat $O/table/ab-table.md || tail -20 $O/table.log
  grep -h "copy .* GB/s" $O/table.log | head -2
}
tar czf $OUT/call3.tgz -C $O .
