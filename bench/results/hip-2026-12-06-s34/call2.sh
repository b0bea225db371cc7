#!/bin/bash
# Session 34, call 2 (carry ["build-hipdeps", "build-packs33", "build-packs34"],
# kind nvidia-h200): runs only on an H200 (exits at once on another card;
# call 1 ran the same A/B on an H100). (1) bench/hip/stream_pattern.cu at
# M = 8's bytes (Mixtral's 8 experts: 470 MB of w13, 235 MB of w2) with the
# blocks an SM forced to 2, 3, 4 and rings of 4, 6, 8: what the routed
# decode's access pattern and occupancy can stream on this card. (2) The
# routed decode's gemm2 with its input split over 4 (ks) and 8 (ks8) block
# runs against main (build-rule33: the ring), int4 at M = 3, 4, 8, 16, and
# session 33's call 9 (old = main before the tile rule, build-n, against
# main at M = 3, 4, both weights modes); two rounds, graph replay, L2
# flushed; per kernel at Mixtral M = 8.
O=$OUT/s34c2
. bench/hip/device_call.sh build-packs33 main33 final33
grep -q H200 $O/gpu.txt || { echo "not an H200: nothing run"; exit 0; }
. bench/hip/device_call.sh build-packs34 ks34
hip bash -c "nvcc -O3 -arch=sm_90a -o /tmp/stream_pattern bench/hip/stream_pattern.cu && timeout 150 /tmp/stream_pattern" > $O/stream_pattern.txt 2>&1
cat $O/stream_pattern.txt
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=3,4,8,16 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-rule33/lib ks=lib:build-ks/lib ks8=@ks old=lib:build-n/lib" \
  ENV_ks8="MOEINT4_HIP_ROUTED_KSPLITS=8" \
  TOKENS_old=3,4 WEIGHTS_old=int4,bf16 WEIGHTS_main=int4,bf16 \
  PROFILE_POINTS="mixtral-8x7b:8" \
  timeout 360 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -h "copy .* GB/s" $O/ab.log | head -2
for v in main ks ks8; do echo "== $v"; cat $O/ab/profile-$v.log; done
tar czf $OUT/call2.tgz -C $O .
