#!/bin/sh
# Everything the CPU backend's numbers come from, on 2 cores of a quieter
# machine (taskset), for when the development VM is shared: kernel GB/s and
# GFLOP/s, the forward pass per M, and `moeint4 bench` when CMake is there.
# Output goes to OUTPUT_DIR/log.txt as it runs (partial results survive).
#   ./bench/kernels/run_quiet_machine.sh OUTPUT_DIR [cores, default 0,1]
out=${1:-.}
cores=${2:-0,1}
log="$out/log.txt"
lscpu | grep -E "Model name|^CPU\(s\)|L2|L3" | tee -a "$log"
./bench/kernels/build_standalone.sh "$out" || exit 1
run() { echo "== $*" | tee -a "$log"; taskset -c "$cores" "$@" 2>&1 | tee -a "$log"; }
run "$out/bench_cpu_kernels"
run "$out/bench_cpu_forward" qwen 1,8,64,512 2 7
if command -v cmake >/dev/null && command -v ninja >/dev/null && pkg-config --exists openblas; then
  cmake -S . -B "$out/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOEINT4_BUILD_TESTS=OFF \
    >"$out/cmake.log" 2>&1 && ninja -C "$out/build" moeint4_cli >"$out/ninja.log" 2>&1 &&
  run "$out/build/bin/moeint4" bench --preset qwen3-30b-a3b --tokens 1,8,64,512 --threads 2 \
    --json "$out/bench_qwen.json"
else
  echo "no cmake/ninja/openblas: moeint4 bench skipped" | tee -a "$log"
fi
for f in asym awq; do BENCH_FORMAT=$f run "$out/bench_cpu_forward" qwen 1 2 7; done
run "$out/bench_cpu_forward" mixtral 1,8 2 5
