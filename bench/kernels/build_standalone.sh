#!/bin/sh
# Builds bench_cpu_kernels without CMake (for a machine with only a C
# compiler): ./bench/kernels/build_standalone.sh OUTPUT [extra cc flags]
# Links OpenBLAS when pkg-config finds it, else leaves the sgemm part out.
set -e
out=${1:-bench_cpu_kernels}
shift || true
cc=${CC:-cc}
tmp=$(mktemp -d)
flags="-O3 -std=c11 -D_GNU_SOURCE -DMOEINT4_HAVE_X86_KERNELS=1 -Iinclude -Isrc $*"
$cc $flags -mavx2 -mfma -mf16c -c src/backends/cpu/cpu_kernels_avx2.c -o "$tmp/avx2.o"
if pkg-config --exists openblas 2>/dev/null; then
  blas_c=$(pkg-config --cflags openblas); blas_l=$(pkg-config --libs openblas)
else
  blas_c=-DMI4_BENCH_NO_BLAS; blas_l=
fi
$cc $flags $blas_c bench/kernels/bench_cpu_kernels.c src/layout/cpu_repack.c \
  src/backends/cpu/cpu_kernels_scalar.c "$tmp/avx2.o" -o "$out" $blas_l -lpthread -lm
rm -rf "$tmp"
