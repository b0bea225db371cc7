#!/bin/bash
# Session 33, call 3 (carry ["build-hipdeps", "build-packs33"], kind
# nvidia-h200): main (b4043a8; HIP code of 5f048fe) built for NVIDIA
# (build-n). Session 32's call 4 on an H200: M = 2, 4, 16, 32, 128 in both
# weights modes, two rounds, graph replay, L2 flushed, so that issue 15's
# "every M <= 64 within 1.6x of the int4 floor" (Mixtral) and "faster than the
# BF16 mode at every M <= 512" are checked at every power of two on the card
# the targets name; then the forward and graph tests on that card.
O=$OUT/s33c3
. bench/hip/device_call.sh build-packs33 main33
hip env OUT=$O/table DEPS=build-hipdeps TOKENS=2,4,16,32,128 WEIGHTS=bf16,int4 ROUNDS=2 \
  VARIANTS="main=lib:build-n/lib" PROFILE_POINTS="mixtral-8x7b:8 mixtral-8x7b:16" \
  timeout 320 bash bench/hip/ab_bench.sh > $O/table.log 2>&1
cat $O/table/ab-table.md || tail -20 $O/table.log
grep -h "copy .* GB/s" $O/table.log | head -2
grep -hE "us  x1 |forward" $O/table/profile-*.log | head -30
tar czf $OUT/call3.tgz -C $O .
