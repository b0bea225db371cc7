# cmake -DMOEINT4_CLI=<moeint4> -DGENERATED=<dir> -P cli_checkpoint_test.cmake
# `moeint4 inspect` (text and JSON, parsed with string(JSON)), `run
# --checkpoint` on every MoE layer of every generated checkpoint (checked
# against the double reference by the command), `bench --checkpoint`, and
# the usage and failure exits.
cmake_minimum_required(VERSION 3.25)

set(WORK_DIR "${GENERATED}")
include(${CMAKE_CURRENT_LIST_DIR}/../cli/cli_functions.cmake)

set(qwen3 "${GENERATED}/qwen3_moe_gptq_v1_act_order")
run_cli(0 inspect "${qwen3}")
expect_match("${cli_out}" "architecture: Qwen3MoeForCausalLM" "inspect: architecture")
expect_match("${cli_out}" "layer 1: 8 experts, top-k 2, K=128 N=64, gptq-asym, zeros gptq v1" "inspect: layer")
expect_match("${cli_out}" "act-order" "inspect: act-order")
expect_match("${cli_out}" "model.layers.\\*.mlp.gate.weight \\(BF16\\) x2" "inspect: router unquantized")
expect_match("${cli_out}" "warnings: none" "inspect: warnings")

foreach(name qwen3_moe_gptq_v1_act_order qwen2_moe_gptq_sym_shared mixtral_awq_gemm_g64
             deepseek_v2_gptq_v2 qwen3_moe_gptq_fused)
  run_cli(0 inspect "${GENERATED}/${name}" --json)
  set(inspected "${cli_out}")
  string(JSON layers LENGTH "${inspected}" moe_layers)
  math(EXPR last "${layers} - 1")
  foreach(i RANGE ${last})
    string(JSON layer GET "${inspected}" moe_layers ${i} layer)
    run_cli(0 run --checkpoint "${GENERATED}/${name}" --layer ${layer} --tokens 5 --backend cpu)
    expect_match("${cli_out}" "check: rel-L2 error [0-9.e+-]+ over 5 sampled rows against the double reference: ok"
                 "run ${name} layer ${layer}")
  endforeach()
endforeach()

run_cli(0 inspect "${GENERATED}/deepseek_v2_gptq_v2" --json)
string(JSON first GET "${cli_out}" moe_layers 0 layer)
string(JSON shared GET "${cli_out}" moe_layers 0 shared_N)
string(JSON zeros GET "${cli_out}" moe_layers 0 zeros)
string(JSON hip GET "${cli_out}" moe_layers 0 hip_bf16_bytes)
if(NOT first EQUAL 1 OR NOT shared EQUAL 256 OR NOT zeros STREQUAL "gptq_v2" OR NOT hip EQUAL 1572864)
  message(FATAL_ERROR "inspect --json deepseek: layer ${first}, shared_N ${shared}, zeros ${zeros}, hip ${hip}")
endif()

run_cli(0 inspect "${GENERATED}/bad/sym_labeled_v1_stored_v2")
expect_match("${cli_out}" "mislabeled" "inspect: the relabeled zeros warning")
run_cli(1 inspect "${GENERATED}/bad/sym_zero_not_7_or_8")
expect_match("${cli_err}" "stored zero 3" "inspect: a wrong symmetric zero")
run_cli(1 inspect "${GENERATED}/bad/truncated_file")
expect_match("${cli_err}" "model-00002-of-00002.safetensors" "inspect: the file is named")

run_cli(0 bench --checkpoint "${GENERATED}/mixtral_awq_gemm_g64" --layer 1 --tokens 1,4 --iters 3
        --backend cpu)
expect_match("${cli_out}" "\n +4 +[0-9.]+ +[0-9.]+\n" "bench: a row for M = 4")

run_cli(1 run --checkpoint "${GENERATED}/deepseek_v2_gptq_v2" --layer 0)
expect_match("${cli_err}" "layer 0 is not a MoE layer of this checkpoint \\(MoE layers: 1, 2\\)" "run: dense layer")
run_cli(2 run --checkpoint "${qwen3}")
expect_match("${cli_err}" "--checkpoint needs --layer" "usage: --layer missing")
run_cli(2 bench --checkpoint "${qwen3}" --layer 0 --activation gelu)
expect_match("${cli_err}" "--activation describes a synthetic layer; with --checkpoint"
  "usage: --activation with --checkpoint")
run_cli(2 run --checkpoint "${qwen3}" --layer 0 --preset mixtral-8x7b)
expect_match("${cli_err}" "--preset describes a synthetic layer" "usage: --preset with --checkpoint")
run_cli(2 run --layer 1)
run_cli(2 inspect)
