#!/bin/bash
# Session 28, call 3: q256 with each producer thread's copies of 4 stages in
# flight before it signals (MI4_QW_LAG=4, 6 stages; main: 3). Call 2 found
# q256's consumers waiting for full stages in 24% of stall samples at Qwen3
# M = 4096. Carry ["build-hipdeps", "build-packs27", "build-packs28"]: pack
# lag4 (main's sources, configure_nvidia . build-lag4
# -DMOEINT4_BUILD_TESTS=ON -DCMAKE_CUDA_FLAGS=-DMI4_QW_LAG=4), m27 (main).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packs27/m27.tar.xz; tar xJf build-packs28/lag4.tar.xz
O=/tmp/s28c3; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
cat $O/gpu.txt
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
hip bash -c "cd build-lag4 && timeout 150 ctest --timeout 140 -j3 -R '^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4)$' --output-on-failure" > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -6
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=1024,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-m27/lib lag4=lib:build-lag4/lib" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:1024" timeout 240 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x|forward" $O/ab/profile-*.log
tar czf "$OUT/call3.tgz" -C $O .
