/* Every one-byte change to the program- and section-header fields of a
 * plugin's ELF header (e_phoff, e_shoff, e_phentsize, e_phnum, e_shentsize,
 * e_shnum, e_shstrndx: the loader trusts the first three groups, debuggers
 * and valgrind the section headers), and every e_phoff/e_phnum pair
 * pointing inside the first page, is loaded by moeint4_backend_load in a
 * child process: the child must come back with a status (the plugin loaded,
 * or refused with words), never die inside dlopen. A fuzzer found such a
 * crash once (e_phoff moved by two entries); this sweep is its fixed,
 * exhaustive cousin. argv[1]: a good plugin; argv[2]: a scratch folder. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "moeint4.h"
#include "moeint4_backend.h"

#define PHOFF_AT 32
#define SHOFF_AT 40
#define PHENTSIZE_AT 54 /* then e_phnum, e_shentsize, e_shnum, e_shstrndx */
#define PHNUM_AT 56

typedef struct sweep {
    const uint8_t *good;
    uint8_t *damaged;
    size_t size;
    char path[4200];
    long variants, deaths;
} sweep;

/* 0 when the child answered: loaded, or refused with a message. */
static int child_load(const char *path)
{
    moeint4_backend id;
    moeint4_status status = moeint4_backend_load(path, &id);
    if (status == MOEINT4_SUCCESS)
        return 0;
    return moeint4_last_error()[0] != '\0' ? 0 : 3;
}

static void try_damaged(sweep *s, const char *what)
{
    FILE *f = fopen(s->path, "wb");
    if (!f || fwrite(s->damaged, 1, s->size, f) != s->size || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", s->path);
        exit(2);
    }
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        exit(2);
    }
    if (child == 0)
        _exit(child_load(s->path));
    int status = 0;
    s->variants++;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        s->deaths++;
        fprintf(stderr, "FAIL %s: the loader %s %d\n", what,
                WIFSIGNALED(status) ? "died of signal" : "exited with",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
}

static void set_u64(uint8_t *at, uint64_t value) { memcpy(at, &value, sizeof value); }
static void set_u16(uint8_t *at, uint16_t value) { memcpy(at, &value, sizeof value); }

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s GOOD_PLUGIN SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0)
        return 2;
    long length = ftell(f);
    rewind(f);
    sweep s = { 0 };
    s.size = (size_t)length;
    uint8_t *good = malloc(s.size);
    s.damaged = malloc(s.size);
    if (length < 64 || !good || !s.damaged || fread(good, 1, s.size, f) != s.size)
        return 2;
    fclose(f);
    s.good = good;
    snprintf(s.path, sizeof s.path, "%s/libmoeint4-damaged.so", argv[2]);
    char what[96];
    static const int fields[][2] = { { PHOFF_AT, 8 }, { SHOFF_AT, 8 }, { PHENTSIZE_AT, 10 } };
    for (size_t field = 0; field < sizeof fields / sizeof fields[0]; field++) {
        for (int at = fields[field][0]; at < fields[field][0] + fields[field][1]; at++) {
            for (int value = 0; value < 256; value++) {
                if (value == good[at])
                    continue;
                memcpy(s.damaged, good, s.size);
                s.damaged[at] = (uint8_t)value;
                snprintf(what, sizeof what, "byte %d set to %d", at, value);
                try_damaged(&s, what);
            }
        }
    }
    for (uint16_t count = 0; count <= 16; count++) {
        for (uint64_t offset = 0; offset < 1024; offset += 8) {
            memcpy(s.damaged, good, s.size);
            set_u64(s.damaged + PHOFF_AT, offset);
            set_u16(s.damaged + PHNUM_AT, count);
            snprintf(what, sizeof what, "%u program headers at offset %llu", count,
                     (unsigned long long)offset);
            try_damaged(&s, what);
        }
    }
    unlink(s.path);
    free(good);
    free(s.damaged);
    printf("%ld damaged copies loaded, %ld killed the loader\n", s.variants, s.deaths);
    return s.deaths == 0 && s.variants > 0 ? 0 : 1;
}
