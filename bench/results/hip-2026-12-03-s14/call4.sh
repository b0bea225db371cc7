#!/bin/bash
# Device call 4 of 2026-12-03 (session 14): (1) why the BF16 wgmma GEMM
# leaves its tensor pipe idle: ncu's stall reasons per issued instruction
# (raw metrics) for Mixtral M = 4096 in the BF16 mode (gemm13, gemm2), on
# HEAD's kernels (build-main: 1496782's libraries, the same wgmma code);
# (2) int4 at M = 4096 without the expansion: the int4 grouped GEMM's q128
# and q64 tiles forced (MOEINT4_HIP_TILE) against the default (expansion
# to BF16 + the BF16 wgmma GEMM) and the BF16 mode, Qwen3 and Mixtral.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o4
MOEINT4_HIP_WEIGHTS=bf16 timeout 200 ncu --clock-control none --kernel-name regex:wgmma_gemm \
  --launch-skip 4 --launch-count 2 \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__cycles_elapsed.avg,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum' \
  python3 bench/hip/hip_profile.py --plain --lib build-main/libmoeint4.so mixtral-8x7b:4096 \
  > /tmp/o4/ncu-stalls-mixtral4096-bf16.txt 2>&1
grep -E "stalled|gmma|inst_executed|cycles_elapsed|wgmma_gemm" /tmp/o4/ncu-stalls-mixtral4096-bf16.txt | head -60
export ENV_q128=MOEINT4_HIP_TILE=q128 ENV_q64=MOEINT4_HIP_TILE=q64 WEIGHTS_bf=bf16
OUT=/tmp/o4 DEPS=build-hipdeps TOKENS=4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main q128=@main q64=@main bf=@main" \
  PROFILE_POINTS="qwen3-30b-a3b:4096:q128" \
  timeout 300 bash bench/hip/ab_bench.sh > /tmp/o4/ab.log 2>&1
cat /tmp/o4/ab-table.md
tar czf "$OUT/call4.tgz" -C /tmp/o4 .
