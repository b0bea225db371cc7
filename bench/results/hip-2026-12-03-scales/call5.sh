#!/bin/bash
# Device call 5 of 2026-12-03 (session 12): the routed decode's code-word
# shifts by 4, 8 and 12 as multiply-highs by kernel parameters (mulhi, the
# tests' build: FMA pipe instead of the busy ALU pipe) against 35dc0d7
# (head): the SASS op counts of the routed gemm13, the HIP tests on mulhi,
# the A/B at 8-64 tokens.
set -x
tar xJf build-packed/libs.tar.xz
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o5
for v in head:build-head mulhi:build-nvt/lib; do
  cuobjdump -sass "${v#*:}/libmoeint4-hip.so" |
    awk '/Function : /{p = /int4_routed_decodeILb1ELb0E/} p' > /tmp/o5/sass-${v%%:*}.txt
  echo "${v%%:*}: $(grep -c 'IMAD.HI' /tmp/o5/sass-${v%%:*}.txt) IMAD.HI, $(grep -c 'SHF.R' /tmp/o5/sass-${v%%:*}.txt) SHF.R, $(grep -c 'LOP3' /tmp/o5/sass-${v%%:*}.txt) LOP3" | tee -a /tmp/o5/sass-counts.txt
done
(cd build-nvt && ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o5/tests-mulhi.log 2>&1
tail -4 /tmp/o5/tests-mulhi.log
OUT=/tmp/o5 DEPS=build-hipdeps TOKENS=8,16,32,64 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="head=lib:build-head mulhi=lib:build-nvt/lib" \
  PROFILE_POINTS="mixtral-8x7b:8 qwen3-30b-a3b:64" \
  bash bench/hip/ab_bench.sh > /tmp/o5/ab.log 2>&1
grep graph /tmp/o5/ab.log
grep -h "us  x1\|forward" /tmp/o5/profile-*.log
gzip -9 /tmp/o5/sass-*.txt # (committed: sass-counts.txt unzipped again)
tar czf "$OUT/call5.tgz" -C /tmp/o5 .
