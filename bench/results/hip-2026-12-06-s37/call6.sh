#!/bin/bash
# Prepared in session 37 for a later session, not run (carry ["build-hipdeps",
# "build-packs38"]; any card). Where does the routed decode's SM time go?
# Timing probes of branch probes38 (ea476c4, hip-2026-12-06-s37/probes38.diff;
# wrong results): px takes the MMAs' token inputs from registers (no shared
# loads of x), pd gives the MMAs the code words undecoded (no
# dequantization), pxd both; main = build-h37 (04af97c). Mixtral int4 M = 8
# and 16 (the d8 tile), two rounds, per-kernel profiles at M = 8; on cards
# other than an H200 also with the grids sized for 66 SMs, where the SMs
# bound the kernel as on the H200 (MOEINT4_HIP_MULTIPROCESSORS=66).
O=$OUT/s37c6
. bench/hip/device_call.sh build-packs38 h37 px pd pxd
v="main=lib:build-h37/lib px=lib:build-px/lib pd=lib:build-pd/lib pxd=lib:build-pxd/lib"
sixty=()
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  v="$v main66=@main px66=@px pd66=@pd pxd66=@pxd"
  for n in main px pd pxd; do sixty+=("ENV_${n}66=MOEINT4_HIP_MULTIPROCESSORS=66"); done
fi
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=8,16 WEIGHTS=int4 ROUNDS=2 PRESETS=mixtral-8x7b \
  "${sixty[@]}" VARIANTS="$v" PROFILE_POINTS="mixtral-8x7b:8" timeout 420 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
for f in $O/ab/profile-*.log; do echo "== $f"; sed -n 2,5p "$f"; done 2>/dev/null
tar czf $OUT/call6.tgz -C $O .
