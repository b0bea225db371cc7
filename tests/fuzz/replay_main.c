/* Without libFuzzer (ordinary and sanitizer builds), each harness is a
 * plain program that runs every file of the seed corpus folders it is given
 * once, so the corpora are regression tests under ctest, ASan and valgrind. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    uint8_t *data = malloc(1 << 20);
    size_t size = data ? fread(data, 1, 1 << 20, f) : 0;
    fclose(f);
    if (!data)
        return -1;
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "%s: missing\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            files += run_file(argv[i]) == 0;
            continue;
        }
        DIR *dir = opendir(argv[i]);
        for (struct dirent *e; dir && (e = readdir(dir));) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            if (run_file(path) != 0) {
                fprintf(stderr, "%s: unreadable\n", path);
                return 1;
            }
            files++;
        }
        if (dir)
            closedir(dir);
    }
    printf("%d inputs replayed\n", files);
    return files > 0 ? 0 : 1;
}
