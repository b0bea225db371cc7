#!/bin/bash
# Session 35, call 5 (carry ["build-hipdeps", "build-packs35"]; any card):
# per-kernel device times (CUPTI, hip_profile.py) of the BF16 mode at
# Mixtral and Qwen3 M = 1024 and 4096, 6b7e5a5 (build-ac) against the BF16
# warp-specialized GEMM arriving as its copies land (build-bw), twice in
# alternating order: which of call 4's GEMMs gained and which lost.
O=$OUT/s35c5
. bench/hip/device_call.sh build-packs35 ac bw
for r in 1 2; do
  for v in ac bw; do
    echo "== $v round $r"
    hip env MOEINT4_HIP_WEIGHTS=bf16 PYTHONUNBUFFERED=1 timeout 100 python3 bench/hip/hip_profile.py \
      --lib build-$v/lib/libmoeint4.so mixtral-8x7b:1024 mixtral-8x7b:4096 qwen3-30b-a3b:1024 qwen3-30b-a3b:4096
  done
done > $O/profile.log 2>&1
grep -E "^==|forward|wgmma|gemm" $O/profile.log | cut -c1-110
tar czf $OUT/call5.tgz -C $O .
