/* Uses an installed libmoeint4: header, library, version check, backends. */
#include <moeint4.h>
#include <moeint4_backend.h> /* installed beside it, for backend authors */
#include <stdio.h>
#include <string.h>

int main(void)
{
    if (moeint4_version() != MOEINT4_VERSION_NUMBER) {
        fprintf(stderr, "header %d, library %u\n", MOEINT4_VERSION_NUMBER, moeint4_version());
        return 1;
    }
    moeint4_backend_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (moeint4_backend_query(MOEINT4_BACKEND_CPU, &info) != MOEINT4_SUCCESS || !info.available) {
        fprintf(stderr, "cpu backend: %s %s\n", moeint4_last_error(), info.reason);
        return 1;
    }
    moeint4_context_options options;
    memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    options.backend = MOEINT4_BACKEND_CPU;
    moeint4_context *ctx = NULL;
    moeint4_status status = moeint4_context_create(&options, &ctx);
    if (status != MOEINT4_SUCCESS) {
        fprintf(stderr, "%s: %s\n", moeint4_status_string(status), moeint4_last_error());
        return 1;
    }
    moeint4_context_destroy(ctx);
    printf("libmoeint4 %s: ok\n", moeint4_version_string());
    return 0;
}
