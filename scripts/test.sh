#!/usr/bin/env bash
# Builds everything CI builds (core, CPU backend, XPU plugin, the HIP plugin
# for AMD targets as a compile check) from scratch and runs every test, then
# the reliability runs (ASan+UBSan, valgrind, libFuzzer, TSan).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
python3 scripts/check_layers.py   # include rules and loops (docs/ARCHITECTURE.md), before building
build_dir=${MOEINT4_TEST_BUILD_DIR:-build-test}
rm -rf "$build_dir"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOEINT4_WERROR=ON \
  -DMOEINT4_XPU=ON -DMOEINT4_HIP=ON -DMOEINT4_HIP_PLATFORM=amd
cmake --build "$build_dir"
ctest --test-dir "$build_dir" --output-on-failure -j2 --timeout 1500
bash scripts/reliability.sh
