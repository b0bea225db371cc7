#include "registry/plugin_elf.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

/* The dynamic loader trusts the program headers and the dynamic table: a
 * header pointing at the wrong bytes makes it read through garbage
 * addresses (SIGSEGV) and a truncated file makes it touch pages past the
 * end (SIGBUS). What is checked here is what glibc's loader uses without
 * checking itself; the ELF identity bytes it refuses with an error. */
#define MAX_PROGRAM_HEADERS 64

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

typedef struct elf_image {
    ElfW(Phdr) segments[MAX_PROGRAM_HEADERS];
    unsigned segment_count;
    const ElfW(Phdr) * dynamic;
} elf_image;

/* 1 when [address, address + length) lies in one loadable segment's memory. */
static int mapped(const elf_image *image, uint64_t address, uint64_t length)
{
    for (unsigned i = 0; i < image->segment_count; i++) {
        const ElfW(Phdr) *s = &image->segments[i];
        if (s->p_type == PT_LOAD && address >= s->p_vaddr &&
            inside(address - s->p_vaddr, length, s->p_memsz))
            return 1;
    }
    return 0;
}

/* Loadable segment `index` is aligned as the loader requires and starts
 * past the end of the one before (the loader maps them in one reservation
 * sized from the first and the last). */
static int load_in_order(const elf_image *image, unsigned index)
{
    const ElfW(Phdr) *s = &image->segments[index];
    uint64_t align = s->p_align ? s->p_align : 1;
    if ((align & (align - 1)) != 0 || (s->p_vaddr - s->p_offset) % align != 0 ||
        s->p_memsz > UINT64_MAX - s->p_vaddr)
        return 0;
    for (unsigned i = index; i-- > 0;) {
        const ElfW(Phdr) *before = &image->segments[i];
        if (before->p_type == PT_LOAD)
            return s->p_vaddr >= before->p_vaddr + before->p_memsz;
    }
    return 1;
}

static int check_identity(const ElfW(Ehdr) * header, char *reason, size_t reason_cap)
{
    if (header->e_ident[EI_MAG0] != ELFMAG0 || header->e_ident[EI_MAG1] != ELFMAG1 ||
        header->e_ident[EI_MAG2] != ELFMAG2 || header->e_ident[EI_MAG3] != ELFMAG3)
        return mi4_fail_into(reason, reason_cap, 0, "not an ELF file"), 0;
    int native_class = sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32;
    if (header->e_ident[EI_CLASS] != native_class || header->e_type != ET_DYN)
        return mi4_fail_into(reason, reason_cap, 0,
                             "not a shared object for this machine (ELF class %d, type %d)",
                             header->e_ident[EI_CLASS], header->e_type),
               0;
    /* (linkers write the program headers right after the ELF header, but
     * patchelf, which packagers run on shared objects, may move them) */
    if (header->e_phentsize != sizeof(ElfW(Phdr)) || header->e_phoff % sizeof(ElfW(Addr)) != 0 ||
        header->e_phoff < sizeof *header || header->e_phnum == 0 ||
        header->e_phnum > MAX_PROGRAM_HEADERS)
        return mi4_fail_into(reason, reason_cap, 0,
                             "corrupt ELF header: %u program headers of %u bytes at offset %llu",
                             header->e_phnum, header->e_phentsize,
                             (unsigned long long)header->e_phoff),
               0;
    return 1;
}

static int check_segments(int fd, const ElfW(Ehdr) * header, uint64_t size, elf_image *image,
                          char *reason, size_t reason_cap)
{
    image->segment_count = header->e_phnum;
    image->dynamic = NULL;
    if (!inside(header->e_phoff, (uint64_t)header->e_phnum * sizeof(ElfW(Phdr)), size) ||
        !read_at(fd, image->segments, header->e_phnum * sizeof(ElfW(Phdr)), header->e_phoff))
        return mi4_fail_into(reason, reason_cap, 0,
                             "truncated or corrupt: program headers outside the file's %llu bytes",
                             (unsigned long long)size),
               0;
    for (unsigned i = 0; i < image->segment_count; i++) {
        const ElfW(Phdr) *s = &image->segments[i];
        if (s->p_type == PT_LOAD && !inside(s->p_offset, s->p_filesz, size))
            return mi4_fail_into(reason, reason_cap, 0,
                                 "truncated: segment %u ends at byte %llu, past the file's %llu", i,
                                 (unsigned long long)(s->p_offset + s->p_filesz),
                                 (unsigned long long)size),
                   0;
        if (s->p_type == PT_LOAD && s->p_filesz > s->p_memsz)
            return mi4_fail_into(reason, reason_cap, 0,
                                 "corrupt: segment %u has more file bytes than memory", i),
                   0;
        if (s->p_type == PT_LOAD && !load_in_order(image, i))
            return mi4_fail_into(reason, reason_cap, 0,
                                 "corrupt: loadable segment %u is misaligned or out of order", i),
                   0;
        if (s->p_type == PT_PHDR && s->p_offset != header->e_phoff)
            return mi4_fail_into(reason, reason_cap, 0,
                                 "corrupt: the program headers are at byte %llu, their own "
                                 "segment says %llu",
                                 (unsigned long long)header->e_phoff,
                                 (unsigned long long)s->p_offset),
                   0;
        if (s->p_type == PT_DYNAMIC) {
            if (image->dynamic)
                return mi4_fail_into(reason, reason_cap, 0, "corrupt: two dynamic segments"), 0;
            image->dynamic = s;
        }
    }
    if (!image->dynamic)
        return mi4_fail_into(reason, reason_cap, 0, "corrupt: no dynamic segment"), 0;
    /* the loader reads the other segments (notes, TLS image, own headers)
     * through their load addresses; types it does not know it ignores, but
     * a damaged table's garbage entries land here too */
    for (unsigned i = 0; i < image->segment_count; i++) {
        const ElfW(Phdr) *s = &image->segments[i];
        if (s->p_type != PT_LOAD && s->p_type != PT_NULL && s->p_type != PT_GNU_STACK &&
            !mapped(image, s->p_vaddr, s->p_memsz))
            return mi4_fail_into(reason, reason_cap, 0,
                                 "corrupt: segment %u (type %#x) lies outside the loaded ones", i,
                                 s->p_type),
                   0;
    }
    return 1;
}

/* The dynamic table must be where a loadable segment puts it, end in DT_NULL
 * and point only into loaded memory. */
static int check_dynamic(int fd, const elf_image *image, char *reason, size_t reason_cap)
{
    const ElfW(Phdr) *d = image->dynamic;
    int placed = 0;
    for (unsigned i = 0; i < image->segment_count; i++) {
        const ElfW(Phdr) *s = &image->segments[i];
        if (s->p_type == PT_LOAD && d->p_vaddr >= s->p_vaddr &&
            inside(d->p_vaddr - s->p_vaddr, d->p_filesz, s->p_filesz) &&
            d->p_offset - s->p_offset == d->p_vaddr - s->p_vaddr)
            placed = 1;
    }
    /* (inside a loadable segment's file bytes, so inside the file) */
    if (!placed || d->p_filesz % sizeof(ElfW(Dyn)) != 0)
        return mi4_fail_into(reason, reason_cap, 0,
                             "corrupt: the dynamic segment is not inside a loadable one"),
               0;
    uint64_t count = d->p_filesz / sizeof(ElfW(Dyn));
    for (uint64_t i = 0; i < count; i++) {
        ElfW(Dyn) entry;
        if (!read_at(fd, &entry, sizeof entry, d->p_offset + i * sizeof entry))
            return mi4_fail_into(reason, reason_cap, 0, "cannot read dynamic entry %llu",
                                 (unsigned long long)i),
                   0;
        switch (entry.d_tag) {
        case DT_NULL: return 1;
        case DT_HASH:
        case DT_GNU_HASH:
        case DT_STRTAB:
        case DT_SYMTAB:
        case DT_RELA:
        case DT_REL:
        case DT_JMPREL:
        case DT_INIT:
        case DT_FINI:
        case DT_INIT_ARRAY:
        case DT_FINI_ARRAY:
        case DT_PLTGOT:
        case DT_VERSYM:
        case DT_VERNEED:
        case DT_VERDEF:
            if (!mapped(image, entry.d_un.d_ptr, 1))
                return mi4_fail_into(reason, reason_cap, 0,
                                     "corrupt: dynamic entry %llu (tag %lld) points at %#llx, "
                                     "outside the loaded segments",
                                     (unsigned long long)i, (long long)entry.d_tag,
                                     (unsigned long long)entry.d_un.d_ptr),
                       0;
            break;
        default: break;
        }
    }
    return mi4_fail_into(reason, reason_cap, 0, "corrupt: the dynamic table has no end"), 0;
}

/* The section headers, if any: glibc ignores them, but debuggers and
 * valgrind read them (valgrind gives up on the whole process over a bad
 * one). Their description in the ELF header, entry 0 null, every section
 * with file bytes inside the file, names inside the name table. */
static int check_sections(int fd, const ElfW(Ehdr) * header, uint64_t size, char *reason,
                          size_t reason_cap)
{
    if (header->e_shoff == 0)
        return 1;
    if (header->e_shentsize != sizeof(ElfW(Shdr)) || header->e_shnum == 0 ||
        (header->e_shstrndx != SHN_UNDEF && header->e_shstrndx >= header->e_shnum))
        return mi4_fail_into(reason, reason_cap, 0,
                             "corrupt ELF header: %u section headers of %u bytes, names in "
                             "section %u",
                             header->e_shnum, header->e_shentsize, header->e_shstrndx),
               0;
    if (!inside(header->e_shoff, (uint64_t)header->e_shnum * sizeof(ElfW(Shdr)), size))
        return mi4_fail_into(reason, reason_cap, 0,
                             "truncated: section headers end past the file's %llu bytes",
                             (unsigned long long)size),
               0;
    ElfW(Shdr) names = { 0 };
    if (header->e_shstrndx != SHN_UNDEF &&
        (!read_at(fd, &names, sizeof names,
                  header->e_shoff + (uint64_t)header->e_shstrndx * sizeof names) ||
         names.sh_type != SHT_STRTAB || !inside(names.sh_offset, names.sh_size, size)))
        return mi4_fail_into(reason, reason_cap, 0,
                             "corrupt: section %u is not a name table inside the file",
                             header->e_shstrndx),
               0;
    for (unsigned i = 0; i < header->e_shnum; i++) {
        ElfW(Shdr) section;
        if (!read_at(fd, &section, sizeof section, header->e_shoff + (uint64_t)i * sizeof section))
            return mi4_fail_into(reason, reason_cap, 0, "cannot read section header %u", i), 0;
        int sound =
            i == 0 ? section.sh_type == SHT_NULL && section.sh_offset == 0 &&
                         section.sh_addr == 0 && section.sh_flags == 0
                   : section.sh_link < header->e_shnum &&
                         (header->e_shstrndx == SHN_UNDEF || section.sh_name < names.sh_size) &&
                         (section.sh_type == SHT_NOBITS ||
                          inside(section.sh_offset, section.sh_size, size));
        if (!sound)
            return mi4_fail_into(reason, reason_cap, 0,
                                 "corrupt: section header %u (type %u) lies outside the file or "
                                 "its tables",
                                 i, section.sh_type),
                   0;
    }
    return 1;
}

static int check_headers(int fd, uint64_t size, char *reason, size_t reason_cap)
{
    ElfW(Ehdr) header;
    if (size < sizeof header || !read_at(fd, &header, sizeof header, 0))
        return mi4_fail_into(reason, reason_cap, 0,
                             "file of %llu bytes is too short for an ELF header",
                             (unsigned long long)size),
               0;
    elf_image image;
    return check_identity(&header, reason, reason_cap) &&
           check_sections(fd, &header, size, reason, reason_cap) &&
           check_segments(fd, &header, size, &image, reason, reason_cap) &&
           check_dynamic(fd, &image, reason, reason_cap);
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
