#!/bin/bash
# Session 36, call 2 (carry ["build-hipdeps", "build-packs34", "build-packs36"];
# any card; call 1, build-hd's tests and timings alone, never got a machine
# and is part of this one). The routed decode (tile d8) with its zero
# points folded out of the dequantization (build-fd: the tree with the fold and the bench knob
# MOEINT4_HIP_MULTIPROCESSORS) against main's head with that knob only
# (build-kb), and the fold also in the ring rows (Mixtral's gemm2) by a
# second MMA of the zero points (build-fm: -DMI4_ROUTED_RING_FOLD=1). On an
# H100 the routed decode is bound by HBM (on the H200, by its SMs), so each
# build also runs on 66 of the SMs, where an SM's share of the bandwidth
# exceeds an H200's.
# 1. build-fd's int4 conformance, int4 graph and both forward entries (the
#    routed decode's tests, the knob's).
# 2. A/B int4 M = 8, 16 (d8), two rounds, graph replay, L2 flushed.
# 3. On an H200 only, while the call is young enough (SECONDS): main before
#    session 35 (build-ks) against main's head (build-hd) at M = 4096, both
#    weights modes, and int4 M = 1, 20-64.
O=$OUT/s36c2
. bench/hip/device_call.sh build-packs36 kb fd fm
hip bash -c 'cd build-fd && timeout 120 ctest --timeout 110 -j4 -R "^(test_hip_forward_|hip_conformance_int4|test_hip_graph_int4)" --output-on-failure' > $O/tests.log 2>&1
grep -hE "tests passed|\*\*\*|Failed|Total Test|FAILED|ERROR" $O/tests.log | tail -8
# SASS of the routed decode in each build: instructions a kernel, and the
# dequantization's and MMA's ops
for v in kb fd fm; do
  hip cuobjdump -sass build-$v/lib/libmoeint4-hip.so |
    awk '/Function : /{p = /int4_routed_decode/} p' > $O/sass-$v.txt
  for k in 'ILb1ELb0E' 'ILb1ELb1E' 'ILb0ELb0E' 'ILb0ELb1E'; do
    awk -v k=$k '/Function : /{p = index($0, k) > 0} p' $O/sass-$v.txt > /tmp/one.txt
    echo "$v $k: $(grep -cE '^ +/\*[0-9a-f]{4,}\*/' /tmp/one.txt) instr, $(grep -c HFMA2 /tmp/one.txt) HFMA2, $(grep -c LOP3 /tmp/one.txt) LOP3, $(grep -c HMMA /tmp/one.txt) HMMA, $(grep -c FFMA /tmp/one.txt) FFMA"
  done | tee -a $O/sass-counts.txt
  gzip -9 $O/sass-$v.txt
done
h200=0
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && h200=1
variants="main=lib:build-kb/lib fold=lib:build-fd/lib ring=lib:build-fm/lib"; limit=150
[ $h200 = 1 ] || { variants="main=lib:build-kb/lib fold=lib:build-fd/lib ring=lib:build-fm/lib
  main66=@main fold66=@fold ring66=@ring"; limit=180; }
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=8,16 WEIGHTS=int4 ROUNDS=2 \
  ENV_main66=MOEINT4_HIP_MULTIPROCESSORS=66 ENV_fold66=MOEINT4_HIP_MULTIPROCESSORS=66 \
  ENV_ring66=MOEINT4_HIP_MULTIPROCESSORS=66 \
  VARIANTS="$variants" PROFILE_POINTS="mixtral-8x7b:8" \
  timeout $limit bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
for v in main fold ring main66 fold66 ring66; do echo "== $v"; head -6 $O/ab/profile-$v.log 2>/dev/null; done
if [ $h200 = 1 ]; then
  . bench/hip/device_call.sh build-packs34 tr34
  . bench/hip/device_call.sh build-packs36 hd
  [ $SECONDS -lt 280 ] && hip env OUT=$O/ab4096 DEPS=build-hipdeps TOKENS=4096 WEIGHTS=int4,bf16 ROUNDS=2 \
    VARIANTS="main=lib:build-ks/lib head=lib:build-hd/lib" PROFILE_POINTS="qwen3-30b-a3b:4096" \
    timeout 170 bash bench/hip/ab_bench.sh > $O/ab4096.log 2>&1
  cat $O/ab4096/ab-table.md || tail -20 $O/ab4096.log
  [ $SECONDS -lt 330 ] && hip env OUT=$O/ab64 DEPS=build-hipdeps TOKENS=1,20,32,48,64 WEIGHTS=int4 ROUNDS=2 \
    VARIANTS="main=lib:build-ks/lib head=lib:build-hd/lib" PROFILE_POINTS="mixtral-8x7b:64" \
    timeout 120 bash bench/hip/ab_bench.sh > $O/ab64.log 2>&1
  cat $O/ab64/ab-table.md || tail -20 $O/ab64.log
fi
grep -h "copy .* GB/s" $O/ab.log | head -1
tar czf $OUT/call2.tgz -C $O .
