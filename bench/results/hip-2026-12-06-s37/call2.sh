#!/bin/bash
# Session 37, call 2 (same carry as call 1, the H100 call 1 left warm): main's
# int4 forward entry, which did not finish within 100 s in session 36 nor in
# call 1, verbose (which cmocka test runs long) with a 330 s bound; beside it
# the chains build's int4 conformance and weights entries, then its forward.
O=$OUT/s37c2
. bench/hip/device_call.sh build-packs37 mn ch
hip bash -c 'cd build-mn && timeout 340 ctest -V --timeout 330 -R "^test_hip_forward_int4$"' > $O/forward-mn.log 2>&1 &
hip bash -c 'cd build-ch && timeout 120 ctest --timeout 110 -j2 -R "^(test_hip_weights|hip_conformance_int4)$" --output-on-failure' > $O/tests-ch.log 2>&1
grep -hE "tests passed|\*\*\*|Failed|FAILED" $O/tests-ch.log | tail -4
hip bash -c 'cd build-ch && timeout 200 ctest -V --timeout 190 -R "^test_hip_forward_int4$"' > $O/forward-ch.log 2>&1 &
wait
grep -hE "^[0-9]+: \[ +(RUN|OK|FAILED) |tests passed|Failed|Timeout|\*\*\*" $O/forward-mn.log | tail -30
grep -hE "^[0-9]+: \[ +(OK|FAILED) |tests passed|Failed|Timeout" $O/forward-ch.log | tail -20
tar czf $OUT/call2.tgz -C $O .
