/* _dl_find_object (glibc 2.35) for static musl binaries. Rust's std links
   -lunwind; dist.sh gives it GCC's libgcc_eh.a, which since GCC 12 finds a
   program counter's unwind tables with this glibc function. musl lacks it
   but has dl_iterate_phdr, which answers the same question. */
#include <link.h>
#include <stddef.h>
#include <stdint.h>

struct dl_find_object {
    unsigned long long dlfo_flags;
    void *dlfo_map_start;
    void *dlfo_map_end;
    struct link_map *dlfo_link_map;
    void *dlfo_eh_frame;
    unsigned long long dlfo_reserved[7];
};

#define MAX_OBJECTS 16
/* libgcc reads only l_addr; one entry per loaded object, in load order. */
static struct link_map maps[MAX_OBJECTS];

struct query {
    uintptr_t pc;
    struct dl_find_object *out;
    int index;
};

static int visit(struct dl_phdr_info *info, size_t size, void *data) {
    struct query *q = data;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    const ElfW(Phdr) *eh = NULL;
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD) {
            uintptr_t start = info->dlpi_addr + ph->p_vaddr;
            if (start < lo) lo = start;
            if (start + ph->p_memsz > hi) hi = start + ph->p_memsz;
        } else if (ph->p_type == PT_GNU_EH_FRAME) {
            eh = ph;
        }
    }
    int index = q->index++;
    if (q->pc < lo || q->pc >= hi || index >= MAX_OBJECTS) return 0;
    maps[index].l_addr = info->dlpi_addr;
    q->out->dlfo_flags = 0;
    q->out->dlfo_map_start = (void *)lo;
    q->out->dlfo_map_end = (void *)hi;
    q->out->dlfo_link_map = &maps[index];
    q->out->dlfo_eh_frame = eh ? (void *)(info->dlpi_addr + eh->p_vaddr) : NULL;
    return 1;
}

int _dl_find_object(void *pc, struct dl_find_object *out) {
    struct query q = {(uintptr_t)pc, out, 0};
    return dl_iterate_phdr(visit, &q) ? 0 : -1;
}
