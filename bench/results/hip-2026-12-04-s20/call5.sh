#!/bin/bash
# Session 20, call 5 (carry ["build-hipdeps", "build-packed"]): the
# multi-block routing's one-block middle step (route_offsets) with its chunk
# counts loaded 8 at a time and the padding spread over the block (tests
# tree build-nvt, from the working tree on 37e3b2c); the routing, graph and
# conformance entries, and A/B against main (build-main: aeae7d6) where the
# multi-block routing runs (more than 4096 slots).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/s20c5; mkdir -p $O
(cd build-nvt && timeout 200 ctest --timeout 100 -R '^(test_hip_route_int4|test_hip_route_bf16|test_hip_graph_int4|test_hip_graph_bf16|hip_conformance_int4|hip_conformance_bf16)$' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -8
OUT=$O/ab DEPS=build-hipdeps TOKENS=1024,4096 WEIGHTS=bf16,int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main new=lib:build-nvt/lib" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 qwen3-30b-a3b:1024" \
  timeout 200 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x" $O/ab/profile-*.log | grep -E "route|count_chunks|scatter" | head -30
tar czf "$OUT/call5.tgz" -C $O .
