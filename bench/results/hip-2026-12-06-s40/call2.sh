#!/bin/bash
# Session 40, call 2 (carry ["build-hipdeps", "build-packs39"]; h39 as in
# hip-2026-12-06-s39/call1.sh: main's library since 3f159e4).
# On the H200, where Mixtral int4 M = 16-64 sit at 1.68-2.10x of the floor
# (call 1): is the tile the rows-per-expert rule picks still the fastest
# there? qw32 took 5-24 rows an expert from q16 after H100 measurements
# (session 34); d8 serves up to 4. Forced with MOEINT4_HIP_TILE against the
# default, int4, both presets, M = 12-64, two rounds (and the routed
# decode's gemm13 with its token rows in the ring, M = 8-16); then the
# one-token decode's knobs (MOEINT4_HIP_DECODE_ITEM, _X) at M = 1.
O=$OUT/s40c2
. bench/hip/device_call.sh build-packs39 h39
hip env OUT=$O/tiles DEPS=build-hipdeps TOKENS=${TILE_TOKENS:-12,16,20,24,32,48,64} WEIGHTS=int4 \
  ROUNDS=2 VARIANTS="main=lib:build-h39/lib d8=@main q16=@main q32=@main qw64=@main xring=@main" \
  ENV_xring=MOEINT4_HIP_ROUTED_X=ring TOKENS_xring=8,12,16 ENV_d8=MOEINT4_HIP_TILE=d8 \
  ENV_q16=MOEINT4_HIP_TILE=q16 ENV_q32=MOEINT4_HIP_TILE=q32 \
  ENV_qw64=MOEINT4_HIP_TILE=qw64 PROFILE_POINTS="mixtral-8x7b:32 mixtral-8x7b:64" \
  timeout $(step_limit 100) bash bench/hip/ab_bench.sh > $O/tiles.log 2>&1
cat $O/tiles/ab-table.md || tail -20 $O/tiles.log
hip env OUT=$O/decode DEPS=build-hipdeps TOKENS=1 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-h39/lib item2=@main item4=@main staged=@main" \
  ENV_item2=MOEINT4_HIP_DECODE_ITEM=2 ENV_item4=MOEINT4_HIP_DECODE_ITEM=4 \
  ENV_staged=MOEINT4_HIP_DECODE_X=staged PROFILE_POINTS="qwen3-30b-a3b:1" \
  timeout $(step_limit 10) bash bench/hip/ab_bench.sh > $O/decode.log 2>&1
cat $O/decode/ab-table.md || tail -20 $O/decode.log
tar czf $OUT/call2.tgz -C $O .
