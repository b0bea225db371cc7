/* Run-time version, to compare with the header's MOEINT4_VERSION_NUMBER. */
#include "moeint4.h"

#define MI4_STRINGIFY_VALUE(x) #x
#define MI4_STRINGIFY(x) MI4_STRINGIFY_VALUE(x)

MOEINT4_API unsigned moeint4_version(void) { return MOEINT4_VERSION_NUMBER; }

MOEINT4_API const char *moeint4_version_string(void)
{
    return MI4_STRINGIFY(MOEINT4_VERSION_MAJOR) "." MI4_STRINGIFY(
        MOEINT4_VERSION_MINOR) "." MI4_STRINGIFY(MOEINT4_VERSION_PATCH);
}
