/* The string map (core/strmap.h). */
#include "core/strmap.h"

#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/test_hooks.h"

/* The slot index and the tag come from different bits of the hash. */
static size_t slot_of(uint64_t h, size_t mask) { return (size_t)(h ^ (h >> 29)) & mask; }
static uint32_t tag_of(uint64_t h) { return (uint32_t)(h >> 32); }

/* Keys are a few bytes: an inline loop instead of a libc call per candidate. */
static inline bool same_bytes(const char *a, const char *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return false;
    return true;
}

static void clear_slots(StrMap *m) {
    for (size_t i = 0; i <= m->mask; i++) m->slots[i] = (StrMapSlot){0, -1};
}

void strmap_init(StrMap *m, size_t expected, bool copy_keys) {
    memset(m, 0, sizeof *m);
    m->copy_keys = copy_keys;
    size_t n = 16;
    while (n <= 2 * expected) n *= 2;
    m->mask = n - 1;
    m->slots = xmalloc(n * sizeof *m->slots);
    clear_slots(m);
}

void strmap_free(StrMap *m) {
    if (m->copy_keys)
        for (size_t i = 0; i < m->n; i++) free((char *)m->entries[i].key);
    free(m->entries);
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* The slot holding key, or the empty slot where it would go. */
static size_t probe(const StrMap *m, uint64_t h, const char *key, size_t len) {
    const uint32_t tag = tag_of(h);
    size_t s = slot_of(h, m->mask);
    for (; m->slots[s].entry >= 0; s = (s + 1) & m->mask) {
        TEST_COUNT_WORK(1);
        if (m->slots[s].tag != tag) continue;
        const StrMapEntry *e = &m->entries[m->slots[s].entry];
        if (e->len == len && same_bytes(e->key, key, len)) break;
    }
    return s;
}

const StrMapEntry *strmap_find_hashed(const StrMap *m, uint64_t h, const char *key, size_t len) {
    const int32_t e = m->slots[probe(m, h, key, len)].entry;
    return e >= 0 ? &m->entries[e] : NULL;
}

const StrMapEntry *strmap_find(const StrMap *m, const char *key, size_t len) {
    TEST_COUNT_WORK(len + 1);
    return strmap_find_hashed(m, strmap_hash(key, len), key, len);
}

static void grow(StrMap *m) {
    m->mask = 2 * m->mask + 1;
    m->slots = xrealloc(m->slots, (m->mask + 1) * sizeof *m->slots);
    clear_slots(m);
    for (size_t i = 0; i < m->n; i++) {
        const uint64_t h = strmap_hash(m->entries[i].key, m->entries[i].len);
        size_t s = slot_of(h, m->mask);
        TEST_COUNT_WORK(m->entries[i].len + 1);
        while (m->slots[s].entry >= 0) s = (s + 1) & m->mask, TEST_COUNT_WORK(1);
        m->slots[s] = (StrMapSlot){tag_of(h), (int32_t)i};
    }
}

StrMapEntry *strmap_intern(StrMap *m, const char *key, size_t len, bool *added) {
    TEST_COUNT_WORK(len + 1);
    const uint64_t h = strmap_hash(key, len);
    size_t s = probe(m, h, key, len);
    if (added) *added = m->slots[s].entry < 0;
    if (m->slots[s].entry >= 0) return &m->entries[m->slots[s].entry];
    if (m->n >= INT32_MAX) die("string map: more than %d keys", INT32_MAX);
    ARRAY_RESERVE(m->entries, m->cap, m->n + 1, 64);
    StrMapEntry *e = &m->entries[m->n];
    e->len = len, e->value = 0;
    if (m->copy_keys) {
        char *copy = xmalloc(len + 1);
        memcpy(copy, key, len);
        copy[len] = 0;
        e->key = copy;
    } else {
        e->key = key;
    }
    m->slots[s] = (StrMapSlot){tag_of(h), (int32_t)m->n};
    if (2 * ++m->n > m->mask) grow(m);
    return &m->entries[m->n - 1];
}
