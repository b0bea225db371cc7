#!/bin/bash
# Device call 2 of 2026-12-03 (session 14): ncu of the BF16 wgmma GEMM (the
# prefill tile of both modes at M = 4096; HEAD's libraries, 271bb81, the
# tests' build carried as build-nvt) in the BF16 mode, Mixtral and Qwen3,
# gemm13 and gemm2, to see what bounds it (L2, issue, tensor pipe); then
# the XPU rows GEMVs at M = 1 with teams of 16 and 32 work-items a row
# (whole-warp rows: 512 contiguous bytes a load) and deeper batches, and
# their loads alone (build-x: 271bb81, XPU on, HIP off).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o2
for p in mixtral-8x7b:4096 qwen3-30b-a3b:4096; do
  MOEINT4_HIP_WEIGHTS=bf16 OUT=/tmp/o2 LIB=build-nvt/lib/libmoeint4.so POINT=$p KERNEL=wgmma_gemm SKIP=4 \
    SECTIONS="SpeedOfLight ComputeWorkloadAnalysis MemoryWorkloadAnalysis SchedulerStats WarpStateStats Occupancy LaunchStats InstructionStats" \
    timeout 150 bash bench/hip/ncu_point.sh
done
tar czf "$OUT/call2-ncu.tgz" -C /tmp/o2 .
P=MOEINT4_XPU_BUILD_OPTIONS
OUT=/tmp/o2x COMMIT=271bb81 SKIP_TESTS=1 VARIANTS="X=1;MOEINT4_XPU_GEMM_TEAM=16;MOEINT4_XPU_GEMM_TEAM=32;MOEINT4_XPU_GEMM_TEAM=32,$P=-DMI4_ROWS_AHEAD=8;MOEINT4_XPU_GEMM_TEAM=32,MOEINT4_XPU_GEMV_ROWS=16;MOEINT4_XPU_GEMM_TEAM=32,$P=-DMI4_ROWS_STREAM_PROBE=1;$P=-DMI4_ROWS_STREAM_PROBE=1;X=2" \
  timeout 280 bash bench/xpu/h200_run.sh > /dev/null 2>&1
tar czf "$OUT/call2-xpu.tgz" -C /tmp/o2x .
