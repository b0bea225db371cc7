/* moeint4: inspect the library's backends, run a synthetic MoE layer, bench it. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char cli_usage_text[] =
    "usage: moeint4 <command> [options]\n"
    "\n"
    "commands:\n"
    "  info   [--backend NAME] [--preset P] [--format F]\n"
    "         version, every backend (compiled/available, why not), and the oracle's\n"
    "         decision table for the problem (default qwen3-30b-a3b, gptq-sym)\n"
    "  run    [--preset P] [--format F] [--tokens M] [--backend NAME]\n"
    "         [--activation silu|gelu|swiglu] [--dtype bf16|f16|f32] [--seed S] [--threads T]\n"
    "         [--gpu-weights auto|int4|bf16]\n"
    "         one forward of a synthetic layer, checked against the double reference\n"
    "  bench  [--preset P] [--format F] [--tokens M1,M2,...] [--backend NAME]\n"
    "         [--activation A] [--dtype D] [--seed S] [--iters N] [--threads T]\n"
    "         [--gpu-weights W] [--json FILE] [--plot FILE.png]\n"
    "         timed forwards vs the machine's memory/compute floor and an OpenBLAS\n"
    "         baseline measured in the same run (see bench/README.md)\n"
    "  inspect PATH [--json]\n"
    "         a checkpoint (directory or .safetensors file): architecture, MoE layers,\n"
    "         experts, K, N, top-k, format, zeros, group size, act-order, bytes, warnings\n"
    "  run    --checkpoint PATH --layer L [--tokens M] [--backend NAME] [--dtype D]\n"
    "         [--gpu-weights W]\n"
    "         one forward of a checkpoint's layer (random routing), checked likewise\n"
    "  bench  --checkpoint PATH --layer L [--tokens M1,M2,...] [--backend NAME] [--iters N]\n"
    "         [--gpu-weights W]\n"
    "         timed forwards of a checkpoint's layer\n"
    "  help [command]   this text\n"
    "\n"
    "presets: qwen3-30b-a3b (E=128 topk=8 K=2048 N=768 g128, default),\n"
    "         mixtral-8x7b (E=8 topk=2 K=4096 N=14336 g128), tiny (E=8 topk=2 K=256 N=128 g64)\n"
    "formats: gptq-sym (default), gptq-asym, awq\n"
    "defaults: run --tokens 4; bench --tokens 1,8,64,512 --iters 9; dtype bf16; silu; seed 1;\n"
    "          --backend auto (MOEINT4_BACKEND overrides auto); threads = online cores;\n"
    "          --gpu-weights auto: how a GPU backend holds the weights (HIP: int4 on the\n"
    "          device unless MOEINT4_HIP_WEIGHTS=bf16; the CPU and XPU keep int4 either way)\n"
    "exit status: 0 ok, 1 failure (library error or accuracy check), 2 usage error\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(cli_usage_text, stderr);
        return CLI_EXIT_USAGE;
    }
    const char *command = argv[1];
    if (strcmp(command, "help") == 0 || strcmp(command, "--help") == 0 ||
        strcmp(command, "-h") == 0) {
        fputs(cli_usage_text, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(command, "--version") == 0 || strcmp(command, "version") == 0) {
        printf("moeint4 %s (commit %s)\n", moeint4_version_string(), cli_commit());
        return CLI_EXIT_OK;
    }
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(cli_usage_text, stdout);
            return CLI_EXIT_OK;
        }
    }
    if (strcmp(command, "info") == 0)
        return cli_info_main(argc - 2, argv + 2);
    if (strcmp(command, "run") == 0)
        return cli_run_main(argc - 2, argv + 2);
    if (strcmp(command, "bench") == 0)
        return cli_bench_main(argc - 2, argv + 2);
    if (strcmp(command, "inspect") == 0)
        return cli_inspect_main(argc - 2, argv + 2);
    fprintf(stderr, "moeint4: unknown command '%s'\n\n%s", command, cli_usage_text);
    return CLI_EXIT_USAGE;
}
