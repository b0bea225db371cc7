/* Helpers for the checkpoint tests: the generated folder, JSON files, f32 files. */
#ifndef MOEINT4_TESTS_CHECKPOINT_TEST_UTIL_H
#define MOEINT4_TESTS_CHECKPOINT_TEST_UTIL_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* argv[1] of the test: the generator's output folder. */
extern const char *ck_generated_dir;

/* "<generated>/<a>/<b>" (b may be NULL) in a static buffer. */
const char *ck_path(const char *a, const char *b);
/* Parsed JSON file (free with cJSON_Delete), NULL when unreadable. */
cJSON *ck_read_json(const char *path);
/* A whole f32 file of exactly `count` values, malloc'ed; NULL otherwise. */
float *ck_read_f32(const char *path, size_t count);

#endif
