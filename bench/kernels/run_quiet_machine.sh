#!/bin/sh
# Everything the CPU backend's numbers come from, on 2 cores of a quieter
# machine (taskset), for when the development VM is shared: kernel GB/s and
# GFLOP/s, the forward pass per M, and `moeint4 bench` (built standalone).
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
if [ -x "$out/moeint4" ]; then
  run "$out/moeint4" bench --preset qwen3-30b-a3b --tokens 1,8,64,512 --threads 2 \
    --json "$out/bench_qwen.json"
  for f in gptq-asym awq; do
    run "$out/moeint4" bench --preset qwen3-30b-a3b --format $f --tokens 1 --threads 2
  done
  run "$out/moeint4" bench --preset mixtral-8x7b --tokens 1,8 --threads 2 --iters 7 \
    --json "$out/bench_mixtral.json"
else
  echo "no OpenBLAS: moeint4 bench skipped" | tee -a "$log"
fi
for f in asym awq; do BENCH_FORMAT=$f run "$out/bench_cpu_forward" qwen 1 2 7; done
run "$out/bench_cpu_forward" mixtral 1,8 2 5
