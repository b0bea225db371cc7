#!/bin/bash
# Session 33, call 8 (carry ["build-hipdeps", "build-packs33"]), typed as the
# run command on the H100 that call 7 got (call 7 exits on any card but an
# H200): the tile rule (build-rule33, 410fe48) against st8 (the same tree
# with the routed decode's ring at 8 chunks a warp, routed-stages8.diff;
# build-st8, library only) at M = 3, 4, 8, 16, 32 of both presets, int4, two
# rounds, graph replay, L2 flushed; profiles of Mixtral M = 8.
O=$OUT/s33c8; . bench/hip/device_call.sh build-packs33 final33 st8 >/dev/null; hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=3,4,8,16,32 WEIGHTS=int4 ROUNDS=2 VARIANTS="rule=lib:build-rule33/lib st8=lib:build-st8/lib" PROFILE_POINTS="mixtral-8x7b:8" timeout 200 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1; cat $O/ab/ab-table.md; grep -hE "us  x1 |forward|== " $O/ab.log | tail -14; tar czf $OUT/call8.tgz -C $O .
