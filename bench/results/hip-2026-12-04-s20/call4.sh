#!/bin/bash
# Session 20, call 4 (carry ["build-hipdeps", "build-packed"]): run-time
# tile choices on 027e7ce's build (build-nvt, as in call 3), no new kernels:
# qw32 (q32's gemm13, the warp-specialized gemm2) where q16 serves
# (5-12 rows an expert: Mixtral M = 32, Qwen3 M = 128) and qw128 where qw64
# serves (Mixtral M = 256: 64 rows an expert), against the defaults.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/s20c4; mkdir -p $O
OUT=$O/ab DEPS=build-hipdeps TOKENS=32,128,256 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="new=lib:build-nvt/lib qw32=@new qw128=@new" \
  ENV_qw32="MOEINT4_HIP_TILE=qw32" ENV_qw128="MOEINT4_HIP_TILE=qw128" \
  TOKENS_qw32=32,128 TOKENS_qw128=256 \
  PROFILE_POINTS="mixtral-8x7b:32 qwen3-30b-a3b:128 mixtral-8x7b:256" \
  timeout 240 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x" $O/ab/profile-*.log | grep -E "gemm" | head -30
tar czf "$OUT/call4.tgz" -C $O .
