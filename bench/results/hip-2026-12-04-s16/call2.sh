#!/bin/bash
# Device call 2 of session 16 (2026-12-04): session 15's prepared TMA call
# (../hip-2026-12-04-s15/next-call-tma.sh), run. The warp-specialized BF16
# wgmma GEMM with its weight rows loaded by TMA (ws-tma-weights.diff applied
# to the working tree; opt-in MOEINT4_HIP_WGMMA_TMA=1). build-main = HEAD
# e64847a's libraries (gemm2 warp-specialized, gemm13 the old kernel);
# build-nvt = the tests' tree with the diff. First the BF16 forward test
# with TMA on both GEMMs (a hang stops the call), then every HIP test with
# it, then the A/B: main, new (diff, TMA off: must match main), tma (TMA on
# gemm2), tmaws (TMA + warp-specialized on both GEMMs), int4 M = 4096
# (n4 = new, t4 = tma). If time is left: ncu of gemm13 at Mixtral M = 4096,
# BF16 mode, the old kernel against the TMA warp-specialized one.
# Call 1 built build-nvt from a stale /tmp/snap (session 15's copy, the
# kernel without TMA), so its TMA rows timed nothing new; this call is the
# same with the tree checked first.
set -x
grep -aq 'CUtensorMap_st' build-nvt/lib/libmoeint4-hip.so || { echo "build-nvt is not the TMA tree"; exit 3; }
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o2; mkdir -p $O
(cd build-nvt && MOEINT4_HIP_WGMMA_TMA=1 MOEINT4_HIP_WGMMA_PIPE=ws timeout 60 ctest -R '^test_hip_forward_bf16$' --output-on-failure) > $O/smoke.log 2>&1
smoke=$?
tail -5 $O/smoke.log
if [ $smoke -eq 0 ]; then
  (cd build-nvt && MOEINT4_HIP_WGMMA_TMA=1 MOEINT4_HIP_WGMMA_PIPE=ws timeout 150 ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > $O/tests-tma.log 2>&1
  tail -5 $O/tests-tma.log
  export ENV_tma="MOEINT4_HIP_WGMMA_TMA=1" ENV_tmaws="MOEINT4_HIP_WGMMA_TMA=1 MOEINT4_HIP_WGMMA_PIPE=ws"
  export WEIGHTS_n4=int4 TOKENS_n4=4096 WEIGHTS_t4=int4 TOKENS_t4=4096 ENV_t4="MOEINT4_HIP_WGMMA_TMA=1"
  OUT=$O DEPS=build-hipdeps TOKENS=64,512,4096 WEIGHTS=bf16 ROUNDS=2 \
    VARIANTS="main=lib:build-main new=lib:build-nvt/lib tma=@new tmaws=@new n4=@new t4=@new" \
    PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:4096" \
    timeout 300 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
  cat $O/ab-table.md
fi
echo "elapsed before ncu: $SECONDS s"
if [ $SECONDS -lt 470 ]; then
  S="SpeedOfLight ComputeWorkloadAnalysis MemoryWorkloadAnalysis SchedulerStats WarpStateStats Occupancy LaunchStats"
  MOEINT4_HIP_WEIGHTS=bf16 MOEINT4_HIP_WGMMA_TMA=1 MOEINT4_HIP_WGMMA_PIPE=ws OUT=$O/ncu-tmaws LIB=build-nvt/lib/libmoeint4.so POINT=mixtral-8x7b:4096 KERNEL=wgmma_gemm_ws COUNT=1 SKIP=4 SECTIONS="$S" timeout 50 bash bench/hip/ncu_point.sh
fi
tar czf "$OUT/call2.tgz" -C $O .
