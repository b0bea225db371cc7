# cmake -DMOEINT4_CLI=<moeint4> -DMODE=info|run|bench|usage -DWORK_DIR=<dir> -P cli_test.cmake
cmake_minimum_required(VERSION 3.25)
file(MAKE_DIRECTORY "${WORK_DIR}")

include(${CMAKE_CURRENT_LIST_DIR}/cli_functions.cmake)

# Runs `moeint4 bench` on the tiny preset (extra arguments appended) and checks
# every record's fields; expect_device: 1 for a device backend (no CPU floor
# or baseline: those fields must be null), else 0.
function(check_bench expect_device)
  set(json "${WORK_DIR}/out.json")
  set(png "${WORK_DIR}/out.png")
  file(REMOVE "${json}" "${png}")
  find_program(GNUPLOT gnuplot)
  set(plot_args "")
  if(GNUPLOT)
    set(plot_args --plot "${png}")
  endif()
  run_cli(0 bench --preset tiny --tokens 1,4 --iters 3 --json "${json}" ${plot_args} ${ARGN})
  expect_match("${cli_err}" "moeint4 bench: building and preparing" "progress on stderr")
  file(READ "${json}" text)
  string(JSON count LENGTH "${text}")
  if(NOT count EQUAL 2)
    message(FATAL_ERROR "expected 2 records (M=1,4), got ${count}:\n${text}")
  endif()
  # Device backends have no CPU floor or baseline: those fields are null.
  set(always M median_ms min_ms max_ms gbps gflops threads rel_err weight_bytes device_pointers)
  set(host_only floor_ms ratio_to_floor baseline_ms bandwidth_gbps peak_gflops
      baseline_rel_err baseline_ref_err speedup_vs_baseline)
  foreach(index 0 1)
    foreach(field preset format backend gpu_weights commit cache_policy date)
      string(JSON type TYPE "${text}" ${index} ${field})
      if(NOT type STREQUAL "STRING")
        message(FATAL_ERROR "record ${index}: ${field} is ${type}, not a string")
      endif()
    endforeach()
    string(JSON device GET "${text}" ${index} device_pointers)
    if(NOT "${device}" STREQUAL "${expect_device}")
      message(FATAL_ERROR "record ${index}: device_pointers ${device}, expected ${expect_device}")
    endif()
    foreach(field ${always} ${host_only})
      string(JSON type TYPE "${text}" ${index} ${field})
      if(NOT type STREQUAL "NUMBER" AND NOT (device AND type STREQUAL "NULL"))
        message(FATAL_ERROR "record ${index}: ${field} is ${type}, not a number:\n${text}")
      endif()
    endforeach()
    string(JSON m GET "${text}" ${index} M)
    string(JSON preset GET "${text}" ${index} preset)
    string(JSON median GET "${text}" ${index} median_ms)
    string(JSON rel_err GET "${text}" ${index} rel_err)
    set(want_ms 1 4)
    list(GET want_ms ${index} want_m)
    if(NOT m EQUAL want_m OR NOT preset STREQUAL "tiny")
      message(FATAL_ERROR "record ${index}: M=${m} preset=${preset}")
    endif()
    if(median LESS_EQUAL 0 OR rel_err GREATER 0.01)
      message(FATAL_ERROR "record ${index}: median ${median} rel_err ${rel_err}")
    endif()
    if(device)
      foreach(field ${host_only})
        string(JSON type TYPE "${text}" ${index} ${field})
        if(NOT type STREQUAL "NULL")
          message(FATAL_ERROR "record ${index}: ${field} is ${type}, a device backend has none")
        endif()
      endforeach()
    else()
      # a floor below the time (ratio near or above 1), baseline in agreement
      string(JSON ratio GET "${text}" ${index} ratio_to_floor)
      string(JSON base_err GET "${text}" ${index} baseline_rel_err)
      if(ratio LESS 0.5 OR base_err GREATER 0.01)
        message(FATAL_ERROR "record ${index}: ratio_to_floor ${ratio} baseline_rel_err ${base_err}")
      endif()
    endif()
  endforeach()
  if(GNUPLOT)
    file(READ "${png}" magic LIMIT 4 HEX)
    if(NOT magic STREQUAL "89504e47")
      message(FATAL_ERROR "--plot did not write a PNG (${magic})")
    endif()
  endif()

endfunction()

if(MODE STREQUAL "info")
  run_cli(0 info)
  expect_match("${cli_out}" "libmoeint4 [0-9]+\\.[0-9]+\\.[0-9]+" "version")
  foreach(name cpu xpu hip)
    expect_match("${cli_out}" "\n +[0-9]+ +${name} +(yes|no) +(yes|no)" "backend ${name}")
  endforeach()
  expect_match("${cli_out}" "\n  cpu +f32: f32/f32/f32/f32 " "the cpu backend's stated f32 precision")
  expect_match("${cli_out}" "oracle decision table:\n.+" "decision table")
  expect_match("${cli_out}" "\nbinding: an AUTO context binds to [a-z0-9_-]+ at its first prepare"
    "how an AUTO context binds")
  expect_match("${cli_out}" "\nchoice: [a-z0-9_-]+\n" "the oracle's choice")
  run_cli(0 info --preset tiny --format awq --backend cpu)
  expect_match("${cli_out}" "problem: tiny, awq, group 64" "problem line")
  expect_match("${cli_out}" "choice: cpu" "forced cpu")

elseif(MODE STREQUAL "run")
  foreach(format gptq-sym gptq-asym awq)
    run_cli(0 run --preset tiny --format ${format})
    expect_match("${cli_out}" "backend: [a-z0-9_-]+ \\((host|device) pointers\\)"
      "run ${format}: backend")
    expect_match("${cli_out}" "prepare: [0-9.]+ ms" "run ${format}: prepare time")
    expect_match("${cli_out}" "forward: first [0-9.]+ ms" "run ${format}: forward time")
    expect_match("${cli_out}" "check: rel-L2 error [0-9.e+-]+ over 4 sampled rows: ok"
      "run ${format}: accuracy")
  endforeach()
  # other dtypes, activations and a token count above the sample size
  run_cli(0 run --preset tiny --format awq --dtype f32 --activation swiglu --tokens 37 --seed 9)
  expect_match("${cli_out}" "over 8 sampled rows: ok" "f32 swiglu M=37")
  run_cli(0 run --preset tiny --format gptq-asym --dtype=f16 --activation=gelu --tokens=5)
  expect_match("${cli_out}" "over 5 sampled rows: ok" "f16 gelu M=5")
  # a GPU weights mode is a context option every backend accepts
  run_cli(0 run --preset tiny --gpu-weights bf16)
  expect_match("${cli_out}" "over 4 sampled rows: ok" "--gpu-weights bf16")

elseif(MODE STREQUAL "bench")
  check_bench(0 --gpu-weights int4)
  file(READ "${WORK_DIR}/out.json" text)
  string(JSON mode GET "${text}" 0 gpu_weights)
  if(NOT mode STREQUAL "int4")
    message(FATAL_ERROR "gpu_weights is '${mode}', --gpu-weights asked for int4")
  endif()

elseif(MODE STREQUAL "device")
  # A device backend end to end (memory_alloc/copy, null floors); skipped
  # (SKIP_REGULAR_EXPRESSION) when it is not available here.
  run_cli(0 info --backend ${DEVICE_BACKEND})
  if(NOT cli_out MATCHES "\nchoice: ${DEVICE_BACKEND}\n")
    message("SKIPPED: backend ${DEVICE_BACKEND} is not available here")
    return()
  endif()
  run_cli(0 run --preset tiny --backend ${DEVICE_BACKEND} --tokens 9)
  expect_match("${cli_out}" "backend: ${DEVICE_BACKEND} \\(device pointers\\)" "device run")
  expect_match("${cli_out}" "over 8 sampled rows: ok" "device run accuracy")
  check_bench(1 --backend ${DEVICE_BACKEND})
  # Both weights modes on the device. HIP holds BF16 weights in about 4x the
  # bytes (checked on the Qwen3 layer, whose megabytes have digits to
  # spare); the XPU keeps int4 either way.
  set(mode_preset tiny)
  if(DEVICE_BACKEND STREQUAL "hip")
    set(mode_preset qwen3-30b-a3b)
  endif()
  foreach(mode int4 bf16)
    run_cli(0 run --preset ${mode_preset} --backend ${DEVICE_BACKEND} --tokens 1
            --gpu-weights ${mode})
    expect_match("${cli_out}" "over 1 sampled rows: ok" "device run, --gpu-weights ${mode}")
    if(NOT cli_out MATCHES "prepared weights hold [0-9.]+ MB host, ([0-9]+)\\.([0-9]) MB device")
      message(FATAL_ERROR "device run, --gpu-weights ${mode}: no device bytes in:\n${cli_out}")
    endif()
    set(tenths_${mode} "${CMAKE_MATCH_1}${CMAKE_MATCH_2}") # tenths of a MB
  endforeach()
  if(DEVICE_BACKEND STREQUAL "hip")
    math(EXPR bound "3 * ${tenths_int4}")
    if(NOT tenths_bf16 GREATER bound)
      message(FATAL_ERROR "HIP device bytes: bf16 ${tenths_bf16}, int4 ${tenths_int4} (tenths of "
        "a MB): BF16 weights should take about 4x the int4 ones")
    endif()
  endif()

elseif(MODE STREQUAL "usage")
  # Every bad invocation exits 2 and names what was wrong.
  set(cases
    "run|--preset|nope=>--preset"
    "run|--format|gptq=>--format"
    "run|--tokens|0=>--tokens"
    "run|--tokens|abc=>--tokens"
    "run|--tokens=>--tokens needs a value"
    "run|--bogus=>unknown option '--bogus'"
    "run|--dtype|f8=>--dtype"
    "run|--activation|relu=>--activation"
    "run|--backend|nosuch=>--backend"
    "run|--seed|-3=>--seed"
    "run|stray=>unexpected argument 'stray'"
    "run|--tokens|1,2=>--tokens"
    "run|--json|x.json=>unknown option '--json'"
    "bench|--tokens|1,,8=>--tokens"
    "bench|--tokens|8,=>--tokens"
    "bench|--iters|0=>--iters"
    "bench|--threads|0=>--threads"
    "bench|--format=>--format needs a value"
    "bench|--preset=>--preset"
    "info|--tokens|3=>unknown option '--tokens'"
    "run|--gpu-weights|fp8=>--gpu-weights: unknown value 'fp8'"
    "bench|--gpu-weights=>--gpu-weights needs a value"
    "info|--gpu-weights|int4=>unknown option '--gpu-weights'"
    "frobnicate=>unknown command 'frobnicate'")
  foreach(case IN LISTS cases)
    string(REPLACE "=>" ";" parts "${case}")
    list(GET parts 0 argv_text)
    list(GET parts 1 message_regex)
    string(REPLACE "|" ";" argv "${argv_text}")
    run_cli(2 ${argv})
    expect_match("${cli_err}" "${message_regex}" "moeint4 ${argv}")
  endforeach()
  run_cli(2)
  expect_match("${cli_err}" "usage: moeint4" "no arguments")
  run_cli(0 help)
  expect_match("${cli_out}" "usage: moeint4" "help")
else()
  message(FATAL_ERROR "unknown MODE '${MODE}'")
endif()
