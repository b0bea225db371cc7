/* The moeint4 command: shared types of its subcommands (info, run, bench).
 * Exit codes: 0 success, 1 a run-time failure (library error, accuracy check
 * failed, output not written), 2 a usage error. */
#ifndef MOEINT4_TOOLS_CLI_H
#define MOEINT4_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "moeint4.h"

enum { CLI_EXIT_OK = 0, CLI_EXIT_FAILURE = 1, CLI_EXIT_USAGE = 2 };

/* Accuracy bar for `run` and `bench` (relative L2 against the reference). */
#define CLI_MAX_REL_ERROR 1e-2
#define CLI_SAMPLE_ROWS 8
#define CLI_MAX_TOKEN_LIST 32

typedef struct cli_preset {
    const char *name;
    int num_experts, topk, hidden_size, intermediate_size, group_size;
} cli_preset;

/* Everything a subcommand may be given on its command line. */
typedef struct cli_options {
    const cli_preset *preset;
    moeint4_format format;
    moeint4_dtype dtype;
    moeint4_activation activation;
    moeint4_backend backend;         /* AUTO unless --backend */
    const char *backend_name;        /* as typed, "auto" by default */
    moeint4_gpu_weights gpu_weights; /* --gpu-weights (AUTO by default) */
    uint64_t seed;
    int64_t tokens[CLI_MAX_TOKEN_LIST];
    int num_token_counts;
    int iters;                   /* bench: timed forwards per M */
    int threads;                 /* 0 = one per online core */
    const char *json_path;       /* bench */
    const char *plot_path;       /* bench */
    const char *checkpoint_path; /* run/bench --checkpoint: a real checkpoint's layer */
    int layer;                   /* --layer: the model's layer number; -1 = not given */
} cli_options;

/* Which flags a subcommand accepts (bit set). */
enum {
    CLI_FLAG_PRESET = 1 << 0,
    CLI_FLAG_FORMAT = 1 << 1,
    CLI_FLAG_TOKENS = 1 << 2,     /* one M */
    CLI_FLAG_TOKEN_LIST = 1 << 3, /* comma-separated Ms */
    CLI_FLAG_BACKEND = 1 << 4,
    CLI_FLAG_ACTIVATION = 1 << 5,
    CLI_FLAG_DTYPE = 1 << 6,
    CLI_FLAG_SEED = 1 << 7,
    CLI_FLAG_ITERS = 1 << 8,
    CLI_FLAG_THREADS = 1 << 9,
    CLI_FLAG_JSON = 1 << 10,
    CLI_FLAG_PLOT = 1 << 11,
    CLI_FLAG_CHECKPOINT = 1 << 12,
    CLI_FLAG_LAYER = 1 << 13,
    CLI_FLAG_GPU_WEIGHTS = 1 << 14,
};

/* cli_args.c */
/* Parses argv (after the subcommand name) into `options` (defaults first).
 * On a usage error prints a message naming the flag to stderr and returns
 * CLI_EXIT_USAGE; else CLI_EXIT_OK. */
int cli_parse_options(const char *command, unsigned accepted_flags, int argc, char **argv,
                      cli_options *options);
const char *cli_format_name(moeint4_format format);
const char *cli_dtype_name(moeint4_dtype dtype);
const char *cli_activation_name(moeint4_activation activation);
const char *cli_gpu_weights_name(moeint4_gpu_weights mode);
/* The problem a preset + format describes (for the oracle). */
moeint4_problem cli_problem(const cli_options *options);
/* Online cores (at least 1). */
int cli_online_cores(void);

/* cli_version.c */
const char *cli_commit(void);

/* Monotonic wall clock in seconds. */
double cli_now(void);
/* Median of `count` values (sorts them in place). */
double cli_median(double *values, int count);

/* Subcommands (argv after the subcommand name). */
int cli_info_main(int argc, char **argv);
int cli_run_main(int argc, char **argv);
int cli_bench_main(int argc, char **argv);
/* cmd_checkpoint.c: inspect, and run/bench when --checkpoint is given. */
int cli_inspect_main(int argc, char **argv);
int cli_checkpoint_run_main(const cli_options *options);
int cli_checkpoint_bench_main(const cli_options *options);

#endif
