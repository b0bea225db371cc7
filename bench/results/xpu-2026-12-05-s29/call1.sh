#!/bin/bash
# Prepared in session 29 (no device was lent that session; not run yet).
# Carry ["build-xpudeps", "build-packx29"] (prepare.sh). On NVIDIA's OpenCL:
# the XPU tests (with 8cd95ac's tighter bound on the w2 rows GEMV), then the
# rows GEMVs' two opt-in switches that have passed their tests on a GPU
# (s28) but were never timed there: MI4_ROWS_EARLY=1 (a work-item's first
# batch of weights in flight while its work-group stages the activations)
# and MI4_ROWS_CHAINS=2 (a piece's codes in two FMA chains), alone, together
# and with MI4_ROWS_XBLOCK=8192 (s28: Mixtral's w2 4.4-5.0% faster on an
# H100), between two runs of the default kernels (X=1, X=2).
tar xJf build-packx29/xpu.tar.xz
OUT=$OUT COMMIT=8cd95ac BUILT_AT=/work/main VARIANTS="X=1;\
MOEINT4_XPU_BUILD_OPTIONS=-DMI4_ROWS_EARLY=1;\
MOEINT4_XPU_BUILD_OPTIONS=-DMI4_ROWS_CHAINS=2;\
MOEINT4_XPU_BUILD_OPTIONS=-DMI4_ROWS_EARLY=1 -DMI4_ROWS_CHAINS=2;\
MOEINT4_XPU_BUILD_OPTIONS=-DMI4_ROWS_XBLOCK=8192;\
MOEINT4_XPU_BUILD_OPTIONS=-DMI4_ROWS_EARLY=1 -DMI4_ROWS_XBLOCK=8192;\
X=2" bash bench/xpu/h200_run.sh
