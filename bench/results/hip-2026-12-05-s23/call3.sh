#!/bin/bash
# Session 23, call 3 (carry ["build-hipdeps"]): main with act-order int4
# weights and the whole-chunk stages (A) landed: the build on the lent
# machine, all HIP test entries, the bench in both weights modes with graph
# replay and the torch peers (the README's table), the command's bench.
O=/tmp/s23c3; mkdir -p $O
OUT=$O COMMIT=${COMMIT:?} BENCH_ARGS=--graph timeout 570 bash bench/hip/h200_run.sh
tar czf "$OUT/call3.tgz" -C $O .
