#!/bin/bash
# Session 27, call 1 (carry ["build-hipdeps", "build-packs27"]): every HIP
# entry on d92c348 + decode.diff (the balanced decode grid, gemm2 in blocks
# of 16 warps where its grid fits the SMs once, the knobs
# MOEINT4_HIP_DECODE_BALANCE / _SM13 / _WARPS2), then the direct decode
# points against main d92c348 (base): new's defaults, gemm13 sized for 2
# blocks an SM beside 8-warp gemm2 blocks (sm2), two-block items (n2);
# then the README's table (both weights modes) on the new build.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
for t in build-packs27/s27 build-packs27/base; do tar xJf $t.tar.xz; done
O=/tmp/s27c1; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
hip bash -c 'cd build-s27 && timeout 200 ctest --timeout 190 -j3 -R "^(test_hip_|hip_conformance_)" -E memory --output-on-failure' > $O/tests.log 2>&1
hip bash -c 'cd build-s27 && timeout 60 ctest --timeout 50 -R "^test_hip_memory" --output-on-failure' > $O/tests-memory.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log $O/tests-memory.log | tail -12
hip env OUT=$O/decode DEPS=build-hipdeps TOKENS=1,2,4,8 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="base=lib:build-base new=lib:build-s27/lib sm2=@new n2=@new" \
  ENV_sm2="MOEINT4_HIP_DECODE_SM13=2 MOEINT4_HIP_DECODE_WARPS2=8" ENV_n2=MOEINT4_HIP_DECODE_ITEM=2 \
  PROFILE_POINTS="mixtral-8x7b:1 qwen3-30b-a3b:1" timeout 250 bash bench/hip/ab_bench.sh > $O/decode.log 2>&1
cat $O/decode/ab-table.md || tail -30 $O/decode.log
grep -E "us  x|forward" $O/decode/profile-*.log
hip env OUT=$O/table DEPS=build-hipdeps TOKENS=1,8,64,256,512,4096 WEIGHTS=bf16,int4 ROUNDS=2 \
  VARIANTS="new=lib:build-s27/lib" PROFILE_POINTS="mixtral-8x7b:64 mixtral-8x7b:512 qwen3-30b-a3b:4096" \
  timeout 170 bash bench/hip/ab_bench.sh > $O/table.log 2>&1
cat $O/table/ab-table.md || tail -20 $O/table.log
tar czf "$OUT/call1.tgz" -C $O .
