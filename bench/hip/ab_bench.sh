#!/bin/bash
# A/B of HIP plugin builds on the lent GPU, in one call: builds each variant
# (a source tree plus at most one CMake flag) in its own directory at the same
# time, then times them interleaved (A B C C B A ...) with hip_bench.py
# (graph replay, L2 flushed) and hip_profile.py (per-kernel device times).
# Source trees other than "." are made beforehand, e.g. with
#   git archive <commit> | tar x -C .carry-base/src
# and carried; cmocka / OpenBLAS / pkg-config come from $DEPS as in
# h200_run.sh.
#   OUT=/tmp/out VARIANTS="base=.carry-base/src new=. new4=.:-DCMAKE_CUDA_FLAGS=-DX=4" \
#   TOKENS=1,8 ROUNDS=2 TESTS='^(test_hip_forward_int4|hip_conformance_int4)$' \
#   bash bench/hip/ab_bench.sh
# TESTS (optional) runs those ctest entries on every variant but the first.
# A variant "name=@other" reuses other's build with the environment in
# $ENV_name (e.g. ENV_ring6="MOEINT4_HIP_DECODE_RING=6" with ring6=@base):
# a run-time knob timed against its own build in the same rounds. A variant
# "name=lib:DIR" times a build made elsewhere (bench/hip/prebuild.sh: DIR
# holds libmoeint4.so and its plugin), without building here; no tests.
# WEIGHTS_name (e.g. WEIGHTS_main=bf16,int4) times other weights modes for
# one variant than $WEIGHTS: the BF16 mode once, next to int4 variants;
# TOKENS_name other batch sizes than $TOKENS (e.g. the BF16 mode at two sizes only).
# PRESETS: the layers timed (hip_bench.py --presets; default both).
set -u
OUT=${OUT:-$PWD/out-ab}
DEPS=${DEPS:-build-hipdeps}
TOKENS=${TOKENS:-1,8}
ROUNDS=${ROUNDS:-2}
WEIGHTS=${WEIGHTS:-int4}
PRESETS=${PRESETS:-qwen3-30b-a3b,mixtral-8x7b}
PROFILE_POINTS=${PROFILE_POINTS:-mixtral-8x7b:1 qwen3-30b-a3b:1}
mkdir -p "$OUT"
# shellcheck source=bench/hip/nvidia_build.sh
. "$(dirname "$0")/nvidia_build.sh"
use_hip_deps "$DEPS"

names=()
build() { # name source flags
  local b=/tmp/ab-$1 targets=(moeint4-hip moeint4)
  [ -n "${TESTS:-}" ] && targets+=(test_hip_dequant test_hip_forward test_hip_memory test_hip_route test_hip_graph
    test_hip_weights test_conformance)
  { configure_nvidia "$2" "$b" -DMOEINT4_BUILD_TESTS=ON ${3:+"$3"} &&
    ninja -C "$b" -j6 "${targets[@]}"; } > "$OUT/build-$1.log" 2>&1
  echo "build $1 ($2 ${3:-}): exit $?"
}
lib_of() { # name -> the libmoeint4.so its runs load
  local spec
  for v in $VARIANTS; do
    [ "${v%%=*}" = "$1" ] && spec=${v#*=}
  done
  case $spec in
  @*) lib_of "${spec#@}" ;;
  lib:*) echo "$(realpath "${spec#lib:}")/libmoeint4.so" ;;
  *) echo "/tmp/ab-$1/lib/libmoeint4.so" ;;
  esac
}
per_variant() { # PREFIX name [default] -> $PREFIX_name, else default
  local var="$1_$2"
  echo "${!var:-${3:-}}"
}
for v in $VARIANTS; do
  name=${v%%=*} spec=${v#*=}
  names+=("$name")
  [[ $spec == @* || $spec == lib:* ]] && continue
  build "$name" "${spec%%:*}" "$([[ $spec == *:* ]] && echo "${spec#*:}")" &
done
wait

order=("${names[@]}")
# each run's whole log is kept; the error lines also show why a variant timed nothing
for ((r = 0; r < ROUNDS; r++)); do
  for name in "${order[@]}"; do
    # shellcheck disable=SC2046 # ENV_name: one VAR=value a word
    env $(per_variant ENV "$name") PYTHONUNBUFFERED=1 python3 bench/hip/hip_bench.py --lib "$(lib_of "$name")" \
      --json "$OUT/$name-round$r.json" --commit "$name" --no-baselines --graph --weights "$(per_variant WEIGHTS "$name" "$WEIGHTS")" \
      --tokens "$(per_variant TOKENS "$name" "$TOKENS")" --presets "$PRESETS" 2>&1 |
      tee "$OUT/$name-round$r.log" | grep -E " graph |Error" | sed "s/^/[$name] /"
  done
  mapfile -t order < <(printf '%s\n' "${order[@]}" | tac) # next round reversed: drift cancels
done
python3 bench/hip/ab_table.py "$OUT" "${names[@]}" | tee "$OUT/ab-table.md"
for name in "${names[@]}"; do
  echo "== per kernel: $name"
  # shellcheck disable=SC2086,SC2046 # PROFILE_POINTS, ENV_name: one argument a word
  env $(per_variant ENV "$name") PYTHONUNBUFFERED=1 python3 bench/hip/hip_profile.py --lib "$(lib_of "$name")" $PROFILE_POINTS 2>&1 |
    grep -E "us  x[0-9]|^[a-z0-9-]+:[0-9]+:" > "$OUT/profile-$name.log" # x2: kernels launched twice (the expansion)
  head -24 "$OUT/profile-$name.log"
done
if [ -n "${TESTS:-}" ]; then
  for name in "${names[@]:1}"; do
    [ -d "/tmp/ab-$name" ] || continue # a knob on another variant's build
    (cd "/tmp/ab-$name" && ctest -V --timeout 600 -R "$TESTS") > "$OUT/tests-$name.log" 2>&1
    echo "tests $name: exit $?"; grep -E "tests passed|Failed|\*\*\*" "$OUT/tests-$name.log" | tail -3
  done
fi
