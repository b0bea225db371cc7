/* Writes what the XPU plugin embeds into a folder: the OpenCL C text
 * (source.cl), the SPIR-V modules (module.spv, module_simd16.spv), each ocloc binary
 * (<target>.bin), and on stdout the SHA-256 sums recorded when the binaries
 * were compiled and each target's ocloc options. test_xpu_aot_binaries.sh checks them. */
#include <stdio.h>
#include <string.h>

#include "xpu_runtime.h"

static int write_file(const char *folder, const char *name, const void *bytes, size_t size)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    FILE *file = fopen(path, "wb");
    if (!file || fwrite(bytes, 1, size, file) != size) {
        fprintf(stderr, "cannot write %s\n", path);
        if (file)
            fclose(file);
        return 1;
    }
    return fclose(file) != 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: xpu_dump_embedded FOLDER\n");
        return 2;
    }
    int failed =
        write_file(argv[1], "source.cl", mi4_xpu_kernel_source, strlen(mi4_xpu_kernel_source));
    failed |= write_file(argv[1], "module.spv", mi4_xpu_kernel_spirv, mi4_xpu_kernel_spirv_size);
    failed |= write_file(argv[1], "module_simd16.spv", mi4_xpu_kernel_spirv_simd16,
                         mi4_xpu_kernel_spirv_simd16_size);
    printf("source_sha256 %s\nspirv_sha256 %s\nspirv_simd16_sha256 %s\ntargets",
           mi4_xpu_aot_source_sha256, mi4_xpu_aot_spirv_sha256, mi4_xpu_aot_spirv_simd16_sha256);
    for (int i = 0; i < mi4_xpu_aot_count; ++i) {
        char name[64];
        snprintf(name, sizeof name, "%s.bin", mi4_xpu_aot_targets[i]);
        failed |= write_file(argv[1], name, mi4_xpu_aot_binaries[i], mi4_xpu_aot_sizes[i]);
        printf(" %s", mi4_xpu_aot_targets[i]);
    }
    printf("\n");
    for (int i = 0; i < mi4_xpu_aot_count; ++i)
        printf("options %s %s\n", mi4_xpu_aot_targets[i], mi4_xpu_aot_options[i]);
    return failed;
}
