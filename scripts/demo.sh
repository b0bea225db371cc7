#!/usr/bin/env bash
# Builds libmoeint4 and runs the main job on the auto-selected backend:
# `moeint4 info` (backends, availability, the oracle's choice) then
# `moeint4 run` on the default preset (Qwen3-30B-A3B layer, GPTQ symmetric).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOEINT4_XPU=ON
cmake --build build
build/bin/moeint4 info
build/bin/moeint4 run "$@"
