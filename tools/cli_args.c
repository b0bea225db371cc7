/* Command-line parsing shared by the subcommands: every flag is checked and a
 * bad one is named in the message (exit code 2), never a crash. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"

static const cli_preset cli_presets[] = {
    { "qwen3-30b-a3b", 128, 8, 2048, 768, 128 },
    { "mixtral-8x7b", 8, 2, 4096, 14336, 128 },
    { "tiny", 8, 2, 256, 128, 64 },
};

typedef struct cli_name_value {
    const char *name;
    int value;
} cli_name_value;

static const cli_name_value cli_formats[] = {
    { "gptq-sym", MOEINT4_FORMAT_GPTQ_SYM },
    { "gptq-asym", MOEINT4_FORMAT_GPTQ_ASYM },
    { "awq", MOEINT4_FORMAT_AWQ },
};
static const cli_name_value cli_dtypes[] = {
    { "bf16", MOEINT4_DTYPE_BF16 },
    { "f16", MOEINT4_DTYPE_F16 },
    { "f32", MOEINT4_DTYPE_F32 },
};
static const cli_name_value cli_activations[] = {
    { "silu", MOEINT4_ACTIVATION_SILU },
    { "gelu", MOEINT4_ACTIVATION_GELU },
    { "swiglu", MOEINT4_ACTIVATION_SWIGLU_CLAMP },
};
static const cli_name_value cli_gpu_weights[] = {
    { "auto", MOEINT4_GPU_WEIGHTS_AUTO },
    { "bf16", MOEINT4_GPU_WEIGHTS_BF16 },
    { "int4", MOEINT4_GPU_WEIGHTS_INT4 },
};

#define CLI_COUNT(array) ((int)(sizeof(array) / sizeof((array)[0])))

static const char *cli_name_of(const cli_name_value *table, int count, int value)
{
    for (int i = 0; i < count; i++) {
        if (table[i].value == value)
            return table[i].name;
    }
    return "?";
}

const char *cli_format_name(moeint4_format format)
{
    return cli_name_of(cli_formats, CLI_COUNT(cli_formats), (int)format);
}
const char *cli_dtype_name(moeint4_dtype dtype)
{
    return cli_name_of(cli_dtypes, CLI_COUNT(cli_dtypes), (int)dtype);
}
const char *cli_activation_name(moeint4_activation activation)
{
    return cli_name_of(cli_activations, CLI_COUNT(cli_activations), (int)activation);
}
const char *cli_gpu_weights_name(moeint4_gpu_weights mode)
{
    return cli_name_of(cli_gpu_weights, CLI_COUNT(cli_gpu_weights), (int)mode);
}

int cli_online_cores(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? (int)cores : 1;
}

moeint4_problem cli_problem(const cli_options *options)
{
    moeint4_problem problem;
    memset(&problem, 0, sizeof problem);
    problem.struct_size = sizeof problem;
    problem.format = options->format;
    problem.group_size = options->preset->group_size;
    problem.num_experts = options->preset->num_experts;
    problem.num_local_experts = options->preset->num_experts;
    problem.hidden_size = options->preset->hidden_size;
    problem.intermediate_size = options->preset->intermediate_size;
    return problem;
}

static int cli_usage_error(const char *command, const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "moeint4 %s: ", command);
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\nTry 'moeint4 help %s'.\n", command);
    return CLI_EXIT_USAGE;
}

static int cli_lookup(const cli_name_value *table, int count, const char *text, int *value)
{
    for (int i = 0; i < count; i++) {
        if (strcasecmp(table[i].name, text) == 0) {
            *value = table[i].value;
            return 1;
        }
    }
    return 0;
}

/* Strict decimal integer in [lo, hi]. */
static int cli_parse_int64(const char *text, int64_t lo, int64_t hi, int64_t *value)
{
    if (text == NULL || *text == '\0')
        return 0;
    char *end = NULL;
    errno = 0;
    long long parsed = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || parsed < lo || parsed > hi)
        return 0;
    *value = (int64_t)parsed;
    return 1;
}

/* An integer flag's value in [lo, hi]; prints the usage error and returns 0
 * when it is not one. */
static int cli_parse_integer_flag(const char *command, const char *flag, const char *value,
                                  int64_t lo, int64_t hi, int64_t *number)
{
    if (cli_parse_int64(value, lo, hi, number))
        return 1;
    char range[64];
    snprintf(range, sizeof range, "[%lld, %lld]", (long long)lo, (long long)hi);
    fprintf(stderr, "moeint4 %s: %s: '%s' is not an integer in %s\nTry 'moeint4 help %s'.\n",
            command, flag, value, range, command);
    return 0;
}

static int cli_parse_token_list(const char *text, cli_options *options)
{
    char buffer[512];
    if (strlen(text) >= sizeof buffer)
        return 0;
    strcpy(buffer, text);
    options->num_token_counts = 0;
    char *save = NULL;
    for (char *item = strtok_r(buffer, ",", &save); item != NULL;
         item = strtok_r(NULL, ",", &save)) {
        if (options->num_token_counts == CLI_MAX_TOKEN_LIST)
            return 0;
        if (!cli_parse_int64(item, 1, 1 << 20, &options->tokens[options->num_token_counts]))
            return 0;
        options->num_token_counts++;
    }
    /* a trailing or doubled comma leaves an empty item strtok skips: refuse it */
    return options->num_token_counts > 0 && text[strlen(text) - 1] != ',' &&
           strstr(text, ",,") == NULL && text[0] != ',';
}

static void cli_default_options(cli_options *options)
{
    memset(options, 0, sizeof *options);
    options->preset = &cli_presets[0];
    options->format = MOEINT4_FORMAT_GPTQ_SYM;
    options->dtype = MOEINT4_DTYPE_BF16;
    options->activation = MOEINT4_ACTIVATION_SILU;
    options->backend = MOEINT4_BACKEND_AUTO;
    options->backend_name = "auto";
    options->gpu_weights = MOEINT4_GPU_WEIGHTS_AUTO;
    options->seed = 1;
    options->tokens[0] = 4;
    options->num_token_counts = 1;
    options->iters = 9;
    options->threads = 0;
    options->layer = -1;
}

/* A value from `table` (case-insensitive); prints the usage error with the
 * choices and returns 0 when it is not one of them. */
static int cli_parse_choice(const char *command, const char *flag, const char *value,
                            const cli_name_value *table, int count, int *parsed)
{
    if (cli_lookup(table, count, value, parsed))
        return 1;
    fprintf(stderr, "moeint4 %s: %s: unknown value '%s' (", command, flag, value);
    for (int i = 0; i < count; i++)
        fprintf(stderr, "%s%s", i ? "|" : "", table[i].name);
    fprintf(stderr, ")\nTry 'moeint4 help %s'.\n", command);
    return 0;
}

/* Applies one flag's value. Returns CLI_EXIT_OK or a usage error. */
static int cli_apply_flag(const char *command, const char *flag, const char *value,
                          cli_options *options)
{
    int parsed = 0;
    int64_t number = 0;
    if (strcmp(flag, "--preset") == 0) {
        for (int i = 0; i < CLI_COUNT(cli_presets); i++) {
            if (strcasecmp(cli_presets[i].name, value) == 0) {
                options->preset = &cli_presets[i];
                return CLI_EXIT_OK;
            }
        }
        return cli_usage_error(command, "--preset: unknown preset '%s' (%s)", value,
                               "qwen3-30b-a3b|mixtral-8x7b|tiny");
    }
    if (strcmp(flag, "--format") == 0) {
        if (!cli_parse_choice(command, flag, value, cli_formats, CLI_COUNT(cli_formats), &parsed))
            return CLI_EXIT_USAGE;
        options->format = (moeint4_format)parsed;
        return CLI_EXIT_OK;
    }
    if (strcmp(flag, "--dtype") == 0) {
        if (!cli_parse_choice(command, flag, value, cli_dtypes, CLI_COUNT(cli_dtypes), &parsed))
            return CLI_EXIT_USAGE;
        options->dtype = (moeint4_dtype)parsed;
        return CLI_EXIT_OK;
    }
    if (strcmp(flag, "--activation") == 0) {
        if (!cli_parse_choice(command, flag, value, cli_activations, CLI_COUNT(cli_activations),
                              &parsed))
            return CLI_EXIT_USAGE;
        options->activation = (moeint4_activation)parsed;
        return CLI_EXIT_OK;
    }
    if (strcmp(flag, "--gpu-weights") == 0) {
        if (!cli_parse_choice(command, flag, value, cli_gpu_weights, CLI_COUNT(cli_gpu_weights),
                              &parsed))
            return CLI_EXIT_USAGE;
        options->gpu_weights = (moeint4_gpu_weights)parsed;
        return CLI_EXIT_OK;
    }
    if (strcmp(flag, "--backend") == 0) {
        moeint4_backend id = MOEINT4_BACKEND_AUTO;
        if (moeint4_backend_from_name(value, &id) != MOEINT4_SUCCESS)
            return cli_usage_error(command, "--backend: unknown backend '%s' (%s)", value,
                                   "auto|cpu|xpu|hip or a registered name");
        options->backend = id;
        options->backend_name = value;
        return CLI_EXIT_OK;
    }
    if (strcmp(flag, "--seed") == 0) {
        if (!cli_parse_integer_flag(command, flag, value, 0, INT64_MAX, &number))
            return CLI_EXIT_USAGE;
        options->seed = (uint64_t)number;
        return CLI_EXIT_OK;
    }
    if (strcmp(flag, "--iters") == 0) {
        if (!cli_parse_integer_flag(command, flag, value, 1, 4000, &number))
            return CLI_EXIT_USAGE;
        options->iters = (int)number;
        return CLI_EXIT_OK;
    }
    if (strcmp(flag, "--threads") == 0) {
        if (!cli_parse_integer_flag(command, flag, value, 1, 4096, &number))
            return CLI_EXIT_USAGE;
        options->threads = (int)number;
        return CLI_EXIT_OK;
    }
    if (strcmp(flag, "--json") == 0) {
        options->json_path = value;
        return CLI_EXIT_OK;
    }
    if (strcmp(flag, "--plot") == 0) {
        options->plot_path = value;
        return CLI_EXIT_OK;
    }
    if (strcmp(flag, "--checkpoint") == 0) {
        options->checkpoint_path = value;
        return CLI_EXIT_OK;
    }
    if (strcmp(flag, "--layer") == 0) {
        if (!cli_parse_integer_flag(command, flag, value, 0, 1 << 20, &number))
            return CLI_EXIT_USAGE;
        options->layer = (int)number;
        return CLI_EXIT_OK;
    }
    return cli_usage_error(command, "unknown option '%s'%s", flag, "");
}

static const struct {
    const char *flag;
    unsigned bit;
} cli_flag_bits[] = {
    { "--preset", CLI_FLAG_PRESET },
    { "--format", CLI_FLAG_FORMAT },
    { "--tokens", CLI_FLAG_TOKENS | CLI_FLAG_TOKEN_LIST },
    { "--backend", CLI_FLAG_BACKEND },
    { "--activation", CLI_FLAG_ACTIVATION },
    { "--dtype", CLI_FLAG_DTYPE },
    { "--seed", CLI_FLAG_SEED },
    { "--iters", CLI_FLAG_ITERS },
    { "--threads", CLI_FLAG_THREADS },
    { "--json", CLI_FLAG_JSON },
    { "--plot", CLI_FLAG_PLOT },
    { "--checkpoint", CLI_FLAG_CHECKPOINT },
    { "--layer", CLI_FLAG_LAYER },
    { "--gpu-weights", CLI_FLAG_GPU_WEIGHTS },
};

int cli_parse_options(const char *command, unsigned accepted_flags, int argc, char **argv,
                      cli_options *options)
{
    cli_default_options(options);
    unsigned given = 0; /* CLI_FLAG_* bits of the flags on the command line */
    if (accepted_flags & CLI_FLAG_TOKEN_LIST) {
        static const int64_t bench_tokens[] = { 1, 8, 64, 512 };
        options->num_token_counts = 4;
        memcpy(options->tokens, bench_tokens, sizeof bench_tokens);
    }
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0)
            return cli_usage_error(command, "unexpected argument '%s'%s", arg, "");
        char flag[64];
        const char *value = NULL;
        const char *equals = strchr(arg, '=');
        size_t flag_length = equals ? (size_t)(equals - arg) : strlen(arg);
        if (flag_length >= sizeof flag)
            return cli_usage_error(command, "unknown option '%s'%s", arg, "");
        memcpy(flag, arg, flag_length);
        flag[flag_length] = '\0';

        unsigned bit = 0;
        for (int f = 0; f < CLI_COUNT(cli_flag_bits); f++) {
            if (strcmp(cli_flag_bits[f].flag, flag) == 0)
                bit = cli_flag_bits[f].bit;
        }
        if ((bit & accepted_flags) == 0)
            return cli_usage_error(command, "unknown option '%s'%s", flag, "");
        given |= bit;
        if (equals) {
            value = equals + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            return cli_usage_error(command, "%s needs a value%s", flag, "");
        }
        if (*value == '\0')
            return cli_usage_error(command, "%s: empty value%s", flag, "");

        if (strcmp(flag, "--tokens") == 0) {
            if (accepted_flags & CLI_FLAG_TOKEN_LIST) {
                if (!cli_parse_token_list(value, options))
                    return cli_usage_error(
                        command,
                        "--tokens: '%s' is not a comma-separated list of integers in [1, %s]",
                        value, "1048576");
            } else if (!cli_parse_int64(value, 1, 1 << 20, &options->tokens[0])) {
                return cli_usage_error(command, "--tokens: '%s' is not an integer in [1, %s]",
                                       value, "1048576");
            }
            continue;
        }
        int status = cli_apply_flag(command, flag, value, options);
        if (status != CLI_EXIT_OK)
            return status;
    }
    if (options->checkpoint_path && options->layer < 0)
        return cli_usage_error(command,
                               "--checkpoint needs --layer L (the model's layer "
                               "number; `moeint4 inspect %s` lists them)%s",
                               options->checkpoint_path, "");
    if (!options->checkpoint_path && options->layer >= 0)
        return cli_usage_error(command, "--layer needs --checkpoint PATH%s%s", "", "");
    /* A checkpoint's layer brings its own shape, format and activation (SiLU
     * in every family read): a flag describing a synthetic layer is refused,
     * never silently ignored. */
    const unsigned synthetic_only = CLI_FLAG_PRESET | CLI_FLAG_FORMAT | CLI_FLAG_ACTIVATION;
    for (int f = 0; options->checkpoint_path && f < CLI_COUNT(cli_flag_bits); f++) {
        if (cli_flag_bits[f].bit & synthetic_only & given)
            return cli_usage_error(command,
                                   "%s describes a synthetic layer; with --checkpoint the layer's "
                                   "shape, format and activation come from %s",
                                   cli_flag_bits[f].flag, options->checkpoint_path);
    }
    return CLI_EXIT_OK;
}
