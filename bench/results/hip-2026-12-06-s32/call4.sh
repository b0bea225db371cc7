#!/bin/bash
# Session 32, call 4 (carry ["build-hipdeps", "build-packs32"]): the batch
# sizes below 64 that the README's table leaves out (M = 2, 4, 16, 32), so
# that issue 15's "every M <= 64 within 1.6x of the int4 floor" (Mixtral) and
# "faster than the BF16 mode at every M <= 512" are checked at every power
# of two, both weights modes, two rounds, same build of main as calls 1-3.
O=$OUT/s32c4
. bench/hip/device_call.sh build-packs32 main32
hip env OUT=$O/table DEPS=build-hipdeps TOKENS=2,4,16,32,128 WEIGHTS=bf16,int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main32/lib" PROFILE_POINTS="mixtral-8x7b:8 mixtral-8x7b:16" \
  timeout 300 bash bench/hip/ab_bench.sh > $O/table.log 2>&1
cat $O/table/ab-table.md || tail -20 $O/table.log
grep -hE "us  x1 |forward" $O/table/profile-*.log | head -30
tar czf $OUT/call4.tgz -C $O .
