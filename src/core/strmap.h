/* A string map: byte strings (a pointer and a length; any bytes) to 64-bit integers, the
 * one hash table of bert.c's strings (vocabularies, word and symbol counts, punkt's model,
 * placeholders, SQuAD question ids).
 *
 * Entries are numbered in the order their keys were first added (entries[0..n)), so a map
 * is also an interning table: key -> dense index, and index -> key. Whether a second add of
 * a key keeps the first value or takes the new one is the caller's: strmap_intern returns
 * the existing entry, and the caller sets its value or not.
 *
 * Open addressing with linear probing over a power-of-two table at most half full (it
 * doubles as entries are added). The hash is 64-bit FNV-1a over the key's bytes, which
 * extends: strmap_hash_extend(strmap_hash(a), b) == strmap_hash(a + b), so a caller can hash
 * the prefixes of a word in one pass and look each up (strmap_find_hashed). A slot keeps 32
 * bits of the hash besides its entry, so a probe reads a key's bytes almost only when it
 * is the key looked for.
 *
 * Keys are copied into the map (copy_keys: each a NUL-terminated allocation the map frees)
 * or borrowed (the caller's bytes, which must outlive the map and not move). */
#ifndef BERT_CORE_STRMAP_H
#define BERT_CORE_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *key;   /* copied (NUL-terminated) or borrowed; len bytes */
    size_t len;
    int64_t value;
} StrMapEntry;

typedef struct {
    uint32_t tag;      /* the hash's high 32 bits */
    int32_t entry;     /* index into entries; -1: empty */
} StrMapSlot;

typedef struct {
    StrMapEntry *entries;   /* in the order the keys were first added */
    size_t n, cap;
    StrMapSlot *slots;
    size_t mask;            /* slots - 1 */
    bool copy_keys;
} StrMap;

#define STRMAP_HASH_START 0xcbf29ce484222325ULL

/* FNV-1a of bytes[0..len) continued from h (STRMAP_HASH_START for a whole key). */
static inline uint64_t strmap_hash_extend(uint64_t h, const char *bytes, size_t len) {
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)bytes[i]) * 0x100000001b3ULL;
    return h;
}
static inline uint64_t strmap_hash(const char *key, size_t len) {
    return strmap_hash_extend(STRMAP_HASH_START, key, len);
}

/* An empty map with room for `expected` keys before it grows. */
void strmap_init(StrMap *m, size_t expected, bool copy_keys);
void strmap_free(StrMap *m);

/* The entry of key, or NULL. The _hashed form takes h = strmap_hash(key, len). */
const StrMapEntry *strmap_find(const StrMap *m, const char *key, size_t len);
const StrMapEntry *strmap_find_hashed(const StrMap *m, uint64_t h, const char *key, size_t len);

/* The entry of key, adding the key (value 0) if it is absent; *added (if not NULL) says
 * whether it was. Adding a key may move entries[]: the pointer is good until the next add. */
StrMapEntry *strmap_intern(StrMap *m, const char *key, size_t len, bool *added);

/* The index of entry e of m: the place of its key in the order keys were first added. */
static inline size_t strmap_index(const StrMap *m, const StrMapEntry *e) { return (size_t)(e - m->entries); }

#endif
