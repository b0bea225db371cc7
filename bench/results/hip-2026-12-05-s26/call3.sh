#!/bin/bash
# Session 26, call 3 (carry ["build-hipdeps", "build-xpudeps", "build-packx",
# "build-packi", "build-packm"]): gemm13's item width at the direct decode
# points (M = 1, 2, 4, 8; Mixtral takes the direct GEMVs to M = 4, Qwen3 to
# 8): main d600039 (m25) against hip-decode-item's rule (item) and its two
# forced widths, then bench/xpu/h200_run.sh's bench (copy bandwidth,
# per-kernel M = 1 times, moeint4 bench --backend xpu), default kernels twice;
# last, q256 against the expansion for Qwen3 at 512 and 768 rows an expert
# (M = 8192, 12288; call 1 timed Mixtral's 512-896).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/wt-item
for t in build-packx/xpu build-packi/item build-packm/m25; do tar xJf $t.tar.xz; done
O=/tmp/s26c3; mkdir -p $O/xpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps &&
  OUT=$O/item DEPS=build-hipdeps TOKENS=1,2,4,8 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="m25=lib:build-m25/lib item=lib:build-item/lib narrow=@item wide=@item" \
  ENV_narrow=MOEINT4_HIP_DECODE_ITEM=2 ENV_wide=MOEINT4_HIP_DECODE_ITEM=4 \
  PROFILE_POINTS="mixtral-8x7b:1 qwen3-30b-a3b:1 qwen3-30b-a3b:8" timeout 200 bash bench/hip/ab_bench.sh ) > $O/item.log 2>&1
cat $O/item/ab-table.md || tail -30 $O/item.log
grep -E "us  x" $O/item/profile-*.log | grep -i gemm
OUT=$O/xpu COMMIT=$(cat build-x/COMMIT) SKIP_TESTS=1 VARIANTS="X=1;X=2" \
  timeout 200 bash bench/xpu/h200_run.sh > $O/xpu-stdout.txt 2>&1
grep -E "copy_bandwidth|== |xpu profile|^ +1 " $O/xpu-stdout.txt | head -60
mkdir -p $O/q256-qwen3
( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
  for r in 0 1; do for v in $([ $r = 0 ] && echo m25 q256 || echo q256 m25); do
    env $([ $v = q256 ] && echo MOEINT4_HIP_INT4_PREFILL=q256) timeout 60 python3 bench/hip/hip_bench.py \
      --lib build-m25/lib/libmoeint4.so --json $O/q256-qwen3/$v-round$r.json --commit $v --no-baselines \
      --graph --weights int4 --presets qwen3-30b-a3b --tokens 8192,12288 2>&1 | grep -E " graph " | sed "s/^/[$v] /"
  done; done ) > $O/q256-qwen3.log 2>&1
cat $O/q256-qwen3.log
tar czf "$OUT/call3.tgz" -C $O .
