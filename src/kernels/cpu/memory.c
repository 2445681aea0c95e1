/* The CPU backend's memory (kernels.h): host memory, so uploads and downloads are copies and
 * a mapping is the memory itself. */
#include "kernels/cpu/cpu_names.h"   /* first: this file defines the CPU backend's cpu_k_* */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "kernels/kernels.h"

/* calloc keeps large allocations lazily zeroed (fresh pages: nothing touched until used, so a
 * copy that is never read costs no memory); the block is aligned up to 64 bytes, the pointer
 * calloc gave stored just below. */
enum { ALIGN = 64 };

void *k_alloc(size_t bytes) {
    unsigned char *base = calloc(1, bytes + ALIGN + sizeof(void *));
    if (!base) die("out of memory allocating %zu bytes", bytes);
    uintptr_t p = ((uintptr_t)(base + sizeof(void *)) + ALIGN - 1) / ALIGN * ALIGN;
    memcpy((void *)(p - sizeof(void *)), &base, sizeof base);
    return (void *)p;
}

size_t k_memory_bytes(void) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

void k_free(void *p) {
    if (!p) return;
    void *base;
    memcpy(&base, (unsigned char *)p - sizeof(void *), sizeof base);
    free(base);
}

void k_upload(void *dst, const void *host_src, size_t bytes) { if (bytes) memcpy(dst, host_src, bytes); }
void k_download(void *host_dst, const void *src, size_t bytes) { if (bytes) memcpy(host_dst, src, bytes); }
void *k_map(void *p, size_t bytes, bool read) { return p; }
void k_unmap(void *p, void *host, size_t bytes, bool write) {}
