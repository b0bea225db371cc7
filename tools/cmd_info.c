/* `moeint4 info`: version, every backend and the oracle's decision table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ceiling.h"
#include "bench_floor.h"
#include "cli.h"
#include "cli_session.h"

#define CLI_MAX_BACKENDS 64

static int cli_print_backends(void)
{
    moeint4_backend ids[CLI_MAX_BACKENDS];
    int count = 0;
    moeint4_status status = moeint4_backend_list(ids, CLI_MAX_BACKENDS, &count);
    if (status != MOEINT4_SUCCESS) {
        cli_print_failure("moeint4_backend_list", status);
        return CLI_EXIT_FAILURE;
    }
    if (count > CLI_MAX_BACKENDS)
        count = CLI_MAX_BACKENDS;
    printf("backends (oracle priority order on this machine):\n");
    printf("  %-3s %-10s %-9s %-10s %-8s %s\n", "id", "name", "compiled", "available", "memory",
           "reason");
    for (int i = 0; i < count; i++) {
        moeint4_backend_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        status = moeint4_backend_query(ids[i], &info);
        if (status != MOEINT4_SUCCESS) {
            printf("  %-3d (query failed: %s: %s)\n", (int)ids[i], moeint4_status_string(status),
                   moeint4_last_error());
            continue;
        }
        printf("  %-3d %-10s %-9s %-10s %-8s %s\n", (int)info.id, info.name,
               info.compiled ? "yes" : "no", info.available ? "yes" : "no",
               !info.compiled         ? "-"
               : info.device_pointers ? "device"
                                      : "host",
               info.reason[0] ? info.reason : "-");
    }
    return CLI_EXIT_OK;
}

/* moeint4_backend_precision for every backend and dtype. */
static void cli_print_precision(void)
{
    moeint4_backend ids[CLI_MAX_BACKENDS];
    int count = 0;
    if (moeint4_backend_list(ids, CLI_MAX_BACKENDS, &count) != MOEINT4_SUCCESS)
        return;
    if (count > CLI_MAX_BACKENDS)
        count = CLI_MAX_BACKENDS;
    printf("\nprecision per activation dtype (inputs/weights/intermediate/accumulation; the output "
           "is rounded once):\n");
    for (int i = 0; i < count; i++) {
        moeint4_backend_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        if (moeint4_backend_query(ids[i], &info) != MOEINT4_SUCCESS)
            continue;
        printf("  %-10s", info.name);
        for (int d = MOEINT4_DTYPE_F32; d <= MOEINT4_DTYPE_BF16; d++) {
            moeint4_precision p;
            memset(&p, 0, sizeof p);
            p.struct_size = sizeof p;
            if (moeint4_backend_precision(ids[i], (moeint4_dtype)d, &p) != MOEINT4_SUCCESS ||
                !p.stated) {
                printf(" %4s: %-18s", cli_dtype_name((moeint4_dtype)d), "not stated");
                continue;
            }
            char words[64];
            snprintf(words, sizeof words, "%s/%s/%s/%s", cli_dtype_name(p.inputs),
                     cli_dtype_name(p.weights), cli_dtype_name(p.intermediate),
                     cli_dtype_name(p.accumulation));
            printf(" %4s: %-18s", cli_dtype_name((moeint4_dtype)d), words);
        }
        printf("\n");
    }
}

static int cli_print_oracle(const cli_options *options)
{
    moeint4_problem problem = cli_problem(options);
    const cli_preset *p = options->preset;
    printf("\nproblem: %s, %s, group %d (E=%d topk=%d K=%d N=%d), requested backend: %s\n", p->name,
           cli_format_name(options->format), p->group_size, p->num_experts, p->topk, p->hidden_size,
           p->intermediate_size, options->backend_name);
    /* One call usually suffices; a longer table gets a second, exact one. */
    size_t capacity = 8192, length = 0;
    char *table = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        free(table);
        table = malloc(capacity);
        if (table == NULL) {
            fprintf(stderr, "moeint4: out of memory\n");
            return CLI_EXIT_FAILURE;
        }
        moeint4_status status =
            moeint4_oracle_explain(&problem, options->backend, 0, table, capacity, &length);
        if (status != MOEINT4_SUCCESS) {
            free(table);
            cli_print_failure("moeint4_oracle_explain", status);
            return CLI_EXIT_FAILURE;
        }
        if (length < capacity)
            break;
        capacity = length + 1;
    }
    length = strlen(table);
    printf("oracle decision table:\n%s%s", table,
           length > 0 && table[length - 1] == '\n' ? "" : "\n");
    free(table);

    moeint4_backend chosen = MOEINT4_BACKEND_AUTO;
    moeint4_status status = moeint4_oracle_select(&problem, options->backend, 0, &chosen);
    if (status != MOEINT4_SUCCESS) {
        /* Not a failure of `info`: the table above says why. */
        printf("choice: none (%s: %s)\n", moeint4_status_string(status), moeint4_last_error());
        return CLI_EXIT_OK;
    }
    moeint4_backend_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (moeint4_backend_query(chosen, &info) == MOEINT4_SUCCESS)
        printf("choice: %s\n", info.name);
    else
        printf("choice: backend id %d\n", (int)chosen);
    return CLI_EXIT_OK;
}

int cli_info_main(int argc, char **argv)
{
    cli_options options;
    int status = cli_parse_options("info", CLI_FLAG_PRESET | CLI_FLAG_FORMAT | CLI_FLAG_BACKEND,
                                   argc, argv, &options);
    if (status != CLI_EXIT_OK)
        return status;

    unsigned runtime = moeint4_version();
    printf("libmoeint4 %s (library %u, header %d), moeint4 command built from commit %s\n",
           moeint4_version_string(), runtime, MOEINT4_VERSION_NUMBER, cli_commit());
    if (runtime / 100 != MOEINT4_VERSION_NUMBER / 100)
        printf("warning: the loaded library's version differs from the header's\n");
    printf("backend override: MOEINT4_BACKEND=%s\n",
           getenv("MOEINT4_BACKEND") ? getenv("MOEINT4_BACKEND") : "(unset)");
    /* the CPU backend's rule, as the bench's floor applies it (bench_ceiling.c) */
    const char *bf16_table = NULL, *f16_table = NULL, *f32_table = NULL;
    int passes, f16_passes;
    cli_cpu_kernel_ceiling(MOEINT4_DTYPE_BF16, &bf16_table, &passes);
    cli_cpu_kernel_ceiling(MOEINT4_DTYPE_F16, &f16_table, &f16_passes);
    cli_cpu_kernel_ceiling(MOEINT4_DTYPE_F32, &f32_table, &passes);
    /* without AMX, f16 runs where f32 does ("avx512 (f16/f32 input)": the name) */
    const int f16_length = f16_passes == 2 ? (int)strlen(f16_table) : (int)strcspn(f16_table, " ");
    printf("CPU kernel table: %s for bf16 activations, %.*s for f16, %.*s for f32 "
           "(MOEINT4_CPU_KERNEL=%s)\n",
           bf16_table, f16_length, f16_table, (int)strcspn(f32_table, " "), f32_table,
           getenv("MOEINT4_CPU_KERNEL") ? getenv("MOEINT4_CPU_KERNEL") : "(unset)");
    const char *suggestion = cli_openblas_suggestion();
    printf("OpenBLAS kernels: %s", cli_openblas_core());
    if (suggestion != NULL)
        printf(" (pre-AVX2 fallback on this CPU: suggested OPENBLAS_CORETYPE=%s)", suggestion);
    printf("\n");
    status = cli_print_backends();
    if (status != CLI_EXIT_OK)
        return status;
    cli_print_precision();
    return cli_print_oracle(&options);
}
