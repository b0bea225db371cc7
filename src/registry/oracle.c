/* First-fit backend selection (vLLM's WNA16 MoE oracle is the model): an
 * ordered list of backends, each asked whether its hardware is here (probe)
 * and whether it can serve the problem (supports). */
#include "registry/oracle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"
#include "base/struct_size.h"
#include "layout/layout.h"

/* What the oracle found out about one backend. */
typedef struct mi4_verdict {
    const mi4_backend_entry *entry;
    int available;
    int supports; /* -1: not asked (not available) */
    char available_reason[MI4_REASON_CAPACITY];
    char supports_reason[MI4_REASON_CAPACITY];
} mi4_verdict;

static void judge(const mi4_backend_entry *entry, const moeint4_problem *problem, int device_index,
                  mi4_verdict *verdict)
{
    memset(verdict, 0, sizeof *verdict);
    verdict->entry = entry;
    verdict->supports = -1;
    verdict->available = mi4_registry_available(entry, device_index, verdict->available_reason,
                                                sizeof verdict->available_reason);
    if (!verdict->available || !problem)
        return;
    char *words = verdict->supports_reason;
    verdict->supports = entry->iface.supports(entry->iface.user_data, problem, words,
                                              sizeof verdict->supports_reason) == 1;
    words[sizeof verdict->supports_reason - 1] = '\0';
    if (verdict->supports)
        words[0] = '\0';
    else if (!words[0])
        snprintf(words, sizeof verdict->supports_reason, "no reason given");
}

moeint4_status mi4_oracle_resolve_request(moeint4_backend requested, moeint4_backend *resolved,
                                          int *from_env)
{
    if (from_env)
        *from_env = 0;
    if (requested != MOEINT4_BACKEND_AUTO) {
        if (!mi4_registry_find(requested))
            return mi4_fail(MOEINT4_INVALID_ARGUMENT, "backend = %d is not a known backend id",
                            (int)requested);
        *resolved = requested;
        return MOEINT4_SUCCESS;
    }
    const char *env = getenv("MOEINT4_BACKEND");
    if (!env || !env[0] || strcasecmp(env, "auto") == 0) {
        *resolved = MOEINT4_BACKEND_AUTO;
        return MOEINT4_SUCCESS;
    }
    const mi4_backend_entry *entry = mi4_registry_find_name(env);
    if (!entry)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "MOEINT4_BACKEND = \"%.64s\" is not a backend name (auto, cpu, xpu, hip or "
                        "a registered backend)",
                        env);
    *resolved = entry->id;
    if (from_env)
        *from_env = 1;
    return MOEINT4_SUCCESS;
}

moeint4_status mi4_oracle_require_available(moeint4_backend id, int device_index,
                                            const mi4_backend_entry **entry)
{
    const mi4_backend_entry *found = mi4_registry_find(id);
    if (!found)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "backend = %d is not a known backend id",
                        (int)id);
    char reason[MI4_REASON_CAPACITY];
    if (!mi4_registry_available(found, device_index, reason, sizeof reason))
        return mi4_fail(MOEINT4_BACKEND_UNAVAILABLE,
                        "backend %s was requested but is not available on device %d: %s",
                        found->name, device_index, reason);
    *entry = found;
    return MOEINT4_SUCCESS;
}

moeint4_status mi4_oracle_choose_bound(const moeint4_problem *problem,
                                       const mi4_backend_entry *bound, const char *bound_by,
                                       int device_index)
{
    mi4_verdict verdict;
    judge(bound, problem, device_index, &verdict);
    if (verdict.supports == 1)
        return MOEINT4_SUCCESS;
    return mi4_fail(verdict.available ? MOEINT4_UNSUPPORTED : MOEINT4_BACKEND_UNAVAILABLE,
                    "this AUTO context is bound to backend %s (by %s; its weights and memory "
                    "helpers all use one backend), which cannot serve this problem: %s; prepare "
                    "these weights with another context",
                    bound->name, bound_by,
                    verdict.available ? verdict.supports_reason : verdict.available_reason);
}

const mi4_backend_entry *mi4_oracle_first_available(int device_index)
{
    const mi4_backend_entry *entries[MI4_MAX_BACKENDS];
    int count = mi4_registry_list(entries, MI4_MAX_BACKENDS);
    for (int i = 0; i < count; i++)
        if (mi4_registry_available(entries[i], device_index, NULL, 0))
            return entries[i];
    return NULL;
}

/* Appends to a bounded text, always NUL-terminated, counting the full length. */
typedef struct mi4_text {
    char *buffer;
    size_t capacity;
    size_t length;
} mi4_text;

MI4_PRINTF(2, 3) static void text_append(mi4_text *text, const char *fmt, ...)
{
    char scratch[1];
    int room = text->length < text->capacity;
    va_list ap;
    va_start(ap, fmt);
    int n = room ? vsnprintf(text->buffer + text->length, text->capacity - text->length, fmt, ap)
                 : vsnprintf(scratch, sizeof scratch, fmt, ap);
    va_end(ap);
    if (n > 0)
        text->length += (size_t)n;
}

moeint4_status mi4_oracle_choose(const moeint4_problem *problem, moeint4_backend resolved,
                                 int device_index, const mi4_backend_entry **chosen)
{
    mi4_verdict verdict;
    if (resolved != MOEINT4_BACKEND_AUTO) {
        const mi4_backend_entry *entry = NULL;
        moeint4_status status = mi4_oracle_require_available(resolved, device_index, &entry);
        if (status != MOEINT4_SUCCESS)
            return status;
        judge(entry, problem, device_index, &verdict);
        if (verdict.supports != 1)
            return mi4_fail(MOEINT4_UNSUPPORTED,
                            "backend %s was requested but cannot serve this problem: %s",
                            entry->name, verdict.supports_reason);
        *chosen = entry;
        return MOEINT4_SUCCESS;
    }
    const mi4_backend_entry *entries[MI4_MAX_BACKENDS];
    int count = mi4_registry_list(entries, MI4_MAX_BACKENDS);
    char reasons[MI4_ERROR_CAPACITY] = "";
    mi4_text text = { reasons, sizeof reasons, 0 };
    int any_available = 0;
    for (int i = 0; i < count; i++) {
        judge(entries[i], problem, device_index, &verdict);
        if (verdict.supports == 1) {
            *chosen = entries[i];
            return MOEINT4_SUCCESS;
        }
        any_available |= verdict.available;
        text_append(&text, "%s%s: %s", i ? "; " : "", entries[i]->name,
                    verdict.available ? verdict.supports_reason : verdict.available_reason);
    }
    return mi4_fail(any_available ? MOEINT4_UNSUPPORTED : MOEINT4_BACKEND_UNAVAILABLE,
                    "no backend can serve this problem: %s", reasons);
}

/* ---- public entry points ---- */

/* Only what keeps backends' supports() from seeing nonsense; the weights
 * themselves are validated by weights_prepare. */
static moeint4_status problem_read(const moeint4_problem *caller, int device_index,
                                   moeint4_problem *problem)
{
    if (!caller)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "problem is NULL");
    moeint4_status status =
        MI4_STRUCT_READ(*problem, caller, MOEINT4_PROBLEM_MIN_SIZE, "problem", "moeint4_problem");
    if (status != MOEINT4_SUCCESS)
        return status;
    if (!mi4_layout_is_format(problem->format))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "problem->format = %d is not a moeint4_format",
                        (int)problem->format);
    if (!mi4_layout_is_group_size(problem->group_size))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "problem->group_size = %d is not " MI4_LAYOUT_GROUP_SIZES_TEXT,
                        problem->group_size);
    if (problem->num_experts <= 0 || problem->num_local_experts <= 0 ||
        problem->num_local_experts > problem->num_experts)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "problem->num_experts = %d, num_local_experts = %d: need 0 < local <= "
                        "global",
                        problem->num_experts, problem->num_local_experts);
    if (problem->hidden_size <= 0 || problem->intermediate_size <= 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "problem->hidden_size = %d, intermediate_size = %d must be > 0",
                        problem->hidden_size, problem->intermediate_size);
    if (device_index < 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "device_index = %d is negative", device_index);
    return MOEINT4_SUCCESS;
}

MOEINT4_API moeint4_status moeint4_oracle_select(const moeint4_problem *caller_problem,
                                                 moeint4_backend requested, int device_index,
                                                 moeint4_backend *chosen)
{
    mi4_clear_error();
    if (!chosen)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "chosen is NULL");
    moeint4_problem problem;
    moeint4_status status = problem_read(caller_problem, device_index, &problem);
    moeint4_backend resolved;
    if (status == MOEINT4_SUCCESS)
        status = mi4_oracle_resolve_request(requested, &resolved, NULL);
    const mi4_backend_entry *entry = NULL;
    if (status == MOEINT4_SUCCESS)
        status = mi4_oracle_choose(&problem, resolved, device_index, &entry);
    if (status == MOEINT4_SUCCESS)
        *chosen = entry->id;
    return status;
}

static const char *verdict_probe_words(const mi4_verdict *verdict)
{
    if (!verdict->entry->compiled)
        return "-";
    return verdict->available ? "ok" : "failed";
}

static void explain_row(mi4_text *text, const mi4_verdict *verdict, int is_chosen)
{
    const mi4_backend_entry *entry = verdict->entry;
    text_append(text, "  %-8s compiled: %-3s probe: %-6s supports: %-3s", entry->name,
                entry->compiled ? "yes" : "no", verdict_probe_words(verdict),
                verdict->supports < 0 ? "-"
                : verdict->supports   ? "yes"
                                      : "no");
    if (!verdict->available)
        text_append(text, "  (%s)", verdict->available_reason);
    else if (verdict->supports == 0)
        text_append(text, "  (%s)", verdict->supports_reason);
    text_append(text, "%s\n", is_chosen ? "  <- chosen" : "");
}

/* How the HIP backend will hold the weights of a context with gpu_weights
 * AUTO (the plugin resolves the same way: hip_int4_weights.hip). */
static void explain_hip_weights(mi4_text *text)
{
    const char *env = getenv("MOEINT4_HIP_WEIGHTS");
    const int set = env && env[0];
    const char *mode = set && strcasecmp(env, "bf16") == 0 ? "bf16 (4x the int4 bytes)"
                       : !set || strcasecmp(env, "int4") == 0 || strcasecmp(env, "auto") == 0
                           ? "int4 (about the checkpoint's bytes)"
                           : "none: MOEINT4_HIP_WEIGHTS is not auto, bf16 or int4";
    text_append(text,
                "hip weights: %s (gpu_weights AUTO: %s%s%s; the context option "
                "gpu_weights = BF16 or INT4 overrides)\n",
                mode, set ? "MOEINT4_HIP_WEIGHTS=" : "int4 unless BF16 is asked for",
                set ? env : "", set ? "" : ", MOEINT4_HIP_WEIGHTS unset");
}

MOEINT4_API moeint4_status moeint4_oracle_explain(const moeint4_problem *caller_problem,
                                                  moeint4_backend requested, int device_index,
                                                  char *buffer, size_t capacity, size_t *length)
{
    mi4_clear_error();
    if (!buffer && capacity > 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "buffer is NULL but capacity = %zu", capacity);
    moeint4_problem normalized;
    moeint4_status status = problem_read(caller_problem, device_index, &normalized);
    const moeint4_problem *problem = &normalized;
    moeint4_backend resolved = MOEINT4_BACKEND_AUTO;
    int from_env = 0;
    if (status == MOEINT4_SUCCESS)
        status = mi4_oracle_resolve_request(requested, &resolved, &from_env);
    if (status != MOEINT4_SUCCESS)
        return status;

    mi4_text text = { buffer, capacity, 0 };
    if (capacity > 0)
        buffer[0] = '\0';
    const mi4_backend_entry *forced =
        resolved == MOEINT4_BACKEND_AUTO ? NULL : mi4_registry_find(resolved);
    if (!forced)
        text_append(&text, "requested: auto (first fit in priority order), device %d\n",
                    device_index);
    else
        text_append(&text, "requested: %s (%s), device %d\n", forced->name,
                    from_env ? "from MOEINT4_BACKEND" : "explicit", device_index);

    const mi4_backend_entry *entries[MI4_MAX_BACKENDS];
    int count = mi4_registry_list(entries, MI4_MAX_BACKENDS);
    const mi4_backend_entry *chosen = NULL;
    const char *why = NULL;
    mi4_verdict verdict;
    for (int i = 0; i < count; i++) {
        judge(entries[i], problem, device_index, &verdict);
        int pick = 0;
        if (!chosen && verdict.supports == 1 && (!forced || forced == entries[i])) {
            chosen = entries[i];
            pick = 1;
        }
        if (forced == entries[i] && verdict.supports != 1)
            why = verdict.available ? "the requested backend cannot serve this problem"
                                    : "the requested backend is not available";
        explain_row(&text, &verdict, pick);
    }
    if (chosen)
        text_append(&text, "chosen: %s (%s)\n", chosen->name,
                    forced ? "the requested backend is available and supports the problem"
                           : "first in priority order that is available and supports the problem");
    else
        text_append(&text, "chosen: none (%s)\n",
                    why ? why : "no backend is both available and able to serve this problem");
    if (!forced && chosen) {
        const mi4_backend_entry *first = mi4_oracle_first_available(device_index);
        text_append(&text,
                    "binding: an AUTO context binds to %s at its first prepare of this problem: "
                    "its later weights and its memory helpers (moeint4_memory_*) use %s too; "
                    "memory helpers called before any prepare bind it to the first available "
                    "backend (%s)\n",
                    chosen->name, chosen->name, first ? first->name : "none");
    } else if (forced) {
        text_append(&text, "binding: the context uses %s for its weights and memory helpers\n",
                    forced->name);
    }
    if (chosen && chosen->id == MOEINT4_BACKEND_HIP)
        explain_hip_weights(&text);
    if (length)
        *length = text.length;
    return MOEINT4_SUCCESS;
}
