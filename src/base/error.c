#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>

#include "moeint4_backend.h"

/* The only per-thread state of the library: the message behind the last
 * failing call, as moeint4_last_error() promises. */
static _Thread_local char last_error_message[MI4_ERROR_CAPACITY];

moeint4_status mi4_fail(moeint4_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error_message, sizeof last_error_message, fmt, ap);
    va_end(ap);
    return status;
}

void mi4_clear_error(void) { last_error_message[0] = '\0'; }

moeint4_status mi4_fail_into(char *buf, size_t cap, moeint4_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    moeint4_backend_vfail(buf, cap, status, fmt, ap);
    va_end(ap);
    return status;
}

const char *moeint4_last_error(void) { return last_error_message; }

const char *moeint4_status_string(moeint4_status status)
{
    switch (status) {
    case MOEINT4_SUCCESS: return "MOEINT4_SUCCESS";
    case MOEINT4_INVALID_ARGUMENT: return "MOEINT4_INVALID_ARGUMENT";
    case MOEINT4_UNSUPPORTED: return "MOEINT4_UNSUPPORTED";
    case MOEINT4_OUT_OF_MEMORY: return "MOEINT4_OUT_OF_MEMORY";
    case MOEINT4_BACKEND_UNAVAILABLE: return "MOEINT4_BACKEND_UNAVAILABLE";
    case MOEINT4_DEVICE_ERROR: return "MOEINT4_DEVICE_ERROR";
    case MOEINT4_VERSION_MISMATCH: return "MOEINT4_VERSION_MISMATCH";
    case MOEINT4_INTERNAL_ERROR: return "MOEINT4_INTERNAL_ERROR";
    }
    return "MOEINT4_UNKNOWN_STATUS";
}
