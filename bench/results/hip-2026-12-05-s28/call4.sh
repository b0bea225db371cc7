#!/bin/bash
# Prepared in session 28 (not run: its device time ran out): the ring lag of
# every warp-specialized int4 tile, two ways. Call 3's q256 lag 4 (main: 3)
# made q256's gemm13 12-16% slower, and the BF16 warp-specialized GEMM had
# measured lag 1 best (hip_wgmma_ws.hip); call 2's samples had q256's
# consumers starving and qw32's producer and consumers waiting on each
# other. lagA: q256 2, qw128 2, qw64 4, qw32 3; lagB: q256 1, qw128 1,
# qw64 2, qw32 2 (main: 3, 3, 6, 4). Each M point runs one tile:
# Mixtral 64 qw32, 256 qw64, 512 qw128, 1024 q256, 4096 the expansion
# (control); Qwen3 64 q8/q16 (control), 512 qw64 (32 rows), 1024 qw64,
# 2048 qw128, 4096 q256. Carry ["build-hipdeps", "build-packs28"] (packs
# m27: main at 469a469, whose device code equals main's since; lagA / lagB:
# configure_nvidia . build-lagX -DMOEINT4_BUILD_TESTS=ON
# "-DCMAKE_CUDA_FLAGS=<the macros above>" at 3f3866b).
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
for p in m27 lagA lagB; do tar xJf build-packs28/$p.tar.xz; done
O=$OUT/s28c4; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt 2>&1; cat $O/gpu.txt
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=64,256,512,1024,2048,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-m27/lib lagA=lib:build-lagA/lib lagB=lib:build-lagB/lib" \
  PROFILE_POINTS="mixtral-8x7b:64 mixtral-8x7b:256 qwen3-30b-a3b:4096" timeout 400 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x|forward" $O/ab/profile-*.log
for v in lagA lagB; do
  hip bash -c "cd build-$v && timeout 70 ctest --timeout 65 -j3 -R '^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4)$' --output-on-failure" > $O/tests-$v.log 2>&1
  echo "$v:"; grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests-$v.log | tail -4
done
