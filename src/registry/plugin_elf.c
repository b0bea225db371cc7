#include "registry/plugin_elf.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

/* Reads exactly `bytes` at `offset`; 0 on a short read. */
static int read_at(int fd, void *buffer, size_t bytes, uint64_t offset)
{
    ssize_t got = pread(fd, buffer, bytes, (off_t)offset);
    return got >= 0 && (size_t)got == bytes;
}

/* offset + length <= size, without overflow. */
static int inside(uint64_t offset, uint64_t length, uint64_t size)
{
    return offset <= size && length <= size - offset;
}

static int check_headers(int fd, uint64_t size, char *reason, size_t reason_cap)
{
    ElfW(Ehdr) header;
    if (size < sizeof header || !read_at(fd, &header, sizeof header, 0))
        return mi4_fail_into(reason, reason_cap, 0,
                             "file of %llu bytes is too short for an ELF "
                             "header",
                             (unsigned long long)size),
               0;
    if (header.e_ident[EI_MAG0] != ELFMAG0 || header.e_ident[EI_MAG1] != ELFMAG1 ||
        header.e_ident[EI_MAG2] != ELFMAG2 || header.e_ident[EI_MAG3] != ELFMAG3)
        return mi4_fail_into(reason, reason_cap, 0, "not an ELF file"), 0;
    int native_class = sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32;
    if (header.e_ident[EI_CLASS] != native_class || header.e_type != ET_DYN)
        return mi4_fail_into(reason, reason_cap, 0,
                             "not a shared object for this machine (ELF class %d, type %d)",
                             header.e_ident[EI_CLASS], header.e_type),
               0;
    if (header.e_phentsize != sizeof(ElfW(Phdr)) ||
        !inside(header.e_phoff, (uint64_t)header.e_phnum * sizeof(ElfW(Phdr)), size))
        return mi4_fail_into(reason, reason_cap, 0,
                             "truncated or corrupt: program headers outside the file's %llu bytes",
                             (unsigned long long)size),
               0;
    if (header.e_shoff != 0 &&
        !inside(header.e_shoff, (uint64_t)header.e_shnum * header.e_shentsize, size))
        return mi4_fail_into(reason, reason_cap, 0,
                             "truncated: section headers end past the file's %llu bytes",
                             (unsigned long long)size),
               0;
    for (unsigned i = 0; i < header.e_phnum; i++) {
        ElfW(Phdr) segment;
        if (!read_at(fd, &segment, sizeof segment, header.e_phoff + (uint64_t)i * sizeof segment))
            return mi4_fail_into(reason, reason_cap, 0, "cannot read program header %u", i), 0;
        if (segment.p_type == PT_LOAD && !inside(segment.p_offset, segment.p_filesz, size))
            return mi4_fail_into(reason, reason_cap, 0,
                                 "truncated: segment %u ends at byte %llu, past the file's %llu", i,
                                 (unsigned long long)(segment.p_offset + segment.p_filesz),
                                 (unsigned long long)size),
                   0;
    }
    return 1;
}

int mi4_plugin_file_is_whole(const char *path, char *reason, size_t reason_cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        mi4_fail_into(reason, reason_cap, 0, "cannot be opened");
        return 0;
    }
    struct stat info;
    int whole = 0;
    if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode))
        mi4_fail_into(reason, reason_cap, 0, "not a regular file");
    else
        whole = check_headers(fd, (uint64_t)info.st_size, reason, reason_cap);
    close(fd);
    return whole;
}
