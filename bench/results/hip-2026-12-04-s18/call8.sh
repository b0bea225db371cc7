#!/bin/bash
# Device call 8 of session 18 (2026-12-04): the HIP test entries call 7 did
# not run, on the same tree (build-nvt: gemm2's token rows by TMA in q256,
# the TMA helpers in hip_tma.h).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o8; mkdir -p $O
(cd build-nvt && timeout 150 ctest --timeout 100 -R '^(test_hip_|hip_conformance_)' -E '^(test_hip_forward_int4|test_hip_forward_bf16|test_hip_graph_int4)$' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -16
tar czf "$OUT/call8.tgz" -C $O .
