#!/bin/bash
# Session 27, call 4 (carry ["build-hipdeps", "build-packs27"]): main at
# 469a469 (the decode without zero-point registers, hip_bench's read-bandwidth
# floor): every HIP entry, the memory entries, then the README's table in
# both weights modes.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packs27/m27.tar.xz
O=/tmp/s27c4; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
hip bash -c 'cd build-m27 && timeout 150 ctest --timeout 140 -j3 -R "^(test_hip_|hip_conformance_)" -E memory --output-on-failure' > $O/tests.log 2>&1
hip bash -c 'cd build-m27 && timeout 50 ctest --timeout 45 -R "^test_hip_memory" --output-on-failure' > $O/tests-memory.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log $O/tests-memory.log | tail -8
hip env OUT=$O/table DEPS=build-hipdeps TOKENS=1,8,64,256,512,4096 WEIGHTS=bf16,int4 ROUNDS=2 \
  VARIANTS="main=lib:build-m27/lib" PROFILE_POINTS="mixtral-8x7b:1 qwen3-30b-a3b:1" \
  timeout 170 bash bench/hip/ab_bench.sh > $O/table.log 2>&1
cat $O/table/ab-table.md || tail -20 $O/table.log
grep -h "copy .* GB/s" $O/table.log | head -2
tar czf "$OUT/call4.tgz" -C $O .
