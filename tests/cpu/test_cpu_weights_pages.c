/* The CPU backend's prepared weights of 2 MB or more sit in 2 MB aligned
 * blocks that Linux was advised to back with transparent huge pages
 * (base/alloc.h, mi4_large_alloc): the "hg" flag of their mapping in
 * /proc/self/smaps. Small layers keep ordinary 64-byte aligned blocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "tk_cmocka.h"
#include "testkit.h"

/* 1 when the mapping that holds `address` carries VmFlags `flag`, 0 when
 * it does not, -1 when /proc/self/smaps cannot tell. */
static int mapping_has_flag(const void *address, const char *flag)
{
    FILE *smaps = fopen("/proc/self/smaps", "r");
    if (!smaps)
        return -1;
    char line[512];
    int inside = 0, found = -1;
    uintptr_t at = (uintptr_t)address;
    while (fgets(line, sizeof line, smaps)) {
        unsigned long begin, end;
        if (sscanf(line, "%lx-%lx ", &begin, &end) == 2) { /* a mapping's first line */
            inside = at >= begin && at < end;
        } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            char spaced[16];
            snprintf(spaced, sizeof spaced, " %s", flag);
            found = strstr(line, spaced) != NULL;
            break;
        }
    }
    fclose(smaps);
    return found;
}

static mi4_cpu_weights *prepare(mi4_cpu_context *ctx, tk_layer *layer, int experts, int hidden,
                                int intermediate)
{
    tk_rng rng;
    tk_rng_seed(&rng, 31);
    assert_int_equal(tk_layer_random(layer, MOEINT4_FORMAT_GPTQ_SYM, 0, experts, hidden,
                                     intermediate, 128, MOEINT4_DTYPE_BF16, 0, &rng),
                     0);
    moeint4_weights_desc desc = tk_layer_desc(layer);
    mi4_cpu_weights *w = NULL;
    char err[256] = "";
    assert_int_equal(mi4_cpu_weights_prepare(ctx, &desc, &w, err, sizeof err), MOEINT4_SUCCESS);
    return w;
}

static void test_large_weights_on_huge_page_blocks(void **state)
{
    (void)state;
    mi4_cpu_context *ctx = NULL;
    assert_int_equal(mi4_cpu_context_create_with(1, NULL, &ctx), MOEINT4_SUCCESS);
    tk_layer layer;
    /* 8 experts x 2 x 1024 x 1024 codes: 8 MB of w13 tiles, 4 MB of w2 */
    mi4_cpu_weights *w = prepare(ctx, &layer, 8, 1024, 1024);
    const size_t huge_page = (size_t)2 << 20;
    assert_true((uintptr_t)w->w13 % huge_page == 0);
    assert_true((uintptr_t)w->w2 % huge_page == 0);
    int advised = mapping_has_flag(w->w13, "hg");
    mi4_cpu_weights_release(w);
    tk_layer_free(&layer);
    mi4_cpu_context_destroy(ctx);
    if (advised < 0)
        tk_skip("no /proc/self/smaps: the huge-page advice cannot be seen here");
    assert_int_equal(advised, 1);
}

static void test_small_weights_on_ordinary_blocks(void **state)
{
    (void)state;
    mi4_cpu_context *ctx = NULL;
    assert_int_equal(mi4_cpu_context_create_with(1, NULL, &ctx), MOEINT4_SUCCESS);
    tk_layer layer;
    mi4_cpu_weights *w = prepare(ctx, &layer, 2, 128, 128);
    assert_true((uintptr_t)w->w13 % MI4_CPU_TILE_ALIGN == 0);
    assert_true((uintptr_t)w->w2 % MI4_CPU_TILE_ALIGN == 0);
    mi4_cpu_weights_release(w);
    tk_layer_free(&layer);
    mi4_cpu_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_weights_on_huge_page_blocks),
        cmocka_unit_test(test_small_weights_on_ordinary_blocks),
    };
    return tk_cmocka_run("cpu weights pages", tests, sizeof tests / sizeof tests[0], NULL, NULL,
                         argc, argv);
}
