#!/bin/bash
# The Python binding on the lent H200: builds libmoeint4.so and the HIP plugin
# (nvcc, sm_90), then runs every Python test (torch ones included: CUDA tensors,
# the caller's stream, the HIP backend) and the example on the auto-selected
# backend. Logs go to $OUT. Needs build-hipdeps/ carried (OpenBLAS, pkg-config;
# see bench/hip/h200_run.sh).
#   OUT=/tmp/out tests/python/h200_torch.sh
set -u
OUT=${OUT:-$PWD/out-h200}
BUILD=${BUILD:-build-h200-python}
DEPS=${DEPS:-build-hipdeps}
mkdir -p "$OUT"
if [ -f "$DEPS/deps.tar.xz" ]; then
  mkdir -p /tmp/hipdeps && tar xJf "$DEPS/deps.tar.xz" -C /tmp/hipdeps
  export PATH=/tmp/hipdeps/bin:$PATH PKG_CONFIG_PATH=/tmp/hipdeps/pkgconfig
  export LD_LIBRARY_PATH=/tmp/hipdeps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import sys, numpy, torch; print(sys.version.split()[0], "numpy", numpy.__version__, "torch", torch.__version__, "cuda", torch.cuda.is_available())'
} > "$OUT/python-env.txt" 2>&1
{ cmake -S . -B "$BUILD" -G Ninja -DMOEINT4_HIP=ON -DMOEINT4_HIP_PLATFORM=nvidia \
    -DMOEINT4_BUILD_TESTS=OFF -DMOEINT4_BUILD_CLI=OFF \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" &&
  ninja -k 0 -C "$BUILD" moeint4 moeint4-hip; } > "$OUT/python-build.log" 2>&1
echo "build: exit $?"
export MOEINT4_LIBRARY=$PWD/$BUILD/lib/libmoeint4.so PYTHONDONTWRITEBYTECODE=1
python3 -m pytest tests/python -v -rs -p no:cacheprovider -s 2>&1 | tee "$OUT/python-tests.log" | tail -25
python3 examples/python/moe_layer.py --tokens 256 --experts 64 --hidden 2048 --intermediate 768 \
  2>&1 | tee "$OUT/python-example.log" | tail -4
