#!/bin/bash
# Session 28, call 4 (the session's last 242 s of device time): q256 with
# MI4_QW_LAG=2 (call 3's LAG=4 made q256's gemm13 12-16% slower). A/B first,
# then the tests. Carry ["build-hipdeps", "build-packs27", "build-packs28"]:
# pack lag2 (configure_nvidia . build-lag2 -DMOEINT4_BUILD_TESTS=ON
# -DCMAKE_CUDA_FLAGS=-DMI4_QW_LAG=2), m27 (main).
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packs27/m27.tar.xz; tar xJf build-packs28/lag2.tar.xz
O=$OUT/s28c4; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv > $O/gpu.txt 2>&1
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=1024,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-m27/lib lag2=lib:build-lag2/lib" \
  PROFILE_POINTS="qwen3-30b-a3b:4096" timeout 120 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x|forward" $O/ab/profile-*.log
hip bash -c "cd build-lag2 && timeout 60 ctest --timeout 55 -j3 -R '^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4)$' --output-on-failure" > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -6
