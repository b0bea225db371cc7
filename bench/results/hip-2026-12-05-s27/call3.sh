#!/bin/bash
# Session 27, call 3 (carry ["build-hipdeps", "build-packs27"]): gemm13
# without zero points in 64 registers, four blocks an SM (build-b4:
# hip-decode-meta with -DMI4_DECODE13_NOZP_BLOCKS=4): its decode entries,
# then against hip-decode-meta (three blocks) and main d92c348 (base); b4w
# forces gemm13's four-block items.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
for t in build-packs27/meta build-packs27/base build-packs27/b4; do tar xJf $t.tar.xz; done
O=/tmp/s27c3; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
hip bash -c 'cd build-b4 && timeout 150 ctest --timeout 140 -j3 -R "^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4)$" --output-on-failure' > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -6
hip env OUT=$O/decode DEPS=build-hipdeps TOKENS=1,2,4,8 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="base=lib:build-base meta=lib:build-meta/lib b4=lib:build-b4/lib b4w=@b4" \
  ENV_b4w=MOEINT4_HIP_DECODE_ITEM=4 \
  PROFILE_POINTS="mixtral-8x7b:1 qwen3-30b-a3b:1" timeout 280 bash bench/hip/ab_bench.sh > $O/decode.log 2>&1
cat $O/decode/ab-table.md || tail -30 $O/decode.log
grep -E "us  x|forward" $O/decode/profile-*.log
tar czf "$OUT/call3.tgz" -C $O .
