# shellcheck shell=bash
# Sourced by the scripts that build the HIP plugin for NVIDIA (h200_run.sh,
# ab_bench.sh, prebuild.sh): one place for the carried dependencies and the
# CMake configuration they share.

# use_hip_deps DIR: unpacks DIR/deps.tar.xz (cmocka, OpenBLAS, pkg-config:
# the lent machine has none of them; bench/hip/README.md says how to make
# it) and puts it on the search paths. Nothing when DIR has no tarball.
use_hip_deps() {
  [ -f "$1/deps.tar.xz" ] || return 0
  mkdir -p /tmp/hipdeps && tar xJf "$1/deps.tar.xz" -C /tmp/hipdeps
  export PATH=/tmp/hipdeps/bin:$PATH PKG_CONFIG_PATH=/tmp/hipdeps/pkgconfig
  export LD_LIBRARY_PATH=/tmp/hipdeps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} CPATH=/tmp/hipdeps/include
}

# configure_nvidia SOURCE BUILD [CMAKE ARGS...]: the HIP plugin for NVIDIA
# with nvcc ($NVCC, else the one on PATH, else /usr/local/cuda's).
configure_nvidia() {
  local src=$1 build=$2
  shift 2
  cmake -S "$src" -B "$build" -G Ninja -DMOEINT4_HIP=ON -DMOEINT4_HIP_PLATFORM=nvidia \
    -DCMAKE_CUDA_COMPILER="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}" "$@"
}
