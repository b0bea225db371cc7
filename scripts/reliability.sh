#!/usr/bin/env bash
# Reliability runs of CI, each in its own build folder:
#   asan      the whole ctest suite under ASan + UBSan (gcc, halt on the first
#             report, leak check on), fault injection compiled in (tests/faults)
#   valgrind  core, layout, cpu, conformance (small cases), bad-input, fuzz
#             corpora, concurrency and faults under valgrind memcheck
#             (--error-exitcode=1 --leak-check=full). No XPU tests: PoCL's
#             LLVM JIT under valgrind takes hours, so the XPU plugin is not
#             built there (its code runs under ASan instead). No HIP tests:
#             they need a GPU and skip anyway.
#   fuzz      every libFuzzer harness (clang, ASan + UBSan) for
#             RELIABILITY_FUZZ_SECONDS (default 60) each, two at a time;
#             any crash, sanitizer report, leak or timeout fails. Seeded
#             with RELIABILITY_FUZZ_SEED (default 1): a CI run makes the
#             same mutations every time, so a failure is a regression of the
#             code, not a new draw (a random draw once found a plugin
#             loader crash in CI); 0 = a random seed, for exploring
#   tsan      the concurrency test (and the core threads test) under
#             ThreadSanitizer
# Usage: scripts/reliability.sh [asan] [valgrind] [fuzz] [tsan]   (none = all)
# Prints the wall time of each part at the end (also in <prefix>-times.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
prefix=${RELIABILITY_BUILD_PREFIX:-build-rel}
fuzz_seconds=${RELIABILITY_FUZZ_SECONDS:-60}
fuzz_seed=${RELIABILITY_FUZZ_SEED:-1}
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(asan valgrind fuzz tsan)
supp=$root/cmake/sanitizers
times_file=$root/$prefix-times.txt
: > "$times_file"

# Sanitizer settings shared by every run: the first report ends the program
# with a failure; allocation failures return NULL (the library must answer
# OUT_OF_MEMORY, never crash), as in production.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:allocator_may_return_null=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp"

timed() { # name command...: runs the command, records its wall time
  local name=$1 start=$SECONDS
  shift
  echo "==== reliability: $name"
  "$@"
  printf '%-24s %5d s\n' "$name" $((SECONDS - start)) | tee -a "$times_file"
}

configure() { # build_dir cmake-args...
  local dir=$1
  shift
  rm -rf "$dir"
  cmake -S "$root" -B "$dir" -G Ninja -DMOEINT4_HIP=OFF "$@" > "$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; return 1; }
}

# Intel's compute runtime (intel-opencl-icd: its OpenCL ICD and its Level
# Zero GPU driver) dlopens libdxcore with RTLD_DEEPBIND while it looks for
# devices, and the sanitizer runtime aborts any process that does: every
# process probing the XPU backend would abort. Sanitizer runs keep it out:
# the OpenCL ICD loader sees only PoCL (OCL_ICD_VENDORS), the Level Zero
# loader no driver (ZE_ENABLE_ALT_DRIVERS names none), so the probe reports
# "no driver". Intel's driver is exercised by the ordinary ctest run.
keep_intel_runtime_out() {
  local vendors=$root/$prefix-opencl-vendors
  rm -rf "$vendors" && mkdir -p "$vendors"
  [ -f /etc/OpenCL/vendors/pocl.icd ] && cp /etc/OpenCL/vendors/pocl.icd "$vendors/"
  export OCL_ICD_VENDORS=$vendors ZE_ENABLE_ALT_DRIVERS=libmoeint4-no-level-zero-driver.so
}

run_asan() {
  local dir=$prefix-asan
  keep_intel_runtime_out
  timed asan-configure configure "$dir" -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMOEINT4_SANITIZE=address,undefined -DMOEINT4_FAULT_INJECTION=ON -DMOEINT4_XPU=ON \
    -DMOEINT4_XPU_AOT_TARGETS=tgllp
  timed asan-build cmake --build "$dir"
  # Three passes. (1) Everything of ours, leak check on. (2) Programs built
  # without ASan that load the ASan library (python, the install test's
  # consumer): its runtime preloaded, no leak check (the interpreter's and
  # cmake's own leaks are not ours; no quarantine either, which would look
  # like the growth the python lifetime test measures). (3) The XPU tests: no leak check, as
  # LeakSanitizer's stop-the-world crashes on PoCL's worker threads at exit;
  # the CPU-side tests cover the core's leaks. test_xpu_aot_binaries is left
  # to the ordinary run: its time is ocloc's (processes of Intel's, not
  # ours), 75 s a run. So are the kernel build variants
  # (test_xpu_kernels_variant_*): the host code they run is
  # test_xpu_kernels', only the OpenCL C differs, which ASan does not see.
  # For the same reason this build embeds ocloc binaries for one Intel
  # target (the ordinary build compiles all five; ocloc took 250-290 s for
  # them on 2 cores, 2026-12-02).
  local preload
  preload="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  local foreign='^(python.*|test_abi_install)$' xpu='^test_xpu_'
  timed asan-ctest ctest --test-dir "$dir" --output-on-failure -j2 --timeout 1800 \
    -E "^cli_bench\$|$foreign|$xpu"
  LD_PRELOAD=$preload ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0:quarantine_size_mb=0" \
    timed asan-ctest-preloaded ctest --test-dir "$dir" --output-on-failure -j2 \
    --timeout 1800 -R "$foreign"
  ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" timed asan-ctest-xpu ctest --test-dir "$dir" \
    --output-on-failure -j2 --timeout 1800 -R "$xpu" \
    -E '^(test_xpu_aot_binaries|test_xpu_kernels_variant_.*)$'
}

run_valgrind() {
  local dir=$prefix-valgrind
  command -v valgrind > /dev/null || { echo "valgrind missing (Debian: apt-get install valgrind)" >&2; return 1; }
  local memcheck="valgrind;--tool=memcheck;--error-exitcode=1;--leak-check=full"
  memcheck+=";--errors-for-leak-kinds=definite,indirect;--show-leak-kinds=definite,indirect"
  memcheck+=";--suppressions=$supp/valgrind.supp;--num-callers=30;--quiet"
  timed valgrind-configure configure "$dir" -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMOEINT4_FAULT_INJECTION=ON -DMOEINT4_XPU=OFF "-DCMAKE_CROSSCOMPILING_EMULATOR=$memcheck"
  timed valgrind-build cmake --build "$dir"
  # Every test that runs a program of ours directly goes through valgrind
  # (CMAKE_CROSSCOMPILING_EMULATOR); the CLI tests (cmake -P drivers) and
  # the bench are left to the other runs, and so is the plugin damage sweep
  # (8806 forked loads, each one far slower under valgrind).
  local not_here='^(cli_|hip_|test_hip_|python|test_abi_|core_plugin_damage$)'
  MOEINT4_CONFORMANCE_SKIP_LARGE=1 timed valgrind-ctest ctest --test-dir "$dir" \
    --output-on-failure -j2 --timeout 3000 -E "$not_here"
}

run_fuzz() {
  local dir=$prefix-fuzz out=$root/$prefix-fuzz-findings
  timed fuzz-configure configure "$dir" -DCMAKE_C_COMPILER=clang-15 \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOEINT4_WERROR=OFF -DMOEINT4_FUZZ=ON \
    -DMOEINT4_SANITIZE=address,undefined -DMOEINT4_XPU=OFF -DMOEINT4_BUILD_CLI=OFF
  timed fuzz-build cmake --build "$dir" --target fuzzers
  rm -rf "$out"
  mkdir -p "$out"
  local failed=0 pids=() names=()
  run_harness() { # libFuzzer writes new inputs to the first folder: a scratch copy
    local h=$1
    mkdir -p "$out/$h/work"
    "$dir/tests/fuzz/fuzz_$h" "$out/$h/work" "$root/tests/fuzz/corpus/$h" \
      -max_total_time="$fuzz_seconds" -seed="$fuzz_seed" -timeout=30 -rss_limit_mb=3072 \
      -print_final_stats=1 \
      -artifact_prefix="$out/$h/" > "$out/$h.log" 2>&1
  }
  fuzz_all() {
    for pair in "prepare forward" "layout plugin" "checkpoint"; do
      pids=()
      names=()
      for h in $pair; do
        run_harness "$h" &
        pids+=($!)
        names+=("$h")
      done
      for i in "${!pids[@]}"; do
        if ! wait "${pids[$i]}"; then
          echo "fuzz_${names[$i]}: FAILED (log $out/${names[$i]}.log)"
          tail -n 60 "$out/${names[$i]}.log"
          failed=1
        fi
        grep -E '^stat::number_of_executed_units|^#[0-9]+ +DONE' "$out/${names[$i]}.log" |
          sed "s/^/fuzz_${names[$i]}: /" || true
      done
    done
    return "$failed"
  }
  timed fuzz-run fuzz_all
}

run_tsan() {
  local dir=$prefix-tsan
  timed tsan-configure configure "$dir" -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMOEINT4_SANITIZE=thread -DMOEINT4_XPU=OFF -DMOEINT4_BUILD_CLI=OFF
  timed tsan-build cmake --build "$dir" --target test_concurrency test_threads
  timed tsan-ctest ctest --test-dir "$dir" --output-on-failure -j1 --timeout 1800 \
    -R '^(concurrency_|core_test_threads$)'
}

start=$SECONDS
for part in "${parts[@]}"; do
  case $part in
  asan) run_asan ;;
  valgrind) run_valgrind ;;
  fuzz) run_fuzz ;;
  tsan) run_tsan ;;
  *) echo "unknown part '$part' (asan, valgrind, fuzz, tsan)" >&2; exit 2 ;;
  esac
done
printf '%-24s %5d s\n' "reliability total" $((SECONDS - start)) | tee -a "$times_file"
echo "==== reliability: times"
cat "$times_file"
