#!/bin/sh
# Builds the CPU kernel and forward micro-benchmarks (and, with OpenBLAS, the
# moeint4 command with the library linked in) without CMake or cmocka, for a
# machine with only a C compiler:
#   ./bench/kernels/build_standalone.sh OUTPUT_DIR [extra cc flags]
# Links OpenBLAS when pkg-config finds it, else leaves the sgemm part out.
set -e
out=${1:-.}
shift || true
cc=${CC:-cc}
tmp=$(mktemp -d)
flags="-O3 -std=c11 -D_GNU_SOURCE -DMOEINT4_HAVE_X86_KERNELS=1 -DMOEINT4_BUILDING_LIBRARY -Iinclude -Isrc -Itools/synth $*"
$cc $flags -mavx2 -mfma -mf16c -c src/backends/cpu/cpu_kernels_avx2.c -o "$tmp/avx2.o"
$cc $flags -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c \
  -c src/backends/cpu/cpu_kernels_avx512.c -o "$tmp/avx512.o"
$cc $flags -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512bf16 -mavx512vbmi2 -mfma -mf16c \
  -c src/backends/cpu/cpu_kernels_avx512bf16.c -o "$tmp/avx512bf16.o"
$cc $flags -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512bf16 -mfma -mf16c \
  -c src/backends/cpu/cpu_kernels_avx512bf16_novbmi2.c -o "$tmp/avx512bf16_novbmi2.o"
$cc $flags -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512bf16 -mavx512vbmi2 -mamx-tile \
  -mamx-bf16 -mfma -mf16c -c src/backends/cpu/cpu_kernels_amx.c -o "$tmp/amx.o"
simd="$tmp/avx2.o $tmp/avx512.o $tmp/avx512bf16.o $tmp/avx512bf16_novbmi2.o $tmp/amx.o"
if pkg-config --exists openblas 2>/dev/null; then
  blas_c=$(pkg-config --cflags openblas); blas_l=$(pkg-config --libs openblas)
else
  blas_c=-DMI4_BENCH_NO_BLAS; blas_l=
fi
$cc $flags $blas_c bench/kernels/bench_cpu_kernels.c src/layout/cpu_repack.c \
  src/backends/cpu/cpu_kernels_scalar.c src/backends/cpu/cpu_features.c $simd -o "$out/bench_cpu_kernels" $blas_l -lpthread -lm
forward_sources=$(ls src/base/*.c src/layout/*.c src/backends/cpu/*.c tools/synth/*.c | grep -v '_avx\|_amx')
$cc $flags -DMOEINT4_VECTORS_DIR=\"/nonexistent\" bench/kernels/bench_cpu_forward.c \
  $forward_sources $simd -o "$out/bench_cpu_forward" -lpthread -lm
if [ -n "$blas_l" ]; then
  # the checkpoint reader parses JSON with cJSON (libcjson-dev)
  cli_sources=$(ls tools/*.c src/base/*.c src/layout/*.c src/registry/*.c src/checkpoint/*.c src/core/*.c \
    src/backends/cpu/*.c tools/synth/*.c | grep -v '_avx\|_amx')
  $cc $flags $blas_c $(pkg-config --cflags libcjson) -Itools -DMOEINT4_PLUGIN_SUFFIX=\".so\" \
    -DMOEINT4_GIT_COMMIT=\"standalone\" -DMOEINT4_VECTORS_DIR=\"/nonexistent\" $cli_sources $simd \
    -o "$out/moeint4" $blas_l $(pkg-config --libs libcjson) -ldl -lpthread -lm
fi
rm -rf "$tmp"
