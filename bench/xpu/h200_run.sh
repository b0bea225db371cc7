#!/bin/bash
# One call on the lent H200: the XPU backend's OpenCL runtime on NVIDIA's
# OpenCL driver (MOEINT4_XPU_TEST_ANY_GPU=1). The build is made on the
# Debian machine at /work/wt/xpu/build-x (see README.md beside this file) and
# travels with the tree; /work/wt/xpu is linked to the tree here so that the
# build's absolute paths (RPATH, ctest files, tests/data/vllm) hold.
# Writes log.txt, ctest.txt and the bench JSON under $OUT.
set -u
OUT=${OUT:-/tmp/xpu-out}
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LOG=$OUT/log.txt
exec > >(tee -a "$LOG") 2>&1
echo "== $(date -u +%FT%TZ) tree $ROOT commit ${COMMIT:-unknown}"
mkdir -p /work/wt && ln -sfn "$ROOT" /work/wt/xpu
mkdir -p /tmp/xpudeps && tar xJf "$ROOT/build-xpudeps/deps.tar.xz" -C /tmp/xpudeps
export LD_LIBRARY_PATH=/tmp/xpudeps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# NVIDIA's OpenCL driver is installed without an ICD file: name it in a vendors folder
lib=$(ldconfig -p | awk '/libnvidia-opencl\.so\.1 /{print $NF; exit}')
[ -n "$lib" ] || lib=$(find /usr/local/nvidia /usr/lib /usr/lib64 /lib /opt -name 'libnvidia-opencl.so.1*' 2>/dev/null | head -1)
echo "NVIDIA OpenCL driver: ${lib:-not found}"
mkdir -p /tmp/vendors && echo "$lib" > /tmp/vendors/nvidia.icd
export OCL_ICD_VENDORS=/tmp/vendors
export MOEINT4_XPU_TEST_ANY_GPU=1 MOEINT4_BACKEND_PATH=/work/wt/xpu/build-x/lib MOEINT4_COMMIT=${COMMIT:-unknown}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
CLI=/work/wt/xpu/build-x/bin/moeint4
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
  timeout 150 ctest --test-dir /work/wt/xpu/build-x --output-on-failure -j4 \
    -R '^test_xpu_(kernels|backend|conformance)$' > "$OUT/ctest.txt" 2>&1
  echo "ctest exit $?"; tail -15 "$OUT/ctest.txt"
fi

for preset in qwen3-30b-a3b mixtral-8x7b; do
  echo "== $preset: M = 1, device time per kernel (OpenCL profiling events)"
  MOEINT4_XPU_PROFILE=1 timeout 60 $CLI bench --backend xpu --preset $preset --tokens 1 --iters 30
  echo "== $preset: moeint4 bench --backend xpu"
  timeout 90 $CLI bench --backend xpu --preset $preset --tokens 1,8,64,512 --iters 10 \
    --json "$OUT/xpu-$preset.json"
done
echo "== done $(date -u +%FT%TZ)"
