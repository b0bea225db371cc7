#!/bin/bash
# Session 37, call 4 (carry ["build-hipdeps", "build-packs38"]; the H100 call 3
# left warm): main's head (build-h37) through the 6 memory entries, alone.
O=$OUT/s37c4
. bench/hip/device_call.sh build-packs38 h37 >/dev/null
hip bash -c 'cd build-h37 && timeout 120 ctest --timeout 115 -R "^test_hip_memory" --output-on-failure' > $O/tests-memory.log 2>&1
grep -hE "tests passed|\*\*\*|Failed|Total Test" $O/tests-memory.log
tar czf $OUT/call4.tgz -C $O .
