#!/bin/bash
# Session 25, call 3 (carry ["build-hipdeps", "build-packn", "build-packm"]):
# the merged main (split scales + qw32's warp-specialized gemm13, build-m25)
# as one tree: every HIP entry but the memory ones, then an A/B against
# 4f763da (build-new) where the two changes run. Not run yet: no machine
# could be started after call 2. build-packm/m25.tar.xz (main at dbd0416's
# HIP sources) is made on the development machine by
#   . bench/hip/nvidia_build.sh && configure_nvidia . build-m25 \
#     -DMOEINT4_BUILD_TESTS=ON -DMOEINT4_PYTHON=/usr/bin/python3 && ninja -C build-m25
# (3 minutes on 2 cores), then packed as hip-2026-12-05-s24/prepare.sh's
# pack() does; build-packn and build-hipdeps are session 24's.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
for t in build-packn/new build-packm/m25; do tar xJf $t.tar.xz; done
O=/tmp/s25c3; mkdir -p $O
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
(cd build-m25 && timeout 200 ctest --timeout 190 -j4 -R '^(test_hip_|hip_conformance_)' -E memory \
  --output-on-failure) > $O/tests-m25.log 2>&1
grep -E "tests passed|\*\*\*|Failed" $O/tests-m25.log | tail -14
OUT=$O/ab DEPS=build-hipdeps TOKENS=64,1024,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="old=lib:build-new/lib m25=lib:build-m25/lib" \
  timeout 150 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
tar czf "$OUT/call3.tgz" -C $O .
