/* The struct_size rule through the shared library, as callers built against
 * other versions of the header see it. For every public struct:
 *  - an older caller: struct_size = MOEINT4_*_MIN_SIZE and the struct's bytes
 *    end right before an inaccessible page, so a library that reads (or, for
 *    moeint4_backend_info, writes) one byte past the caller's size crashes;
 *  - a newer caller: the struct followed by fields this library does not
 *    know (zero, or garbage: ignored), struct_size covering them;
 *  - a size below the minimum: INVALID_ARGUMENT naming <arg>->struct_size
 *    (VERSION_MISMATCH for a backend table), nothing done.
 * Both callers get exactly what a caller with sizeof gets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core_test_util.h"
#include "fake_backend.h"
#include "moeint4.h"
#include "testkit.h"

#define NEWER_FIELDS 64

/* `bytes` of `source` at the very end of an accessible page, with an
 * inaccessible page right after, struct_size set to `bytes`. */
typedef struct guarded {
    unsigned char *mapping;
    size_t page;
    void *at;
} guarded;

static void *guarded_copy(guarded *g, const void *source, size_t bytes)
{
    g->page = (size_t)sysconf(_SC_PAGESIZE);
    g->mapping =
        mmap(NULL, 2 * g->page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(g->mapping != MAP_FAILED);
    assert_int_equal(mprotect(g->mapping + g->page, g->page, PROT_NONE), 0);
    g->at = g->mapping + g->page - bytes;
    memcpy(g->at, source, bytes);
    memcpy(g->at, &bytes, sizeof bytes); /* struct_size */
    return g->at;
}

static void guarded_free(guarded *g) { munmap(g->mapping, 2 * g->page); }

/* `source` followed by NEWER_FIELDS bytes of `fill`, struct_size covering all. */
static void *newer_copy(const void *source, size_t bytes, int fill)
{
    unsigned char *copy = malloc(bytes + NEWER_FIELDS);
    assert_non_null(copy);
    memcpy(copy, source, bytes);
    memset(copy + bytes, fill, NEWER_FIELDS);
    size_t size = bytes + NEWER_FIELDS;
    memcpy(copy, &size, sizeof size);
    return copy;
}

static void expect_too_small(moeint4_status got, const char *field)
{
    assert_int_equal(got, MOEINT4_INVALID_ARGUMENT);
    assert_non_null(strstr(moeint4_last_error(), field));
    assert_non_null(strstr(moeint4_last_error(), "first published size"));
}

static void test_min_sizes_are_the_first_published_layout(void **state)
{
    (void)state;
    /* The ends of the 0.1 structs on this ABI: they never move. */
    assert_int_equal(MOEINT4_CONTEXT_OPTIONS_MIN_SIZE,
                     offsetof(moeint4_context_options, native_queue) + sizeof(void *));
    assert_int_equal(MOEINT4_FORWARD_ARGS_MIN_SIZE,
                     offsetof(moeint4_forward_args, stream) + sizeof(void *));
    assert_true(MOEINT4_CONTEXT_OPTIONS_MIN_SIZE <= sizeof(moeint4_context_options));
    assert_true(MOEINT4_QUANT_MATRIX_MIN_SIZE <= sizeof(moeint4_quant_matrix));
    assert_true(MOEINT4_WEIGHTS_DESC_MIN_SIZE <= sizeof(moeint4_weights_desc));
    assert_true(MOEINT4_FORWARD_ARGS_MIN_SIZE <= sizeof(moeint4_forward_args));
    assert_true(MOEINT4_PROBLEM_MIN_SIZE <= sizeof(moeint4_problem));
    assert_true(MOEINT4_BACKEND_INFO_MIN_SIZE <= sizeof(moeint4_backend_info));
    assert_true(MOEINT4_BACKEND_IFACE_MIN_SIZE <= sizeof(moeint4_backend_iface));
}

static void test_context_options(void **state)
{
    (void)state;
    moeint4_context_options options = util_options(MOEINT4_BACKEND_CPU);
    moeint4_context *ctx = NULL;
    guarded g;
    moeint4_context_options *older = guarded_copy(&g, &options, MOEINT4_CONTEXT_OPTIONS_MIN_SIZE);
    assert_int_equal(moeint4_context_create(older, &ctx), MOEINT4_SUCCESS);
    moeint4_backend backend;
    assert_int_equal(moeint4_context_backend(ctx, &backend), MOEINT4_SUCCESS);
    assert_int_equal(backend, MOEINT4_BACKEND_CPU); /* the fields were read */
    moeint4_context_destroy(ctx);
    guarded_free(&g);

    for (int fill = 0; fill <= 0x5a; fill += 0x5a) {
        moeint4_context_options *newer = newer_copy(&options, sizeof options, fill);
        ctx = NULL;
        assert_int_equal(moeint4_context_create(newer, &ctx), MOEINT4_SUCCESS);
        moeint4_context_destroy(ctx);
        free(newer);
    }
    options.struct_size = MOEINT4_CONTEXT_OPTIONS_MIN_SIZE - 1;
    ctx = NULL;
    expect_too_small(moeint4_context_create(&options, &ctx), "options->struct_size");
    assert_null(ctx);
}

/* A small layer, its descriptor and one batch, plus the output of a
 * forward with every struct at sizeof (the answer all callers must get). */
typedef struct scene {
    tk_layer layer;
    moeint4_context *ctx;
    float hidden[3 * 64], router[3 * 2], want[3 * 64], got[3 * 64];
    int32_t ids[3 * 2];
} scene;

static int scene_setup(void **state)
{
    scene *s = calloc(1, sizeof *s);
    tk_rng rng;
    tk_rng_seed(&rng, 99);
    if (!s || tk_layer_random(&s->layer, MOEINT4_FORMAT_GPTQ_ASYM, 0, 8, 64, 32, 32,
                              MOEINT4_DTYPE_F16, 0, &rng) != 0)
        return -1;
    tk_fill_activations(&rng, MOEINT4_DTYPE_F32, 3 * 64, 1.0, s->hidden);
    tk_route_random(&rng, 3, 8, 2, s->ids, s->router);
    moeint4_context_options options = util_options(MOEINT4_BACKEND_CPU);
    if (moeint4_context_create(&options, &s->ctx) != MOEINT4_SUCCESS)
        return -1;
    *state = s;
    return 0;
}

static int scene_teardown(void **state)
{
    scene *s = *state;
    moeint4_context_destroy(s->ctx);
    tk_layer_free(&s->layer);
    free(s);
    return 0;
}

static moeint4_forward_args scene_args(scene *s, float *output)
{
    return tk_forward_args(MOEINT4_DTYPE_F32, 3, 2, s->hidden, s->ids, s->router, output, NULL);
}

static moeint4_weights *prepare(scene *s, const moeint4_weights_desc *desc)
{
    moeint4_weights *weights = NULL;
    moeint4_status status = moeint4_weights_prepare(s->ctx, desc, &weights);
    if (status != MOEINT4_SUCCESS)
        fail_msg("prepare: %s", moeint4_last_error());
    return weights;
}

static void forward_into(scene *s, moeint4_weights *weights, const moeint4_forward_args *args)
{
    memset(s->got, 0, sizeof s->got);
    moeint4_status status = moeint4_forward(s->ctx, weights, args);
    if (status != MOEINT4_SUCCESS)
        fail_msg("forward: %s", moeint4_last_error());
    assert_memory_equal(s->got, s->want, sizeof s->want);
}

static void test_weights_desc_and_forward_args(void **state)
{
    scene *s = *state;
    moeint4_weights_desc desc = tk_layer_desc(&s->layer);
    moeint4_weights *reference = prepare(s, &desc);
    moeint4_forward_args args = scene_args(s, s->want);
    assert_int_equal(moeint4_forward(s->ctx, reference, &args), MOEINT4_SUCCESS);

    /* older descriptor and arguments */
    guarded gd, ga;
    moeint4_weights *older = prepare(s, guarded_copy(&gd, &desc, MOEINT4_WEIGHTS_DESC_MIN_SIZE));
    args = scene_args(s, s->got);
    forward_into(s, older, guarded_copy(&ga, &args, MOEINT4_FORWARD_ARGS_MIN_SIZE));
    forward_into(s, reference, ga.at);
    guarded_free(&gd);
    guarded_free(&ga);

    /* newer ones, zero tail and garbage tail */
    for (int fill = 0; fill <= 0x5a; fill += 0x5a) {
        moeint4_weights_desc *newer_desc = newer_copy(&desc, sizeof desc, fill);
        moeint4_weights *newer = prepare(s, newer_desc);
        moeint4_forward_args *newer_args = newer_copy(&args, sizeof args, fill);
        forward_into(s, newer, newer_args);
        free(newer_args);
        free(newer_desc);
        moeint4_weights_release(newer);
    }

    /* too small: refused, nothing prepared or written */
    moeint4_weights *none = NULL;
    desc.struct_size = MOEINT4_WEIGHTS_DESC_MIN_SIZE - 8;
    expect_too_small(moeint4_weights_prepare(s->ctx, &desc, &none), "desc->struct_size");
    assert_null(none);
    args.struct_size = MOEINT4_FORWARD_ARGS_MIN_SIZE - 8;
    memset(s->got, 0x77, sizeof s->got);
    expect_too_small(moeint4_forward(s->ctx, reference, &args), "args->struct_size");
    for (size_t i = 0; i < sizeof s->got; i++)
        assert_int_equal(((unsigned char *)s->got)[i], 0x77);
    moeint4_weights_release(older);
    moeint4_weights_release(reference);
}

static void test_quant_matrix(void **state)
{
    scene *s = *state;
    moeint4_quant_matrix m = tk_matrix_view(&s->layer.w13);
    size_t count = (size_t)m.num_experts * (size_t)m.in_features * (size_t)m.out_features;
    float *want = malloc(count * sizeof *want), *got = malloc(count * sizeof *got);
    assert_true(want && got);
    assert_int_equal(moeint4_layout_dequantize_f32(&m, want), MOEINT4_SUCCESS);
    guarded g;
    const moeint4_quant_matrix *older = guarded_copy(&g, &m, MOEINT4_QUANT_MATRIX_MIN_SIZE);
    assert_int_equal(moeint4_layout_validate(older), MOEINT4_SUCCESS);
    assert_int_equal(moeint4_layout_dequantize_f32(older, got), MOEINT4_SUCCESS);
    assert_memory_equal(got, want, count * sizeof *got);
    guarded_free(&g);
    for (int fill = 0; fill <= 0x5a; fill += 0x5a) {
        moeint4_quant_matrix *newer = newer_copy(&m, sizeof m, fill);
        memset(got, 0, count * sizeof *got);
        assert_int_equal(moeint4_layout_dequantize_f32(newer, got), MOEINT4_SUCCESS);
        assert_memory_equal(got, want, count * sizeof *got);
        free(newer);
    }
    m.struct_size = MOEINT4_QUANT_MATRIX_MIN_SIZE - 1;
    expect_too_small(moeint4_layout_validate(&m), "src->struct_size");
    free(want);
    free(got);
}

static moeint4_problem awq_problem(void)
{
    moeint4_problem p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.format = MOEINT4_FORMAT_AWQ;
    p.group_size = 64;
    p.num_experts = p.num_local_experts = 8;
    p.hidden_size = 128;
    p.intermediate_size = 64;
    return p;
}

static void test_problem(void **state)
{
    (void)state;
    moeint4_problem problem = awq_problem();
    moeint4_backend want = MOEINT4_BACKEND_AUTO, got = MOEINT4_BACKEND_AUTO;
    assert_int_equal(moeint4_oracle_select(&problem, MOEINT4_BACKEND_CPU, 0, &want),
                     MOEINT4_SUCCESS);
    guarded g;
    const moeint4_problem *older = guarded_copy(&g, &problem, MOEINT4_PROBLEM_MIN_SIZE);
    assert_int_equal(moeint4_oracle_select(older, MOEINT4_BACKEND_CPU, 0, &got), MOEINT4_SUCCESS);
    assert_int_equal(got, want);
    char table[4096];
    assert_int_equal(
        moeint4_oracle_explain(older, MOEINT4_BACKEND_CPU, 0, table, sizeof table, NULL),
        MOEINT4_SUCCESS);
    guarded_free(&g);
    for (int fill = 0; fill <= 0x5a; fill += 0x5a) {
        moeint4_problem *newer = newer_copy(&problem, sizeof problem, fill);
        assert_int_equal(moeint4_oracle_select(newer, MOEINT4_BACKEND_CPU, 0, &got),
                         MOEINT4_SUCCESS);
        free(newer);
    }
    problem.struct_size = MOEINT4_PROBLEM_MIN_SIZE - 4;
    expect_too_small(moeint4_oracle_select(&problem, MOEINT4_BACKEND_CPU, 0, &got),
                     "problem->struct_size");
}

/* An output struct: the library writes the caller's size and no more. */
static void test_backend_info(void **state)
{
    (void)state;
    moeint4_backend_info want;
    memset(&want, 0, sizeof want);
    want.struct_size = sizeof want;
    assert_int_equal(moeint4_backend_query(MOEINT4_BACKEND_CPU, &want), MOEINT4_SUCCESS);
    guarded g;
    moeint4_backend_info blank;
    memset(&blank, 0, sizeof blank);
    moeint4_backend_info *older = guarded_copy(&g, &blank, MOEINT4_BACKEND_INFO_MIN_SIZE);
    assert_int_equal(moeint4_backend_query(MOEINT4_BACKEND_CPU, older), MOEINT4_SUCCESS);
    assert_int_equal(older->struct_size, MOEINT4_BACKEND_INFO_MIN_SIZE);
    assert_string_equal(older->name, "cpu");
    assert_memory_equal((char *)older + sizeof(size_t), (char *)&want + sizeof(size_t),
                        MOEINT4_BACKEND_INFO_MIN_SIZE - sizeof(size_t));
    guarded_free(&g);

    unsigned char *newer = newer_copy(&blank, sizeof blank, 0x5a);
    assert_int_equal(moeint4_backend_query(MOEINT4_BACKEND_CPU, (moeint4_backend_info *)newer),
                     MOEINT4_SUCCESS);
    assert_memory_equal(newer + sizeof(size_t), (char *)&want + sizeof(size_t),
                        sizeof want - sizeof(size_t));
    for (size_t i = sizeof want; i < sizeof want + NEWER_FIELDS; i++)
        assert_int_equal(newer[i], 0x5a); /* fields it does not know: not written */
    free(newer);

    blank.struct_size = MOEINT4_BACKEND_INFO_MIN_SIZE - 4;
    expect_too_small(moeint4_backend_query(MOEINT4_BACKEND_CPU, &blank), "info->struct_size");
    assert_int_equal(blank.name[0], 0);
}

/* A third-party backend table (tests/core/fake_backend.c): an older one
 * works (functions it lacks are absent); one below the minimum is
 * VERSION_MISMATCH. */
static void test_backend_iface(void **state)
{
    (void)state;
    static fake_control older_control = { .name = "older-table", .priority = 5000, .probe_ok = 1 };
    static fake_control newer_control = { .name = "newer-table", .priority = 5001, .probe_ok = 1 };
    moeint4_backend_iface iface = fake_backend_iface(&older_control);
    moeint4_backend id = MOEINT4_BACKEND_AUTO;
    guarded g;
    moeint4_backend_iface *older = guarded_copy(&g, &iface, MOEINT4_BACKEND_IFACE_MIN_SIZE);
    assert_int_equal(moeint4_register_backend(older, &id), MOEINT4_SUCCESS);
    guarded_free(&g);
    moeint4_backend_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    assert_int_equal(moeint4_backend_query(id, &info), MOEINT4_SUCCESS);
    assert_string_equal(info.name, "older-table");
    assert_int_equal(info.available, 1);

    iface = fake_backend_iface(&newer_control);
    moeint4_backend_iface *newer = newer_copy(&iface, sizeof iface, 0);
    assert_int_equal(moeint4_register_backend(newer, &id), MOEINT4_SUCCESS);
    free(newer);

    iface.name = "short-table";
    iface.struct_size = MOEINT4_BACKEND_IFACE_MIN_SIZE - sizeof(void *);
    assert_int_equal(moeint4_register_backend(&iface, &id), MOEINT4_VERSION_MISMATCH);
    assert_non_null(strstr(moeint4_last_error(), "struct_size"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_min_sizes_are_the_first_published_layout),
        cmocka_unit_test(test_context_options),
        cmocka_unit_test(test_weights_desc_and_forward_args),
        cmocka_unit_test(test_quant_matrix),
        cmocka_unit_test(test_problem),
        cmocka_unit_test(test_backend_info),
        cmocka_unit_test(test_backend_iface),
    };
    return cmocka_run_group_tests(tests, scene_setup, scene_teardown);
}
