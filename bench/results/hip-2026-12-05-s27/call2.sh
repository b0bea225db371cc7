#!/bin/bash
# Session 27, call 2 (carry ["build-hipdeps", "build-packs27"]): the decode
# entries on hip-decode-meta (decode-zeros.diff: no zero-point registers in
# the ring for matrices without them), then deeper gemm13 rings, which had
# spilled under gemm13's 80 registers: base = main d92c348, meta = the
# branch (ring 4), g6 / g8 = gemm13's ring 6 / 8 (gemm2's 4), r6 = both 6.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
for t in build-packs27/meta build-packs27/base; do tar xJf $t.tar.xz; done
O=/tmp/s27c2; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
hip bash -c 'cd build-meta && timeout 150 ctest --timeout 140 -j3 -R "^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4)$" --output-on-failure' > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -6
hip env OUT=$O/decode DEPS=build-hipdeps TOKENS=1,4,8 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="base=lib:build-base meta=lib:build-meta/lib g6=@meta g8=@meta r6=@meta" \
  ENV_g6="MOEINT4_HIP_DECODE_RING=6 MOEINT4_HIP_DECODE_RING2=4" \
  ENV_g8="MOEINT4_HIP_DECODE_RING=8 MOEINT4_HIP_DECODE_RING2=4" ENV_r6=MOEINT4_HIP_DECODE_RING=6 \
  PROFILE_POINTS="mixtral-8x7b:1 qwen3-30b-a3b:1" timeout 280 bash bench/hip/ab_bench.sh > $O/decode.log 2>&1
cat $O/decode/ab-table.md || tail -30 $O/decode.log
grep -E "us  x|forward" $O/decode/profile-*.log
tar czf "$OUT/call2.tgz" -C $O .
