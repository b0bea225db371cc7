#!/bin/bash
# Session 23, XPU call (carry ["build-xpudeps", "build-packx"]): the XPU
# backend of main (ddad702: the zero-point kernels and act-order, never run on
# a GPU before) on NVIDIA's OpenCL. build-packx/xpu.tar.xz holds build-xpu
# (Release, XPU on, made on the development machine at /work/main, *.o, *.a,
# checkpoints and the ahead-of-time Intel binaries left out).
tar xJf build-packx/xpu.tar.xz && ln -sfn build-xpu build-x
OUT=$OUT COMMIT=ddad702 BUILT_AT=/work/main bash bench/xpu/h200_run.sh
