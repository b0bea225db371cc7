#!/bin/bash
# Device call 2 of 2026-12-03 (session 11): load-engine and ceiling streams,
# the HIP tests on the two-chunk step, and the A/B of the decode variants.
set -x
tar xJf build-packed/libs.tar.xz
nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/se bench/hip/stream_engines.cu && /tmp/se > "$OUT/stream_engines.txt" 2>&1
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
(cd build-nvt && ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > "$OUT/tests-s2.log" 2>&1
tail -5 "$OUT/tests-s2.log"
OUT=$OUT DEPS=build-hipdeps TOKENS=1,8 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="old=lib:build-main bc=lib:build-bc s2=lib:build-nvt/lib s2r4=@s2 s2g8=@s2" \
  ENV_s2r4="MOEINT4_HIP_DECODE_RING=4 MOEINT4_HIP_DECODE_RING2=6" ENV_s2g8="MOEINT4_HIP_DECODE_RING2=8" \
  PROFILE_POINTS="mixtral-8x7b:1 qwen3-30b-a3b:1 mixtral-8x7b:8" bash bench/hip/ab_bench.sh > "$OUT/ab.log" 2>&1
cat "$OUT/ab.log"
cat "$OUT"/profile-*.log
