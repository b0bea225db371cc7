#!/bin/bash
# Device call 5 of session 17 (2026-12-04): the tree as committed (q256 opt-in
# through MOEINT4_HIP_INT4_PREFILL=q256 at prepare; the default from 256 rows
# an expert back to the expansion), the int4 HIP tests and both conformance
# matrices. build-nvt = the tests' tree.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o5; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt 2>&1
(cd build-nvt && timeout 100 ctest --timeout 90 -R '^(test_hip_forward_int4|test_hip_graph_int4|test_hip_weights|hip_conformance_int4|hip_conformance_bf16)$' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -8
tar czf "$OUT/call5.tgz" -C $O .
