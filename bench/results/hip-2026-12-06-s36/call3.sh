#!/bin/bash
# Session 36, call 3 (the same carry, on call 2's warm H100, 102 s of device
# time left): test_hip_graph_int4 alone on main's head (build-hd) and on the
# fold (build-fd), after it failed in call 2 on build-fd. Logs: call3/.
O=$OUT/s36c3; . bench/hip/device_call.sh build-packs36 hd fd >/dev/null; hip bash -c 'for b in hd fd; do (cd build-$b && timeout 45 ctest --timeout 44 -R "^test_hip_graph_int4$" --output-on-failure > $OUT/graph-$b.log 2>&1; echo "$b rc=$?"); done'; grep -hE "FAILED|ERROR|Passed|Failed" $OUT/graph-*.log | head
