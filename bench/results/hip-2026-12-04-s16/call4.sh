#!/bin/bash
# Device call 4 of session 16 (2026-12-04): with the new default (7f968ec:
# TMA weight rows, warp-specialized wgmma for both GEMMs), which BF16 wgmma
# tile serves M = 512 .. 4096: the picked one (new) against w128 and w64
# forced (MOEINT4_HIP_TILE), BF16 mode, two rounds; int4 at M = 2048 on the
# default. build-nvt = the tests' tree of 7f968ec (call 3's).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
grep -aq 'CUtensorMap_st' build-nvt/lib/libmoeint4-hip.so || { echo "build-nvt is not the TMA tree"; exit 3; }
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o4; mkdir -p $O
export ENV_w128=MOEINT4_HIP_TILE=w128 ENV_w64=MOEINT4_HIP_TILE=w64 WEIGHTS_n4=int4 TOKENS_n4=2048
OUT=$O DEPS=build-hipdeps TOKENS=512,2048,4096 WEIGHTS=bf16 ROUNDS=2 \
  VARIANTS="new=lib:build-nvt/lib w128=@new w64=@new n4=@new" \
  PROFILE_POINTS="qwen3-30b-a3b:4096" \
  timeout 250 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab-table.md
tar czf "$OUT/call4.tgz" -C $O .
