#!/bin/bash
# Session 29, call 2 (carry ["build-hipdeps", "build-packs28"]): the int4
# tests of call 1's three builds (lagA, lagB, rowptr).
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
for p in lagA lagB rowptr; do tar xJf build-packs28/$p.tar.xz; done
O=$OUT/s29c2; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt 2>&1; cat $O/gpu.txt
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
for v in lagA lagB rowptr; do
  hip bash -c "cd build-$v && timeout 150 ctest --timeout 140 -j4 -R '^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4|test_hip_weights)$' --output-on-failure" > $O/tests-$v.log 2>&1
  echo "$v:"; grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests-$v.log | tail -5
done
tar czf $OUT/call2.tgz -C $O .
