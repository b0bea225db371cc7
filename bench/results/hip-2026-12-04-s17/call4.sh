#!/bin/bash
# Device call 4 of session 17 (2026-12-04): call 3's kernel with its stage
# release fixed (the last-but-one stage of a tile was released twice, so the
# ring's phases slipped and the A/B's first q256 forward hung; the tests did
# not see it: no block ran more than one tile there). The int4 tests now
# also run q256 on a grid capped at 2 blocks (MOEINT4_HIP_Q256_BLOCKS=2).
# build-nvt = the tests' tree (q256 the default from 256 rows an expert),
# build-probe = the same without dequantization (timing only, wrong
# results), build-main = main 1aa47a5 (BF16 mode too). Timeouts everywhere:
# a hang must not eat the session's last device minutes.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o4; mkdir -p $O
(cd build-nvt && timeout 120 ctest --timeout 110 -R '^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4|test_hip_weights)$' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -6
OUT=$O DEPS=build-hipdeps TOKENS=512,4096 WEIGHTS=int4 ROUNDS=2 WEIGHTS_main=bf16,int4 \
  VARIANTS="main=lib:build-main new=lib:build-nvt/lib probe=lib:build-probe q256=@new" \
  ENV_q256="MOEINT4_HIP_TILE=q256" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:4096 mixtral-8x7b:512" \
  timeout 200 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab-table.md || cat $O/ab.log
grep -E "int4_ws|expand|int4_wgmma|wgmma_gemm" $O/profile-*.log | head -40
tar czf "$OUT/call4.tgz" -C $O .
