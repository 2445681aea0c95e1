/* The restricted unpickler of torch.save archives: see torch_pickle_internal.h.
 *
 * A pickle is a program for a stack machine; Python's Unpickler runs it, importing and
 * calling whatever globals it names. This one understands only the opcodes pickle's
 * protocols 2-5 use for dicts, lists, tuples, strings, numbers and calls, and it never
 * calls anything: REDUCE of an allowed global is done here (an OrderedDict is a dict, a
 * rebuilt tensor is a table entry). Everything is bounded: the stack, the MARK nesting, the
 * memo, the values and container slots, every length against the bytes left. */
#include "io/torch_pickle_internal.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strmap.h"

#define MAX_VALUES (1u << 22)     /* values made (a BERT state dict with its optimizer: ~1e5) */
#define MAX_ITEMS (1u << 24)      /* slots in all containers together */
#define MAX_STACK 65536           /* pickle batches APPENDS/SETITEMS by 1000 */
#define MAX_MARKS 256             /* MARK nesting */
#define MAX_MEMO (1u << 22)
#define MAX_NAME 256              /* a GLOBAL's module or name */
#define MAX_KEY 255               /* a storage's key (a zip entry's name) */
#define MAX_ELEMENTS ((int64_t)1 << 53)
#define BLOCK_VALUES 1024

struct PkBlock {
    PkBlock *next;
    size_t used;
    PkValue v[BLOCK_VALUES];
};

/* The allowed globals: the first ones are called by REDUCE, the storage classes only named
 * inside persistent ids. */
enum { G_ORDERED_DICT, G_REBUILD_TENSOR_V2, G_REBUILD_PARAMETER, G_REBUILD_PARAMETER_STATE, G_STORAGE0 };
static const struct {
    const char *module, *name;
    StDtype dtype;   /* storage classes */
} GLOBALS[] = {
    {"collections", "OrderedDict", 0},
    {"torch._utils", "_rebuild_tensor_v2", 0},
    {"torch._utils", "_rebuild_parameter", 0},
    {"torch._utils", "_rebuild_parameter_with_state", 0},
    {"torch", "FloatStorage", ST_F32}, {"torch", "HalfStorage", ST_F16},
    {"torch", "BFloat16Storage", ST_BF16}, {"torch", "DoubleStorage", ST_F64},
    {"torch", "LongStorage", ST_I64}, {"torch", "IntStorage", ST_I32},
    {"torch", "ShortStorage", ST_I16}, {"torch", "CharStorage", ST_I8},
    {"torch", "ByteStorage", ST_U8}, {"torch", "BoolStorage", ST_BOOL},
};
#define NGLOBALS ((int)(sizeof GLOBALS / sizeof GLOBALS[0]))

typedef struct {
    const unsigned char *start, *p, *end;
    size_t op_at;            /* offset of the opcode being run, for messages */
    const char *path;
    BertError *err;
    PkResult *r;
    PkValue **stack;
    size_t sp, stack_cap;
    size_t marks[MAX_MARKS];
    int n_marks;
    PkValue **memo;
    size_t memo_cap, memo_count;
    size_t n_values, n_items, storage_cap, tensor_cap;
    StrMap storage_keys;     /* key -> storage index (keys borrowed from the pickle) */
    bool stopped;
} Unpickler;

const char *pk_kind_name(PkKind k) {
    static const char *names[] = {"None", "a bool", "an int", "a float", "a str", "bytes", "a tuple",
                                  "a list", "a dict", "a global", "a storage", "a tensor"};
    return names[k];
}

__attribute__((format(printf, 2, 3))) static int fail(Unpickler *u, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    bert_fail(u->err, "%s: %s (data.pkl byte %zu)", u->path, msg, u->op_at);
    return -1;
}

/* Bytes of a pickle string, quoted for a one-line message: control and non-ASCII bytes
 * become '?', long ones are cut. */
static const char *printable(char *buf, size_t cap, const char *s, size_t len) {
    size_t n = len < cap - 4 ? len : cap - 4, i;
    for (i = 0; i < n; i++) buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
    if (n < len) memcpy(buf + i, "...", 3), i += 3;
    buf[i] = '\0';
    return buf;
}

static PkValue *new_value(Unpickler *u, PkKind kind) {
    if (u->n_values >= MAX_VALUES) { fail(u, "more than %u objects", MAX_VALUES); return NULL; }
    PkBlock *b = u->r->blocks;
    if (!b || b->used == BLOCK_VALUES) {
        b = xmalloc(sizeof *b);
        b->next = u->r->blocks, b->used = 0, u->r->blocks = b;
    }
    PkValue *v = &b->v[b->used++];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    u->n_values++;
    return v;
}

static int add_item(Unpickler *u, PkValue *c, PkValue *item) {
    if (u->n_items >= MAX_ITEMS) return fail(u, "more than %u container items", MAX_ITEMS);
    ARRAY_RESERVE(c->items, c->cap, c->n + 1, 4);
    c->items[c->n++] = item;
    u->n_items++;
    return 0;
}

/* ---- the stack and its marks ---- */

static size_t frame_base(const Unpickler *u) { return u->n_marks ? u->marks[u->n_marks - 1] : 0; }

static int push(Unpickler *u, PkValue *v) {
    if (!v) return -1;
    if (u->sp >= MAX_STACK) return fail(u, "pickle stack deeper than %d (nesting too deep)", MAX_STACK);
    ARRAY_RESERVE(u->stack, u->stack_cap, u->sp + 1, 64);
    u->stack[u->sp++] = v;
    return 0;
}

static PkValue *pop(Unpickler *u) {
    if (u->sp <= frame_base(u)) { fail(u, "pickle stack underflow"); return NULL; }
    return u->stack[--u->sp];
}

static PkValue *top(Unpickler *u) {
    if (u->sp <= frame_base(u)) { fail(u, "pickle stack underflow"); return NULL; }
    return u->stack[u->sp - 1];
}

static int push_mark(Unpickler *u) {
    if (u->n_marks >= MAX_MARKS) return fail(u, "MARKs nested deeper than %d (nesting too deep)", MAX_MARKS);
    u->marks[u->n_marks++] = u->sp;
    return 0;
}

/* Ends the innermost MARK: the values above it are stack[*base .. sp). */
static int pop_mark(Unpickler *u, size_t *base) {
    if (!u->n_marks) return fail(u, "no MARK to close");
    *base = u->marks[--u->n_marks];
    return 0;
}

/* ---- reading the opcodes' arguments ---- */

static int need(Unpickler *u, uint64_t n) {
    if ((uint64_t)(u->end - u->p) < n)
        return fail(u, "truncated pickle: %llu bytes needed, %zu left", (unsigned long long)n,
                    (size_t)(u->end - u->p));
    return 0;
}

static int read_uint(Unpickler *u, int nbytes, uint64_t *out) {
    if (need(u, (uint64_t)nbytes)) return -1;
    uint64_t v = 0;
    for (int i = nbytes - 1; i >= 0; i--) v = v << 8 | u->p[i];
    u->p += nbytes;
    *out = v;
    return 0;
}

/* LONG1: n little-endian two's-complement bytes; only what fits in 64 bits. */
static int read_long1(Unpickler *u, int64_t *out) {
    uint64_t n, v = 0;
    if (read_uint(u, 1, &n)) return -1;
    if (n > 8) return fail(u, "integer of %llu bytes is too large", (unsigned long long)n);
    if (need(u, n)) return -1;
    for (int i = (int)n - 1; i >= 0; i--) v = v << 8 | u->p[i];
    if (n > 0 && n < 8 && (u->p[n - 1] & 0x80)) v |= ~(uint64_t)0 << (8 * n);   /* sign-extend */
    u->p += n;
    memcpy(out, &v, sizeof v);
    return 0;
}

static int push_int(Unpickler *u, int64_t i, PkKind kind) {
    PkValue *v = new_value(u, kind);
    if (v) v->i = i;
    return push(u, v);
}

/* A string or bytes whose length takes len_bytes (a signed length: BINSTRING). */
static int push_string(Unpickler *u, int len_bytes, bool is_signed, PkKind kind) {
    uint64_t n;
    if (read_uint(u, len_bytes, &n)) return -1;
    if (is_signed && (n & 0x80000000u)) return fail(u, "negative string length");
    if (need(u, n)) return -1;
    PkValue *v = new_value(u, kind);
    if (!v) return -1;
    v->s = (const char *)u->p, v->len = (size_t)n;
    u->p += n;
    return push(u, v);
}

static int push_float(Unpickler *u) {
    uint64_t bits = 0;
    if (need(u, 8)) return -1;
    for (int i = 0; i < 8; i++) bits = bits << 8 | u->p[i];   /* big-endian */
    u->p += 8;
    PkValue *v = new_value(u, PK_FLOAT);
    if (v) memcpy(&v->f, &bits, sizeof v->f);
    return push(u, v);
}

/* ---- opcodes: scalars ---- */

/* Returns 1 when op is not one of these. */
static int op_scalar(Unpickler *u, int op) {
    uint64_t x = 0;
    int64_t l = 0;
    switch (op) {
    case 'N': return push(u, new_value(u, PK_NONE));
    case 0x88: return push_int(u, 1, PK_BOOL);                       /* NEWTRUE */
    case 0x89: return push_int(u, 0, PK_BOOL);                       /* NEWFALSE */
    case 'K': return read_uint(u, 1, &x) ? -1 : push_int(u, (int64_t)x, PK_INT);   /* BININT1 */
    case 'M': return read_uint(u, 2, &x) ? -1 : push_int(u, (int64_t)x, PK_INT);   /* BININT2 */
    case 'J': return read_uint(u, 4, &x) ? -1 : push_int(u, (int32_t)(uint32_t)x, PK_INT); /* BININT */
    case 0x8a: return read_long1(u, &l) ? -1 : push_int(u, l, PK_INT); /* LONG1 */
    case 'G': return push_float(u);                                  /* BINFLOAT */
    case 'X': return push_string(u, 4, false, PK_STR);               /* BINUNICODE */
    case 0x8c: return push_string(u, 1, false, PK_STR);              /* SHORT_BINUNICODE */
    case 0x8d: return push_string(u, 8, false, PK_STR);              /* BINUNICODE8 */
    case 'T': return push_string(u, 4, true, PK_STR);                /* BINSTRING */
    case 'U': return push_string(u, 1, false, PK_STR);               /* SHORT_BINSTRING */
    case 'B': return push_string(u, 4, false, PK_BYTES);             /* BINBYTES */
    case 'C': return push_string(u, 1, false, PK_BYTES);             /* SHORT_BINBYTES */
    case 0x8e: return push_string(u, 8, false, PK_BYTES);            /* BINBYTES8 */
    default: return 1;
    }
}

/* ---- opcodes: containers ---- */

/* A tuple or list of stack[base .. sp), which leave the stack. */
static int push_sequence(Unpickler *u, size_t base, PkKind kind) {
    PkValue *v = new_value(u, kind);
    if (!v) return -1;
    for (size_t i = base; i < u->sp; i++)
        if (add_item(u, v, u->stack[i])) return -1;
    u->sp = base;
    return push(u, v);
}

/* Adds stack[base .. sp) to the container just below base (APPENDS, SETITEMS, DICT's pairs). */
static int fill(Unpickler *u, size_t base, PkValue *c, PkKind want) {
    if (!c || c->kind != want)
        return fail(u, "%s of %s", want == PK_DICT ? "SETITEMS" : "APPENDS", c ? pk_kind_name(c->kind) : "nothing");
    if (want == PK_DICT && (u->sp - base) % 2) return fail(u, "odd number of dict keys and values");
    for (size_t i = base; i < u->sp; i++)
        if (add_item(u, c, u->stack[i])) return -1;
    u->sp = base;
    return 0;
}

/* The container below a closed MARK's values, which must belong to the frame outside it. */
static PkValue *below_mark(Unpickler *u, size_t base) {
    if (base <= frame_base(u)) { fail(u, "no container below MARK"); return NULL; }
    return u->stack[base - 1];
}

static int op_append(Unpickler *u, PkKind want) {
    PkValue *val = pop(u), *key = NULL, *c;
    if (val && want == PK_DICT) key = pop(u);
    if (!val || (want == PK_DICT && !key) || !(c = top(u))) return -1;
    if (c->kind != want) return fail(u, "%s of %s", want == PK_DICT ? "SETITEM" : "APPEND", pk_kind_name(c->kind));
    return (key && add_item(u, c, key)) || add_item(u, c, val) ? -1 : 0;
}

static int op_tuple_n(Unpickler *u, size_t n) {
    if (u->sp - frame_base(u) < n) return fail(u, "pickle stack underflow");
    return push_sequence(u, u->sp - n, PK_TUPLE);
}

static int op_container(Unpickler *u, int op) {
    size_t base = 0;
    switch (op) {
    case '(': return push_mark(u);                                   /* MARK */
    case '}': return push(u, new_value(u, PK_DICT));                 /* EMPTY_DICT */
    case ']': return push(u, new_value(u, PK_LIST));                 /* EMPTY_LIST */
    case ')': return push(u, new_value(u, PK_TUPLE));                /* EMPTY_TUPLE */
    case 0x85: return op_tuple_n(u, 1);                              /* TUPLE1 */
    case 0x86: return op_tuple_n(u, 2);                              /* TUPLE2 */
    case 0x87: return op_tuple_n(u, 3);                              /* TUPLE3 */
    case 't': return pop_mark(u, &base) ? -1 : push_sequence(u, base, PK_TUPLE);
    case 'l': return pop_mark(u, &base) ? -1 : push_sequence(u, base, PK_LIST);
    case 'a': return op_append(u, PK_LIST);                          /* APPEND */
    case 's': return op_append(u, PK_DICT);                          /* SETITEM */
    case 'e': return pop_mark(u, &base) ? -1 : fill(u, base, below_mark(u, base), PK_LIST);
    case 'u': return pop_mark(u, &base) ? -1 : fill(u, base, below_mark(u, base), PK_DICT);
    case 'd': {                                                      /* DICT */
        PkValue *d = new_value(u, PK_DICT);
        if (!d || pop_mark(u, &base) || fill(u, base, d, PK_DICT)) return -1;
        return push(u, d);
    }
    default: return 1;
    }
}

/* ---- opcodes: the memo ---- */

static int memo_put(Unpickler *u, uint64_t idx) {
    PkValue *v = top(u);
    if (!v) return -1;
    if (idx >= MAX_MEMO) return fail(u, "memo index %llu too large", (unsigned long long)idx);
    if (idx >= u->memo_cap) {
        size_t old = u->memo_cap;
        ARRAY_RESERVE(u->memo, u->memo_cap, idx + 1, 64);
        memset(u->memo + old, 0, (u->memo_cap - old) * sizeof *u->memo);
    }
    if (!u->memo[idx]) u->memo_count++;
    u->memo[idx] = v;
    return 0;
}

static int memo_get(Unpickler *u, uint64_t idx) {
    if (idx >= u->memo_cap || !u->memo[idx]) return fail(u, "memo entry %llu is not set", (unsigned long long)idx);
    return push(u, u->memo[idx]);
}

static int op_memo(Unpickler *u, int op) {
    uint64_t idx;
    switch (op) {
    case 'q': return read_uint(u, 1, &idx) ? -1 : memo_put(u, idx);  /* BINPUT */
    case 'r': return read_uint(u, 4, &idx) ? -1 : memo_put(u, idx);  /* LONG_BINPUT */
    case 0x94: return memo_put(u, u->memo_count);                    /* MEMOIZE */
    case 'h': return read_uint(u, 1, &idx) ? -1 : memo_get(u, idx);  /* BINGET */
    case 'j': return read_uint(u, 4, &idx) ? -1 : memo_get(u, idx);  /* LONG_BINGET */
    default: return 1;
    }
}

/* ---- globals ---- */

static int push_global(Unpickler *u, const char *mod, size_t mod_len, const char *name, size_t name_len) {
    for (int g = 0; g < NGLOBALS; g++)
        if (strlen(GLOBALS[g].module) == mod_len && !memcmp(GLOBALS[g].module, mod, mod_len) &&
            strlen(GLOBALS[g].name) == name_len && !memcmp(GLOBALS[g].name, name, name_len))
            return push_int(u, g, PK_GLOBAL);
    char m[128], n[128];
    return fail(u, "refuses pickle global %s.%s (only tensors, storages and OrderedDict are allowed)",
                printable(m, sizeof m, mod, mod_len), printable(n, sizeof n, name, name_len));
}

/* One "...\n" line of GLOBAL's argument. */
static int read_line(Unpickler *u, const char **s, size_t *len) {
    size_t left = (size_t)(u->end - u->p), max = left < MAX_NAME + 1 ? left : MAX_NAME + 1;
    const unsigned char *nl = memchr(u->p, '\n', max);
    if (!nl) return fail(u, "GLOBAL name without an end of line within %d bytes", MAX_NAME);
    *s = (const char *)u->p, *len = (size_t)(nl - u->p);
    u->p = nl + 1;
    return 0;
}

static int op_global(Unpickler *u) {
    const char *mod = NULL, *name = NULL;
    size_t mod_len = 0, name_len = 0;
    if (read_line(u, &mod, &mod_len) || read_line(u, &name, &name_len)) return -1;
    return push_global(u, mod, mod_len, name, name_len);
}

static int op_stack_global(Unpickler *u) {
    PkValue *name = pop(u), *mod = name ? pop(u) : NULL;
    if (!mod) return -1;
    if (mod->kind != PK_STR || name->kind != PK_STR) return fail(u, "STACK_GLOBAL of a non-string");
    return push_global(u, mod->s, mod->len, name->s, name->len);
}

static const char *global_name(int g, char *buf, size_t cap) {
    snprintf(buf, cap, "%s.%s", GLOBALS[g].module, GLOBALS[g].name);
    return buf;
}

/* ---- storages (persistent ids) ---- */

static int new_storage(Unpickler *u, const PkValue *key, StDtype dtype, int64_t numel) {
    char k[64];
    bool added;
    StrMapEntry *e = strmap_intern(&u->storage_keys, key->s, key->len, &added);
    if (!added) {
        const PkStorage *s = &u->r->storages[e->value];
        if (s->dtype != dtype || s->numel != numel)
            return fail(u, "storage '%s' is declared twice, as %s[%lld] and %s[%lld]", printable(k, sizeof k, key->s, key->len),
                        st_dtype_name(s->dtype), (long long)s->numel, st_dtype_name(dtype), (long long)numel);
        return (int)e->value;
    }
    ARRAY_RESERVE(u->r->storages, u->storage_cap, (size_t)u->r->n_storages + 1, 16);
    u->r->storages[u->r->n_storages] = (PkStorage){key->s, key->len, dtype, numel};
    e->value = u->r->n_storages;
    return u->r->n_storages++;
}

/* BINPERSID: ('storage', torch.<T>Storage, key, location, numel). */
static int op_persid(Unpickler *u) {
    PkValue *pid = pop(u);
    if (!pid) return -1;
    PkValue **it = pid->items;
    if (pid->kind != PK_TUPLE || pid->n != 5 || it[0]->kind != PK_STR || it[0]->len != 7 ||
        memcmp(it[0]->s, "storage", 7) || it[1]->kind != PK_GLOBAL || it[2]->kind != PK_STR ||
        it[3]->kind != PK_STR || it[4]->kind != PK_INT)
        return fail(u, "persistent id is not ('storage', type, key, location, numel)");
    if (it[1]->i < G_STORAGE0) return fail(u, "persistent id's storage type is not a storage class");
    const PkValue *key = it[2];
    if (key->len == 0 || key->len > MAX_KEY || memchr(key->s, '\0', key->len) || memchr(key->s, '/', key->len))
        return fail(u, "storage key of %zu bytes is not a plain file name", key->len);
    StDtype dtype = GLOBALS[it[1]->i].dtype;
    int64_t numel = it[4]->i;
    if (numel < 0 || numel > MAX_ELEMENTS) return fail(u, "storage of %lld elements", (long long)numel);
    int idx = new_storage(u, key, dtype, numel);
    return idx < 0 ? -1 : push_int(u, idx, PK_STORAGE);
}

/* ---- tensors ---- */

static int int_tuple(const PkValue *v, int64_t *out, int max) {
    if (v->kind != PK_TUPLE || v->n > (size_t)max) return -1;
    for (size_t i = 0; i < v->n; i++) {
        if (v->items[i]->kind != PK_INT) return -1;
        out[i] = v->items[i]->i;
    }
    return (int)v->n;
}

static const char *fmt_dims(char *buf, size_t cap, const int64_t *d, int n) {
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && at < cap; i++) at += (size_t)snprintf(buf + at, cap - at, "%s%lld", i ? ", " : "", (long long)d[i]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
    return buf;
}

/* Elements of the shape (no negative sizes or strides), bounded by 2^53. */
static int view_numel(Unpickler *u, const PkTensor *t, int64_t *numel) {
    char b[200];
    bool empty = false;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0 || t->stride[d] < 0)
            return fail(u, "tensor of shape %s has a negative size or stride", fmt_dims(b, sizeof b, t->shape, t->ndim));
        empty |= t->shape[d] == 0;
    }
    int64_t n = 1;
    for (int d = 0; d < t->ndim && !empty; d++)
        if (__builtin_mul_overflow(n, t->shape[d], &n) || n > MAX_ELEMENTS)
            return fail(u, "tensor shape %s has too many elements (overflow)", fmt_dims(b, sizeof b, t->shape, t->ndim));
    *numel = empty ? 0 : n;
    return 0;
}

/* The view's elements must lie inside its storage: the last one it reaches is
 * offset + sum((shape - 1) * stride). */
static int check_view(Unpickler *u, const PkTensor *t) {
    const PkStorage *s = &u->r->storages[t->storage];
    char sh[200], st[200], k[64];
    int64_t last = t->offset;
    bool over = false;
    for (int d = 0; d < t->ndim && t->numel > 0; d++) {
        int64_t step;
        over |= __builtin_mul_overflow(t->shape[d] - 1, t->stride[d], &step) || __builtin_add_overflow(last, step, &last);
    }
    if (over || (t->numel > 0 ? last >= s->numel : t->offset > s->numel))
        return fail(u, "tensor view (offset %lld, shape %s, strides %s) lies outside its %lld-element storage '%s'",
                    (long long)t->offset, fmt_dims(sh, sizeof sh, t->shape, t->ndim), fmt_dims(st, sizeof st, t->stride, t->ndim),
                    (long long)s->numel, printable(k, sizeof k, s->key, s->key_len));
    return 0;
}

/* _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]) */
static int rebuild_tensor(Unpickler *u, const PkValue *args) {
    PkTensor t = {0};
    PkValue **a = args->items;
    if (args->n != 6 && args->n != 7) return fail(u, "_rebuild_tensor_v2 with %zu arguments", args->n);
    if (a[0]->kind != PK_STORAGE || a[1]->kind != PK_INT || a[4]->kind != PK_BOOL ||
        (a[5]->kind != PK_DICT && a[5]->kind != PK_NONE))
        return fail(u, "_rebuild_tensor_v2's arguments are not (storage, offset, size, stride, bool, hooks)");
    t.storage = (int)a[0]->i, t.offset = a[1]->i;
    t.ndim = int_tuple(a[2], t.shape, ST_MAX_DIMS);
    if (t.ndim < 0 || int_tuple(a[3], t.stride, ST_MAX_DIMS) != t.ndim)
        return fail(u, "tensor size and stride are not tuples of up to %d integers of the same length", ST_MAX_DIMS);
    if (t.offset < 0) return fail(u, "negative storage offset %lld", (long long)t.offset);
    if (view_numel(u, &t, &t.numel) || check_view(u, &t)) return -1;
    ARRAY_RESERVE(u->r->tensors, u->tensor_cap, (size_t)u->r->n_tensors + 1, 64);
    u->r->tensors[u->r->n_tensors] = t;
    return push_int(u, u->r->n_tensors++, PK_TENSOR);
}

/* _rebuild_parameter(data, requires_grad, hooks[, state]): the tensor itself. */
static int rebuild_parameter(Unpickler *u, const PkValue *args, size_t nargs) {
    if (args->n != nargs || args->items[0]->kind != PK_TENSOR || args->items[1]->kind != PK_BOOL)
        return fail(u, "_rebuild_parameter's arguments are not (tensor, bool, hooks)");
    return push(u, args->items[0]);
}

/* REDUCE: the call is done here, for the allowed callables only. */
static int op_reduce(Unpickler *u) {
    PkValue *args = pop(u), *fn = args ? pop(u) : NULL;
    char b[96];
    if (!fn) return -1;
    if (fn->kind != PK_GLOBAL) return fail(u, "REDUCE calls %s", pk_kind_name(fn->kind));
    if (args->kind != PK_TUPLE) return fail(u, "REDUCE of %s with %s of arguments", global_name((int)fn->i, b, sizeof b), pk_kind_name(args->kind));
    switch (fn->i) {
    case G_ORDERED_DICT:
        if (args->n) return fail(u, "OrderedDict called with arguments");
        return push(u, new_value(u, PK_DICT));
    case G_REBUILD_TENSOR_V2: return rebuild_tensor(u, args);
    case G_REBUILD_PARAMETER: return rebuild_parameter(u, args, 3);
    case G_REBUILD_PARAMETER_STATE: return rebuild_parameter(u, args, 4);
    default: return fail(u, "pickle calls %s, which only a persistent id may name", global_name((int)fn->i, b, sizeof b));
    }
}

/* BUILD: an OrderedDict's attributes (a state_dict's _metadata), which a state dict does not need. */
static int op_build(Unpickler *u) {
    PkValue *state = pop(u), *obj = state ? top(u) : NULL;
    if (!obj) return -1;
    if (obj->kind != PK_DICT || (state->kind != PK_NONE && state->kind != PK_DICT))
        return fail(u, "BUILD of %s from %s", pk_kind_name(obj->kind), pk_kind_name(state->kind));
    return 0;
}

static int op_call(Unpickler *u, int op) {
    switch (op) {
    case 'c': return op_global(u);                                   /* GLOBAL */
    case 0x93: return op_stack_global(u);                            /* STACK_GLOBAL */
    case 'R': return op_reduce(u);                                   /* REDUCE */
    case 'b': return op_build(u);                                    /* BUILD */
    case 'Q': return op_persid(u);                                   /* BINPERSID */
    default: return 1;
    }
}

/* ---- the machine ---- */

static const char *opcode_name(int op) {
    static const struct { unsigned char op; const char *name; } names[] = {
        {'I', "INT"}, {'L', "LONG"}, {'F', "FLOAT"}, {'S', "STRING"}, {'V', "UNICODE"}, {'P', "PERSID"},
        {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"}, {'g', "GET"}, {'p', "PUT"}, {'i', "INST"},
        {'o', "OBJ"}, {0x81, "NEWOBJ"}, {0x92, "NEWOBJ_EX"}, {0x82, "EXT1"}, {0x83, "EXT2"},
        {0x84, "EXT4"}, {0x8b, "LONG4"}, {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"},
        {0x96, "BYTEARRAY8"}, {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].op == op) return names[i].name;
    return "unknown";
}

static int op_control(Unpickler *u, int op) {
    uint64_t x;
    switch (op) {
    case 0x80:                                                       /* PROTO */
        if (read_uint(u, 1, &x)) return -1;
        return x > 5 ? fail(u, "pickle protocol %llu (at most 5 is known)", (unsigned long long)x) : 0;
    case 0x95: return read_uint(u, 8, &x);                           /* FRAME: a size hint */
    case '.': {                                                      /* STOP */
        PkValue *v = pop(u);
        if (!v) return -1;
        u->r->root = v, u->stopped = true;
        return 0;
    }
    default: return 1;
    }
}

static int run(Unpickler *u) {
    while (!u->stopped) {
        u->op_at = (size_t)(u->p - u->start);
        if (u->p == u->end) return fail(u, "truncated pickle: no STOP opcode");
        int op = *u->p++, rc = op_control(u, op);
        if (rc == 1) rc = op_scalar(u, op);
        if (rc == 1) rc = op_container(u, op);
        if (rc == 1) rc = op_memo(u, op);
        if (rc == 1) rc = op_call(u, op);
        if (rc == 1) return fail(u, "unsupported pickle opcode 0x%02x (%s)", op, opcode_name(op));
        if (rc) return -1;
    }
    return 0;
}

int pk_unpickle(const unsigned char *data, size_t len, const char *path, PkResult *out, BertError *err) {
    memset(out, 0, sizeof *out);
    Unpickler u = {.start = data, .p = data, .end = data + len, .path = path, .err = err, .r = out};
    strmap_init(&u.storage_keys, 64, false);
    int rc = run(&u);
    strmap_free(&u.storage_keys);
    free(u.stack);
    free(u.memo);
    if (rc) pk_free(out);
    return rc;
}

void pk_free(PkResult *r) {
    for (PkBlock *b = r->blocks, *next; b; b = next) {
        next = b->next;
        for (size_t i = 0; i < b->used; i++) free(b->v[i].items);
        free(b);
    }
    free(r->storages);
    free(r->tensors);
    memset(r, 0, sizeof *r);
}

const PkValue *pk_dict_get(const PkValue *dict, const char *key) {
    size_t n = strlen(key);
    if (!dict || dict->kind != PK_DICT) return NULL;
    for (size_t i = 0; i + 1 < dict->n; i += 2) {
        const PkValue *k = dict->items[i];
        if (k->kind == PK_STR && k->len == n && !memcmp(k->s, key, n)) return dict->items[i + 1];
    }
    return NULL;
}
