#!/bin/bash
# Session 28, call 2: ncu's source page (per SASS instruction: executed
# count, warp-stall samples by reason) of main's kernels where issue 15's
# targets are missed: qw32's gemm13 at Mixtral M = 64, the direct decode
# kernels at Qwen3 M = 1, q256's gemm13 at Qwen3 M = 4096. Carry
# ["build-hipdeps", "build-packs27"] (pack m27: main at 469a469).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packs27/m27.tar.xz
O=/tmp/s28c2; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
cat $O/gpu.txt; ncu --version | tail -1
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
S="SourceCounters WarpStateStats SchedulerStats InstructionStats LaunchStats"
hip env OUT=$O LIB=build-m27/lib/libmoeint4.so POINT=mixtral-8x7b:64 KERNEL=int4_ws_gemm COUNT=1 SASS=1 \
  SECTIONS="$S" timeout 150 bash bench/hip/ncu_point.sh > $O/ncu-m64.log 2>&1
tail -5 $O/ncu-m64.log
tar czf "$OUT/call2.tgz" -C $O --exclude='*.ncu-rep' .
hip env OUT=$O LIB=build-m27/lib/libmoeint4.so POINT=qwen3-30b-a3b:1 KERNEL=int4_decode_gemm COUNT=2 SASS=1 \
  SECTIONS="$S" timeout 120 bash bench/hip/ncu_point.sh > $O/ncu-q1.log 2>&1
tail -5 $O/ncu-q1.log
tar czf "$OUT/call2.tgz" -C $O --exclude='*.ncu-rep' .
hip env OUT=$O LIB=build-m27/lib/libmoeint4.so POINT=qwen3-30b-a3b:4096 KERNEL=int4_ws_gemm COUNT=1 SASS=1 \
  SECTIONS="$S" timeout 180 bash bench/hip/ncu_point.sh > $O/ncu-q4096.log 2>&1
tail -5 $O/ncu-q4096.log
ls -la $O
tar czf "$OUT/call2.tgz" -C $O --exclude='*.ncu-rep' .
