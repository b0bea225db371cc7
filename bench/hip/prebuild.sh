#!/bin/bash
# Builds the HIP plugin for NVIDIA (sm_90a) and the core library from a
# source tree on this machine, so that a device call can time it without
# building there (about 100 s of each call): needs nvcc (the same CUDA 13
# as the lent machine's: cudart is linked statically) but no GPU. The plugin
# is found next to libmoeint4.so, so DIR can be carried as it is and named
# in ab_bench.sh as a variant "name=lib:DIR".
#   bash bench/hip/prebuild.sh <source tree> <DIR>
set -euo pipefail
# shellcheck source=bench/hip/nvidia_build.sh
. "$(dirname "$0")/nvidia_build.sh"
src=$1 out=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
configure_nvidia "$src" "$work" -DMOEINT4_BUILD_TESTS=OFF > "$work/configure.log"
ninja -C "$work" moeint4-hip moeint4 > "$work/build.log"
mkdir -p "$out"
cp -L "$work"/lib/libmoeint4*.so* "$out"/ # plain files: carried folders may drop links
git -C "$src" rev-parse --short HEAD > "$out/COMMIT" 2>/dev/null || echo "(not a git tree)" > "$out/COMMIT"
ls -la "$out"
