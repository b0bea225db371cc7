#!/bin/bash
# One call on the lent H200: the XPU backend's OpenCL runtime on NVIDIA's
# OpenCL driver (MOEINT4_XPU_TEST_ANY_GPU=1). The build is made on the
# Debian machine at $BUILT_AT/build-x (default: this tree, whose path on the
# lent machine is the checkout's here, /work/main; see README.md beside this
# file) and travels with the tree; a $BUILT_AT elsewhere is linked to the
# tree here so that the build's absolute paths (RPATH, ctest files,
# tests/data/vllm) hold.
# Optional: BASELINE=DIR (a build's bin/ and lib/ of other kernels, carried
# under the tree: M = 1 per-kernel times of those first),
# VARIANTS="A=1,B=2;C=3" (M = 1 per-kernel times under each ';'-separated
# set of ','-separated environment settings, e.g. MOEINT4_XPU_GEMM_TEAM=8 or
# MOEINT4_XPU_BUILD_OPTIONS=-DMI4_AHEAD=8; with DIAG=1 also ptxas -v of each
# variant's GEMV kernels),
# NCU=1 (ncu's duration and DRAM bytes per GEMM kernel at M = 1; on
# 2026-12-01 ncu saw no kernel of NVIDIA's OpenCL), DIAG=1 (SM clocks during
# a 1000-forward Mixtral M = 1 run, and ptxas / cuobjdump of the PTX
# NVIDIA's OpenCL compiler made).
# Writes log.txt, ctest.txt and the bench JSON under $OUT.
set -u
OUT=${OUT:-/tmp/xpu-out}
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LOG=$OUT/log.txt
exec > >(tee -a "$LOG") 2>&1
echo "== $(date -u +%FT%TZ) tree $ROOT commit ${COMMIT:-unknown}"
BUILT_AT=${BUILT_AT:-$ROOT}
if [ "$(realpath -m "$BUILT_AT")" != "$(realpath "$ROOT")" ]; then
  mkdir -p "$(dirname "$BUILT_AT")" && ln -sfn "$ROOT" "$BUILT_AT"
fi
mkdir -p /tmp/xpudeps && tar xJf "$ROOT/build-xpudeps/deps.tar.xz" -C /tmp/xpudeps
export LD_LIBRARY_PATH=/tmp/xpudeps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# NVIDIA's OpenCL driver is installed without an ICD file: name it in a vendors folder
lib=$(ldconfig -p | awk '/libnvidia-opencl\.so\.1 /{print $NF; exit}')
[ -n "$lib" ] || lib=$(find /usr/local/nvidia /usr/lib /usr/lib64 /lib /opt -name 'libnvidia-opencl.so.1*' 2>/dev/null | head -1)
echo "NVIDIA OpenCL driver: ${lib:-not found}"
mkdir -p /tmp/vendors && echo "$lib" > /tmp/vendors/nvidia.icd
export OCL_ICD_VENDORS=/tmp/vendors
export MOEINT4_XPU_TEST_ANY_GPU=1 MOEINT4_BACKEND_PATH=$BUILT_AT/build-x/lib MOEINT4_COMMIT=${COMMIT:-unknown}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
CLI=$BUILT_AT/build-x/bin/moeint4
$CLI info --backend xpu 2>&1 | head -30

echo "== copy bandwidth (torch, 2 GiB device-to-device, bytes read + written)"
python3 - <<'PY'
import torch
n = 1 << 31
a = torch.empty(n, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
torch.cuda.synchronize(); s.record()
for _ in range(10): b.copy_(a)
e.record(); torch.cuda.synchronize()
ms = s.elapsed_time(e) / 10
print(f"copy_bandwidth_GBps {2 * n / ms / 1e6:.0f} (one copy {ms:.3f} ms)")
PY

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "== XPU tests on the H200 (OpenCL runtime, NVIDIA driver)"
  # the three of every call, then the walking GEMVs and codes in place
  timeout 300 ctest --test-dir "$BUILT_AT/build-x" --output-on-failure -j8 \
    -R '^test_xpu_(kernels|backend|conformance)(_gemv_walk|_gemv_lanes|_gemv_rows|_gemv_staged|_variant_(nibbles|lanes_late|rows_pipeline_ahead2|rows_bits_scales|rows_early|rows_early_chains2|rows_xblock8192|x_global|split_columns4|lockstep2_ahead2|preload|preload_nibbles_piece_major_ahead2))?$' \
    > "$OUT/ctest.txt" 2>&1
  echo "ctest exit $?"; tail -15 "$OUT/ctest.txt"
fi

for preset in qwen3-30b-a3b mixtral-8x7b; do
  echo "== $preset: M = 1, device time per kernel (OpenCL profiling events)"
  MOEINT4_XPU_PROFILE=1 timeout 60 "$CLI" bench --backend xpu --preset $preset --tokens 1 --iters 30
  echo "== $preset: moeint4 bench --backend xpu"
  timeout 90 "$CLI" bench --backend xpu --preset $preset --tokens 1,8,64,512 --iters 10 \
    --json "$OUT/xpu-$preset.json"
  # the zero-point kernels (AWQ) at one token, per kernel, next to the above
  echo "== $preset AWQ: M = 1, device time per kernel"
  MOEINT4_XPU_PROFILE=1 timeout 60 "$CLI" bench --backend xpu --preset $preset --format awq \
    --tokens 1 --iters 30 --json "$OUT/xpu-$preset-awq-m1.json"
done
if [ "${DIAG:-0}" = 1 ]; then
  echo "== mixtral-8x7b: M = 1, 1000 forwards, SM clock sampled every 50 ms (nvidia-smi, $OUT/clocks.txt)"
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,utilization.gpu,power.draw \
    --format=csv,noheader -lms 50 > "$OUT/clocks.txt" 2>&1 &
  smi=$!
  MOEINT4_XPU_PROFILE=1 MOEINT4_XPU_DUMP_PROGRAM="$OUT/program.ptx" timeout 60 "$CLI" bench \
    --backend xpu --preset mixtral-8x7b --tokens 1 --iters 1000 2>&1 | grep -E 'xpu profile|^ +1 '
  kill "$smi"
  echo "SM clock samples (MHz) while the GPU was busy (utilization > 0):"
  awk -F', ' '$4 + 0 > 0 {print $2}' "$OUT/clocks.txt" | sort -n | uniq -c | tail -12
  if [ -s "$OUT/program.ptx" ] && command -v ptxas > /dev/null; then
    echo "== ptxas -v of the kernels NVIDIA's OpenCL compiled (registers, spills, local memory)"
    tr -d '\000' < "$OUT/program.ptx" > "$OUT/program.clean.ptx" # the driver's binary ends in NULs
    ptxas -arch=sm_90 -v "$OUT/program.clean.ptx" -o "$OUT/program.cubin" 2>&1 |
      grep -A2 -E "mi4_(w13|w2|route)" | head -40
    cuobjdump -sass "$OUT/program.cubin" > "$OUT/program.sass" 2>&1
    echo "SASS lines (all kernels): $(grep -c . "$OUT/program.sass")"
  fi
fi
profile() { # label cli backend_path extra-env...
  local label=$1 cli=$2 path=$3; shift 3
  for preset in qwen3-30b-a3b mixtral-8x7b; do
    echo "== $preset: M = 1, $label: device time per kernel (OpenCL profiling events)"
    env "$@" MOEINT4_BACKEND_PATH="$path" MOEINT4_XPU_PROFILE=1 timeout 60 "$cli" bench \
      --backend xpu --preset $preset --tokens 1 --iters 30 2>&1 | grep -E 'xpu profile|^ +1 '
  done
}
if [ -n "${BASELINE:-}" ]; then
  profile "baseline kernels ($BASELINE)" "$ROOT/$BASELINE/bin/moeint4" "$ROOT/$BASELINE/lib" X=1
fi
registers() { # label index extra-env...: ptxas -v of the GEMV kernels of a variant's build
  local label=$1 n=$2; shift 2
  local ptx="$OUT/variant-$n.ptx"
  env "$@" MOEINT4_XPU_DUMP_PROGRAM="$ptx" timeout 60 "$CLI" bench --backend xpu \
    --preset qwen3-30b-a3b --tokens 1 --iters 1 > /dev/null 2>&1
  [ -s "$ptx" ] && command -v ptxas > /dev/null || return 0
  echo "== $label: ptxas -v (registers, spills) of the GEMVs ($ptx)"
  tr -d '\000' < "$ptx" > "$ptx.clean" && ptxas -arch=sm_90 -v "$ptx.clean" -o /dev/null 2>&1 |
    grep -A3 -E "entry function .mi4_(w13|w2)_gemv" | grep -E "Compiling|spill|registers" | head -16
}
IFS=';' read -r -a variants <<< "${VARIANTS:-}"
n=0
for variant in "${variants[@]}"; do
  variant="${variant#"${variant%%[![:space:]]*}"}" # the indent of a continued line
  IFS=',' read -r -a settings <<< "$variant"
  profile "$variant" "$CLI" "$BUILT_AT/build-x/lib" "${settings[@]}"
  n=$((n + 1))
  [ "${DIAG:-0}" = 1 ] && registers "$variant" $n "${settings[@]}"
done
if [ "${NCU:-0}" = 1 ] && command -v ncu > /dev/null; then
  for preset in qwen3-30b-a3b mixtral-8x7b; do
    echo "== $preset: M = 1, ncu (GEMM kernels)"
    timeout 60 ncu -k regex:mi4_w -c 4 --metrics \
      gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active \
      "$CLI" bench --backend xpu --preset $preset --tokens 1 --iters 1 2>&1 | grep -vE '^==PROF==|^moeint4 bench' | tail -40
  done
fi

echo "== done $(date -u +%FT%TZ)"
