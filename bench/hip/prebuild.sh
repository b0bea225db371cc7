#!/bin/bash
# Builds the HIP plugin for NVIDIA (sm_90a) and the core library from a
# source tree on this machine, so that a device call can time it without
# building there (about 100 s of each call): needs nvcc (the same CUDA 13
# as the lent machine's: cudart is linked statically) but no GPU. The plugin
# is found next to libmoeint4.so, so DIR can be carried as it is and named
# in ab_bench.sh as a variant "name=lib:DIR".
#   bash bench/hip/prebuild.sh <source tree> <DIR>
set -euo pipefail
src=$1 out=$2
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake -S "$src" -B "$work" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOEINT4_HIP=ON \
  -DMOEINT4_HIP_PLATFORM=nvidia -DMOEINT4_BUILD_TESTS=OFF -DCMAKE_CUDA_COMPILER="$nvcc" > "$work/configure.log"
ninja -C "$work" moeint4-hip moeint4 > "$work/build.log"
mkdir -p "$out"
cp -L "$work"/lib/libmoeint4*.so* "$out"/ # plain files: carried folders may drop links
git -C "$src" rev-parse --short HEAD > "$out/COMMIT" 2>/dev/null || echo "(not a git tree)" > "$out/COMMIT"
ls -la "$out"
