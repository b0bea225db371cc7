#!/bin/bash
# Session 38, call 2 (carry ["build-hipdeps", "build-packs38"];
# build-packs38/sm_placement: bench/hip/sm_placement.cu built with nvcc 13,
# -O3 -arch=sm_90a). Where a grid sized for half the SMs lands (what
# MOEINT4_HIP_MULTIPROCESSORS=66 did in sessions 36-38), on any card; then on
# an H200 call 1's H200 part (the README's table at main's head, every HIP
# entry) in the time left (CALL_LIMIT seconds in all, default 575).
mkdir -p $OUT/s38c2
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/s38c2/gpu.txt
build-packs38/sm_placement | tee $OUT/s38c2/sm_placement.txt
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  LIMIT=$(( ${CALL_LIMIT:-575} - SECONDS )) bash bench/results/hip-2026-12-06-s38/call1.sh
fi
