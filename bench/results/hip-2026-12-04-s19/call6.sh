#!/bin/bash
# Session 19, call 6 (carry ["build-hipdeps", "build-packed"]): the README's
# table from the session's final kernels (701484d, built with its tests as
# build-nvt): both weights modes, M = 1 .. 4096 and the qw64 points (Mixtral
# M = 256, Qwen3 M = 1024), two rounds, and per-kernel times.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o6; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
OUT=$O/ab DEPS=build-hipdeps TOKENS=1,8,64,256,512,1024,4096 WEIGHTS=bf16,int4 ROUNDS=2 \
  VARIANTS="new=lib:build-nvt/lib" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:512 mixtral-8x7b:256 qwen3-30b-a3b:1024" \
  timeout 300 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x|forward" $O/ab/profile-*.log | head -40
tar czf "$OUT/call6.tgz" -C $O .
