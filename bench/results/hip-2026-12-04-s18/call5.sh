#!/bin/bash
# Device call 5 of session 18 (2026-12-04): register-A q256 with call 4's
# changes (shared-memory A tiles dropped: slower in calls 2 and 4), a
# tile's first scales loaded before the epilogue of the tile before it,
# setmaxnreg 104 / 200. build-nvt = the tests' tree, build-rs = call 4's
# register-A build, build-main = main 38d5bf4. Tests first (q256 forced
# over the int4 tile tests, and over the int4 conformance matrix), then
# the A/B at M = 512 and 4096, then q256 forced against main's default
# where it might take over from q128 (64-255 rows an expert), then ncu
# source counters of both q256 GEMMs at Qwen3 M = 4096.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o5; mkdir -p $O
(cd build-nvt && timeout 100 ctest --timeout 90 -R '^(test_hip_forward_int4|test_hip_graph_int4)$' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -4
(cd build-nvt && MOEINT4_HIP_TILE=q256 timeout 60 ctest --timeout 55 -R '^hip_conformance_int4$' --output-on-failure) > $O/tests-conf-q256.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-conf-q256.log | tail -3
OUT=$O/ab1 DEPS=build-hipdeps TOKENS=512,4096 WEIGHTS=int4 ROUNDS=2 WEIGHTS_main=bf16,int4 \
  VARIANTS="main=lib:build-main rs4=lib:build-rs new=lib:build-nvt/lib" \
  ENV_rs4="MOEINT4_HIP_TILE=q256" ENV_new="MOEINT4_HIP_TILE=q256" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:4096 mixtral-8x7b:512" \
  timeout 170 bash bench/hip/ab_bench.sh > $O/ab1.log 2>&1
cat $O/ab1/ab-table.md || tail -20 $O/ab1.log
grep -E "int4_ws|expand|wgmma" $O/ab1/profile-*.log | head -40
OUT=$O/ab2 DEPS=build-hipdeps TOKENS=256,1024,2048 WEIGHTS=int4 ROUNDS=1 \
  VARIANTS="main=lib:build-main new=lib:build-nvt/lib" ENV_new="MOEINT4_HIP_TILE=q256" \
  PROFILE_POINTS="qwen3-30b-a3b:2048" \
  timeout 120 bash bench/hip/ab_bench.sh > $O/ab2.log 2>&1
cat $O/ab2/ab-table.md || tail -20 $O/ab2.log
MOEINT4_HIP_TILE=q256 timeout 100 ncu --clock-control none --kernel-name regex:int4_ws_gemm --launch-skip 20 --launch-count 2 \
  --section SourceCounters --section WarpStateStats --section SchedulerStats --section SpeedOfLight -o $O/q256-new \
  python3 bench/hip/hip_profile.py --plain --lib build-nvt/lib/libmoeint4.so qwen3-30b-a3b:4096 > $O/ncu-new.log 2>&1
echo "ncu: exit $?"
ncu -i $O/q256-new.ncu-rep --page details > $O/details-new.txt 2>&1
ncu -i $O/q256-new.ncu-rep --page source --csv --print-source sass > $O/source-new.csv 2>&1
grep -E "Duration|Issued Warp|Eligible Warps" $O/details-new.txt | head -8
rm -f $O/*.ncu-rep
tar czf "$OUT/call5.tgz" -C $O .
