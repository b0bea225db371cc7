#!/usr/bin/env bash
# Runs the CPU bench set and writes bench/results/cpu-<date>-<commit>.json
# and .md (plus cpu-<date>-<commit>-qwen3.png): Qwen3-30B-A3B GPTQ sym at
# M = 1, 8, 64, 512; Mixtral-8x7B at M = 1 and 8; every format at M = 1;
# Qwen3 with F16 activations at M = 64 and 512;
# then Qwen3 M = 1 and 8 again with the library's idle workers kept spinning
# (decode steady state, appended to the page). About 2 minutes on a quiet
# 2-core machine (plus up to QUIET_WAIT per run on a busy one).
# Env: BUILD_DIR (default build-bench), ITERS (default 15), THREADS (default all),
# BASELINE_CORETYPE (OpenBLAS kernels of the baseline; default: the widest the CPU has),
# RESULTS_DIR (default bench/results),
# QUIET_WAIT (seconds to wait, before each run, for the CPUs to be less than
# 10% busy with other work; default 300; the run starts anyway after that).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
iters=${ITERS:-15}
threads_arg=()
if [ -n "${THREADS:-}" ]; then threads_arg=(--threads "$THREADS"); fi

# Configure every time: the commit recorded is fixed at configure time.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOEINT4_BUILD_TESTS=OFF \
  >/dev/null
ninja -C "$build" moeint4_cli >/dev/null
cli="$build/bin/moeint4"

# The baseline should be OpenBLAS at its best: its kernels for this CPU's
# widest vectors. OpenBLAS falls back to pre-AVX2 (Prescott) kernels on CPU
# models missing from its table, and an environment may force older ones
# (the development VM sets OPENBLAS_CORETYPE=Haswell; its AVX-512 Cooperlake
# kernels ran sgemm 1.5-2x faster there). BASELINE_CORETYPE overrides.
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { case " $flags " in *" $1 "*) return 0 ;; esac; return 1; }
best=
if has avx512_bf16 && has avx512f; then best=Cooperlake
elif has avx512f && has avx512bw && has avx512vl && has avx512dq; then best=SkylakeX
elif has avx2 && has fma; then best=Haswell
fi
coretype=${BASELINE_CORETYPE:-$best}
if [ -n "$coretype" ] && [ "${OPENBLAS_CORETYPE:-}" != "$coretype" ]; then
  echo "run_cpu.sh: OpenBLAS kernels for the baseline: OPENBLAS_CORETYPE=$coretype (was '${OPENBLAS_CORETYPE:-unset}')" >&2
  export OPENBLAS_CORETYPE=$coretype
fi
coretype_note=${OPENBLAS_CORETYPE:+OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE }

date=$(date -u +%Y-%m-%d)
commit=$(git -C "$root" rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
name=cpu-$date-$commit
results=${RESULTS_DIR:-$root/bench/results}
mkdir -p "$results"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# Percent of CPU time spent busy over one second (all cores, from /proc/stat).
busy_percent() {
  local a b
  read -r -a a < <(grep '^cpu ' /proc/stat)
  sleep 1
  read -r -a b < <(grep '^cpu ' /proc/stat)
  local total=0 idle i
  for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
  idle=$((b[4] - a[4] + b[5] - a[5]))
  echo $(( total > 0 ? 100 * (total - idle) / total : 0 ))
}

wait_for_quiet() {
  local waited=0 busy
  busy=$(busy_percent)
  while [ "$busy" -ge 10 ] && [ "$waited" -lt "${QUIET_WAIT:-300}" ]; do
    sleep 4
    waited=$((waited + 5))
    busy=$(busy_percent)
  done
  echo "run_cpu.sh: CPUs ${busy}% busy with other work before this run (waited ${waited} s)" >&2
}

runs=(
  "--preset qwen3-30b-a3b --format gptq-sym --tokens 1,8,64,512"
  "--preset mixtral-8x7b --format gptq-sym --tokens 1,8"
  "--preset qwen3-30b-a3b --format gptq-asym --tokens 1"
  "--preset qwen3-30b-a3b --format awq --tokens 1"
  "--preset qwen3-30b-a3b --format gptq-sym --tokens 64,512 --dtype f16"
)
report_args=()
failed=0
for i in "${!runs[@]}"; do
  read -r -a args <<<"${runs[$i]}"
  extra=()
  if [ "$i" -eq 0 ]; then extra=(--plot "$results/$name-qwen3.png"); fi
  command="${coretype_note}moeint4 bench ${runs[$i]} --backend cpu --iters $iters ${threads_arg[*]:-}"
  echo "== $command" >&2
  wait_for_quiet
  if ! "$cli" bench "${args[@]}" --backend cpu --iters "$iters" "${threads_arg[@]}" \
       --json "$scratch/$i.json" "${extra[@]}"; then
    failed=1
    echo "run_cpu.sh: this run failed (see above); its records are kept if written" >&2
  fi
  if [ -s "$scratch/$i.json" ]; then report_args+=("$command" "$scratch/$i.json"); fi
done

# Say whether the library measured is exactly the commit named in the records.
dirty=$(git -C "$root" status --porcelain --untracked-files=normal -- src include 2>/dev/null | wc -l)
if [ "$dirty" -eq 0 ]; then
  tree_note="src/ and include/ identical to the commit measured"
else
  tree_note="$dirty uncommitted change(s) under src/ or include/ were built in (others' work in progress)"
fi
export REPORT_NOTES="source tree: $tree_note
made by bench/run_cpu.sh (ITERS=$iters${OPENBLAS_CORETYPE:+, OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE})"
/usr/bin/python3 "$root/bench/cpu_report.py" "$results/$name.json" "$results/$name.md" \
  "${report_args[@]}"

# Decode steady state: the timed forwards above each follow a cache flush of
# several milliseconds, long enough for the library's idle worker to fall
# asleep (it spins 2 ms, MOEINT4_CPU_IDLE_MS), so each pays a wake-up (50-150
# us on the development VM). In a decode step the MoE layers follow each
# other faster than that; kept spinning, the worker is running when the
# forward starts. The CLI's own table, appended to the page.
steady="qwen3-30b-a3b gptq-sym, M = 1 and 8"
steady_run="--preset qwen3-30b-a3b --format gptq-sym --tokens 1,8"
steady_command="MOEINT4_CPU_IDLE_MS=100 ${coretype_note}moeint4 bench $steady_run --backend cpu --iters $iters ${threads_arg[*]:-}"
echo "== $steady_command" >&2
wait_for_quiet
load=$(cut -d' ' -f1 /proc/loadavg)
read -r -a args <<<"$steady_run"
if MOEINT4_CPU_IDLE_MS=100 "$cli" bench "${args[@]}" --backend cpu --iters "$iters" \
     "${threads_arg[@]}" >"$scratch/steady.txt"; then
  {
    echo
    echo "## Decode steady state: $steady, workers kept spinning"
    echo
    echo "The runs above flush the caches before every timed forward, for several"
    echo "milliseconds: the library's idle worker falls asleep meanwhile and each forward"
    echo "pays its wake-up. In decode the MoE layers follow each other faster; with"
    echo "MOEINT4_CPU_IDLE_MS=100 the worker is running when the forward starts. Load"
    echo "average $load when it began. Command:"
    echo
    echo "    $steady_command"
    echo
    echo '```'
    cat "$scratch/steady.txt"
    echo '```'
  } >>"$results/$name.md"
else
  failed=1
  echo "run_cpu.sh: the steady-state run failed" >&2
fi
echo "wrote $results/$name.json and .md" >&2
exit "$failed"
