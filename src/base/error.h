/* Error reporting inside the library: every failing path sets the calling
 * thread's message and returns a status. */
#ifndef MOEINT4_BASE_ERROR_H
#define MOEINT4_BASE_ERROR_H

#include "moeint4.h"

#if defined(__GNUC__)
#define MI4_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define MI4_PRINTF(fmt_index, first_arg)
#endif

#define MI4_ERROR_CAPACITY 512

/* Sets this thread's last error message and returns `status`, so a failing
 * path can read: return mi4_fail(MOEINT4_INVALID_ARGUMENT, "K = %d ...", k); */
moeint4_status mi4_fail(moeint4_status status, const char *fmt, ...) MI4_PRINTF(2, 3);

/* Clears the message (every public entry point calls this first). */
void mi4_clear_error(void);

/* Formats into a caller buffer (the backend interface's err/err_cap
 * convention); always NUL-terminates when cap > 0. Returns `status`. */
moeint4_status mi4_fail_into(char *buf, size_t cap, moeint4_status status, const char *fmt, ...)
    MI4_PRINTF(4, 5);

#endif
