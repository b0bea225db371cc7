/* The commit this build was configured from (tools/CMakeLists.txt). */
#include "cli.h"

#ifndef MOEINT4_GIT_COMMIT
#define MOEINT4_GIT_COMMIT "unknown"
#endif

const char *cli_commit(void) { return MOEINT4_GIT_COMMIT; }
