#!/bin/bash
# Session 35, call 7 (carry ["build-hipdeps", "build-packs34", "build-packs35"];
# kind nvidia-h200): only on an H200 (exits at once on another card). The
# session's landings (build-ss from final35.tar.xz: d330579's HIP sources,
# made as the page says) against main before them (build-ks from
# tr34.tar.xz) on the card issue 15
# names: both weights modes at M = 4096 (its int4 / BF16 and BF16 share of
# the dense rate targets), then int4 at Mixtral M = 20, 32, 48, 64 (qw32,
# also session 34's rule there), two rounds, graph replay, L2 flushed.
O=$OUT/s35c7
mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing run"; exit 0; }
. bench/hip/device_call.sh build-packs34 tr34
. bench/hip/device_call.sh build-packs35 final35
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=4096 WEIGHTS=int4,bf16 ROUNDS=2 \
  VARIANTS="main=lib:build-ks/lib new=lib:build-ss/lib" PROFILE_POINTS="qwen3-30b-a3b:4096" \
  timeout 260 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
hip env OUT=$O/ab2 DEPS=build-hipdeps TOKENS=20,32,48,64 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-ks/lib new=lib:build-ss/lib" PROFILE_POINTS="mixtral-8x7b:64" \
  timeout 200 bash bench/hip/ab_bench.sh > $O/ab2.log 2>&1
cat $O/ab2/ab-table.md || tail -20 $O/ab2.log
grep -h "copy .* GB/s" $O/ab.log | head -1
python3 - "$O"/ab/*-round*.json <<'PY'
import json, sys
for f in sys.argv[1:]:
    for r in json.load(open(f)):
        if r["weights"] == "bf16":
            print(f.split("/")[-1], r["preset"], "bf16 share of dense:",
                  round(100 * r["flops_per_forward"] / (r["graph_ms"] * 1e9) / r["dense_bf16_tflops"], 1), "%")
PY
tar czf $OUT/call7.tgz -C $O .
