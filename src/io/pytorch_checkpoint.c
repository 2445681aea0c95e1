/* PyTorch checkpoints (torch.save's zip archives): see pytorch_checkpoint.h.
 * The storages' bytes are little-endian as the archive's byteorder says (a "big" archive is
 * refused), and this host is little-endian like every machine bert.c runs on. */
#include "io/pytorch_checkpoint.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "core/strmap.h"
#include "io/torch_pickle_internal.h"

/* A state dict's pickle is ~100 KB (BERT-large with its optimizer: a few hundred KB). */
#define MAX_PICKLE_BYTES ((zip_uint64_t)64 << 20)
#define MAX_PREFIX 512
/* Deflate expands at most ~1032 times: a compressed storage claiming more is a bomb. */
#define MAX_DEFLATE_RATIO 1100

struct PtStorage {
    zip_uint64_t index;         /* the zip entry <prefix>/data/<key> */
    bool stored;                /* uncompressed: seekable */
};

static zip_t *zip_of(const PtCheckpoint *ck) { return (zip_t *)ck->zip; }

int pt_checkpoint_sniff(const unsigned char *head, size_t n) {
    return n >= 4 && !memcmp(head, "PK\3\4", 4);
}

static int open_zip(PtCheckpoint *ck, BertError *err) {
    int code = 0;
    ck->zip = zip_open(ck->path, ZIP_RDONLY | ZIP_CHECKCONS, &code);
    if (ck->zip) return 0;
    unsigned char head[4] = {0};
    FILE *f = fopen(ck->path, "rb");
    size_t got = f ? fread(head, 1, sizeof head, f) : 0;
    if (f) fclose(f);
    if (!pt_checkpoint_sniff(head, got))
        return bert_fail(err, "%s: not a zip archive, so not a PyTorch checkpoint of torch.save (torch >= 1.6; "
                              "the older format is not read)", ck->path);
    zip_error_t ze;
    zip_error_init_with_code(&ze, code);
    bert_fail(err, "%s: damaged zip archive (truncated?): %s", ck->path, zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return -1;
}

/* The one entry <prefix>/data.pkl, whose prefix (any name, no '/') the other entries share. */
static int find_pickle(PtCheckpoint *ck, zip_uint64_t *index, char *prefix, BertError *err) {
    zip_int64_t n = zip_get_num_entries(zip_of(ck), 0);
    int found = 0;
    for (zip_int64_t i = 0; i < n; i++) {
        const char *name = zip_get_name(zip_of(ck), (zip_uint64_t)i, 0);
        size_t len = name ? strlen(name) : 0;
        if (len <= 9 || strcmp(name + len - 9, "/data.pkl") || memchr(name, '/', len - 9)) continue;
        if (found++) return bert_fail(err, "%s: several <prefix>/data.pkl entries (%s/data.pkl and %s)", ck->path, prefix, name);
        if (len - 9 >= MAX_PREFIX) return bert_fail(err, "%s: archive prefix of %zu bytes is too long", ck->path, len - 9);
        memcpy(prefix, name, len - 9);
        prefix[len - 9] = '\0';
        *index = (zip_uint64_t)i;
    }
    if (!found) return bert_fail(err, "%s: no <prefix>/data.pkl entry: a zip archive, but not one torch.save wrote", ck->path);
    return 0;
}

/* The whole of a small entry (at most max bytes), NUL-terminated. */
static int read_entry(const PtCheckpoint *ck, zip_uint64_t index, zip_uint64_t max, unsigned char **buf, size_t *len,
                      BertError *err) {
    zip_stat_t st;
    const char *name = zip_get_name(zip_of(ck), index, 0);
    if (zip_stat_index(zip_of(ck), index, 0, &st) || !(st.valid & ZIP_STAT_SIZE))
        return bert_fail(err, "%s: cannot stat %s: %s", ck->path, name, zip_strerror(zip_of(ck)));
    if (st.size > max)
        return bert_fail(err, "%s: %s has %llu bytes, more than the %llu allowed", ck->path, name,
                         (unsigned long long)st.size, (unsigned long long)max);
    zip_file_t *f = zip_fopen_index(zip_of(ck), index, 0);
    if (!f) return bert_fail(err, "%s: cannot open %s: %s", ck->path, name, zip_strerror(zip_of(ck)));
    *buf = xmalloc((size_t)st.size + 1);
    zip_int64_t got = zip_fread(f, *buf, st.size);
    int bad = got < 0 || (zip_uint64_t)got != st.size;
    if (bad) bert_fail(err, "%s: cannot read %s: %s", ck->path, name, got < 0 ? zip_file_strerror(f) : "short read");
    zip_fclose(f);
    if (bad) { free(*buf); *buf = NULL; return -1; }
    (*buf)[st.size] = '\0';
    *len = (size_t)st.size;
    return 0;
}

/* <prefix>/byteorder, written by torch >= 2.1 ("little" or "big"); older archives are little. */
static int check_byteorder(PtCheckpoint *ck, const char *prefix, BertError *err) {
    char name[MAX_PREFIX + 16];
    snprintf(name, sizeof name, "%s/byteorder", prefix);
    zip_int64_t idx = zip_name_locate(zip_of(ck), name, 0);
    if (idx < 0) return 0;
    unsigned char *text;
    size_t len;
    if (read_entry(ck, (zip_uint64_t)idx, 16, &text, &len, err)) return -1;
    int rc = 0;
    if (!strcmp((char *)text, "big"))
        rc = bert_fail(err, "%s: big-endian checkpoint (byteorder \"big\"): only little-endian ones are read", ck->path);
    else if (strcmp((char *)text, "little"))
        rc = bert_fail(err, "%s: %s is neither \"little\" nor \"big\"", ck->path, name);
    free(text);
    return rc;
}

/* Each storage the pickle names is an entry <prefix>/data/<key> of exactly numel elements. */
static int attach_storage(PtCheckpoint *ck, const char *prefix, const PkStorage *s, PtStorage *out, BertError *err) {
    char name[MAX_PREFIX + 300];
    zip_stat_t st;
    snprintf(name, sizeof name, "%s/data/%.*s", prefix, (int)s->key_len, s->key);
    zip_int64_t idx = zip_name_locate(zip_of(ck), name, 0);
    if (idx < 0) return bert_fail(err, "%s: storage entry %s is missing from the archive", ck->path, name);
    if (zip_stat_index(zip_of(ck), (zip_uint64_t)idx, 0, &st) ||
        (st.valid & (ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD)) !=
            (ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD))
        return bert_fail(err, "%s: cannot stat %s: %s", ck->path, name, zip_strerror(zip_of(ck)));
    /* torch.save stores its entries (or deflates them); an encrypted entry or another method
     * would fail only when read (a mutated archive's flags said "encrypted": fuzz_pytorch_checkpoint) */
    if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE)
        return bert_fail(err, "%s: %s is encrypted: not what torch.save writes", ck->path, name);
    if (st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE)
        return bert_fail(err, "%s: %s is compressed with zip method %d: torch.save stores or deflates", ck->path, name,
                         (int)st.comp_method);
    zip_uint64_t want = (zip_uint64_t)s->numel * st_dtype_size(s->dtype);
    if (st.size != want)
        return bert_fail(err, "%s: %s has %llu bytes, but its %lld %s elements need %llu", ck->path, name,
                         (unsigned long long)st.size, (long long)s->numel, st_dtype_name(s->dtype), (unsigned long long)want);
    out->stored = st.comp_method == ZIP_CM_STORE;
    if (!out->stored && st.size / MAX_DEFLATE_RATIO > st.comp_size)
        return bert_fail(err, "%s: %s expands %llu bytes to %llu: not plausible compression", ck->path, name,
                         (unsigned long long)st.comp_size, (unsigned long long)st.size);
    out->index = (zip_uint64_t)idx;
    return 0;
}

static bool is_state_dict(const PkValue *v) {
    if (!v || v->kind != PK_DICT || v->n == 0) return false;
    for (size_t i = 0; i + 1 < v->n; i += 2)
        if (v->items[i]->kind != PK_STR || v->items[i + 1]->kind != PK_TENSOR) return false;
    return true;
}

/* Why a candidate is not a state dict, for the error message. */
static void describe(const PkValue *v, char *buf, size_t cap) {
    if (!v || v->kind != PK_DICT) { snprintf(buf, cap, "%s", v ? pk_kind_name(v->kind) : "nothing"); return; }
    if (v->n == 0) { snprintf(buf, cap, "an empty dict"); return; }
    for (size_t i = 0; i + 1 < v->n; i += 2) {
        const PkValue *k = v->items[i], *x = v->items[i + 1];
        if (k->kind != PK_STR) { snprintf(buf, cap, "a dict with %s key", pk_kind_name(k->kind)); return; }
        if (x->kind != PK_TENSOR) {
            snprintf(buf, cap, "a dict whose '%.*s' is %s", k->len > 80 ? 80 : (int)k->len, k->s, pk_kind_name(x->kind));
            return;
        }
    }
}

static const PkValue *find_state_dict(const PtCheckpoint *ck, const PkValue *root, BertError *err) {
    if (is_state_dict(root)) return root;
    const char *names[] = {"model", "state_dict"};
    for (int i = 0; i < 2; i++) {
        const PkValue *v = pk_dict_get(root, names[i]);
        if (v) {
            if (is_state_dict(v)) return v;
            char why[160];
            describe(v, why, sizeof why);
            bert_fail(err, "%s: entry '%s' is not a state dict (a dict of tensors): it is %s", ck->path, names[i], why);
            return NULL;
        }
    }
    char why[160];
    describe(root, why, sizeof why);
    bert_fail(err, "%s: no state dict: the saved object is %s, with no 'model' or 'state_dict' entry", ck->path, why);
    return NULL;
}

/* The state dict's tensors, in its order, each named once. */
static int list_tensors(PtCheckpoint *ck, const PkValue *sd, const PkResult *r, BertError *err) {
    StrMap seen;
    strmap_init(&seen, sd->n / 2, false);
    ck->tensors = xcalloc(sd->n / 2, sizeof *ck->tensors);
    int rc = 0;
    for (size_t i = 0; i + 1 < sd->n && !rc; i += 2) {
        const PkValue *k = sd->items[i];
        const PkTensor *pt = &r->tensors[sd->items[i + 1]->i];
        bool added;
        strmap_intern(&seen, k->s, k->len, &added);
        if (memchr(k->s, '\0', k->len)) rc = bert_fail(err, "%s: a tensor name holds a NUL byte", ck->path);
        else if (!added) rc = bert_fail(err, "%s: tensor '%.*s' appears twice", ck->path, k->len > 200 ? 200 : (int)k->len, k->s);
        if (rc) break;
        PtTensor *t = &ck->tensors[ck->n++];
        t->name = xmalloc(k->len + 1);
        memcpy(t->name, k->s, k->len);
        t->name[k->len] = '\0';
        t->dtype = r->storages[pt->storage].dtype;
        t->ndim = pt->ndim, t->storage = pt->storage, t->offset = pt->offset, t->numel = pt->numel;
        memcpy(t->shape, pt->shape, sizeof t->shape);
        memcpy(t->stride, pt->stride, sizeof t->stride);
    }
    strmap_free(&seen);
    return rc;
}

/* Everything the pickle says, checked against the archive. */
static int load_pickle(PtCheckpoint *ck, const char *prefix, zip_uint64_t pkl, BertError *err) {
    unsigned char *bytes;
    size_t len;
    PkResult r;
    if (read_entry(ck, pkl, MAX_PICKLE_BYTES, &bytes, &len, err)) return -1;
    int rc = pk_unpickle(bytes, len, ck->path, &r, err);
    if (!rc) {
        ck->storages = xcalloc((size_t)r.n_storages + 1, sizeof *ck->storages);
        ck->n_storages = r.n_storages;
        for (int i = 0; i < r.n_storages && !rc; i++) rc = attach_storage(ck, prefix, &r.storages[i], &ck->storages[i], err);
        const PkValue *sd = rc ? NULL : find_state_dict(ck, r.root, err);
        rc = sd ? list_tensors(ck, sd, &r, err) : -1;
        pk_free(&r);
    }
    free(bytes);
    return rc;
}

int pt_checkpoint_open(PtCheckpoint *ck, const char *path, BertError *err) {
    memset(ck, 0, sizeof *ck);
    if (strlen(path) >= sizeof ck->path) return bert_fail(err, "%s: path too long", path);
    snprintf(ck->path, sizeof ck->path, "%s", path);
    if (check_input_file(path, "PyTorch checkpoint", err) || open_zip(ck, err)) return -1;
    char prefix[MAX_PREFIX];
    zip_uint64_t pkl = 0;
    if (find_pickle(ck, &pkl, prefix, err) || check_byteorder(ck, prefix, err) || load_pickle(ck, prefix, pkl, err)) {
        pt_checkpoint_close(ck);
        return -1;
    }
    return 0;
}

void pt_checkpoint_close(PtCheckpoint *ck) {
    for (int i = 0; i < ck->n; i++) free(ck->tensors[i].name);
    free(ck->tensors);
    free(ck->storages);
    if (ck->zip) zip_discard(zip_of(ck));
    memset(ck, 0, sizeof *ck);
}

/* ---- reading ---- */

/* n bytes from byte `at` of an open entry: a seek where the entry is stored, else reading
 * past what comes before. */
static int read_range(zip_file_t *f, bool seekable, uint64_t at, void *dst, size_t n) {
    if (seekable && at && zip_fseek(f, (zip_int64_t)at, SEEK_SET)) return -1;
    if (!seekable) {
        unsigned char skip[65536];
        while (at > 0) {
            zip_int64_t got = zip_fread(f, skip, at < sizeof skip ? at : sizeof skip);
            if (got <= 0) return -1;
            at -= (uint64_t)got;
        }
    }
    for (size_t done = 0; done < n;) {
        zip_int64_t got = zip_fread(f, (unsigned char *)dst + done, n - done);
        if (got <= 0) return -1;
        done += (size_t)got;
    }
    return 0;
}

static bool is_contiguous(const PtTensor *t) {
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != expect) return false;
        expect *= t->shape[d];
    }
    return true;
}

/* Row-major copy of the view from src, which starts at the view's first element. */
static void gather(const PtTensor *t, const unsigned char *src, unsigned char *dst, size_t es) {
    int64_t idx[ST_MAX_DIMS] = {0}, pos = 0;
    for (int64_t k = 0; k < t->numel; k++) {
        memcpy(dst + (size_t)k * es, src + (size_t)pos * es, es);
        for (int d = t->ndim - 1; d >= 0; d--) {
            pos += t->stride[d];
            if (++idx[d] < t->shape[d]) break;
            pos -= t->stride[d] * t->shape[d];
            idx[d] = 0;
        }
    }
}

int pt_checkpoint_read(const PtCheckpoint *ck, int i, void *dst, size_t dst_bytes, BertError *err) {
    if (i < 0 || i >= ck->n) return bert_fail(err, "%s: no tensor %d (there are %d)", ck->path, i, ck->n);
    const PtTensor *t = &ck->tensors[i];
    const PtStorage *s = &ck->storages[t->storage];
    size_t es = st_dtype_size(t->dtype), need = (size_t)t->numel * es;
    if (dst_bytes < need)
        return bert_fail(err, "%s: tensor '%s' needs %zu bytes, given %zu", ck->path, t->name, need, dst_bytes);
    if (need == 0) return 0;
    zip_file_t *f = zip_fopen_index(zip_of(ck), s->index, 0);
    if (!f) return bert_fail(err, "%s: tensor '%s': cannot open its storage: %s", ck->path, t->name, zip_strerror(zip_of(ck)));
    int rc;
    if (is_contiguous(t)) {
        rc = read_range(f, s->stored, (uint64_t)t->offset * es, dst, need);
    } else {
        int64_t span = 1;   /* elements from the first to the last the view reaches (checked at open) */
        for (int d = 0; d < t->ndim; d++) span += (t->shape[d] - 1) * t->stride[d];
        unsigned char *buf = xmalloc((size_t)span * es);
        rc = read_range(f, s->stored, (uint64_t)t->offset * es, buf, (size_t)span * es);
        if (!rc) gather(t, buf, dst, es);
        free(buf);
    }
    if (rc) bert_fail(err, "%s: tensor '%s': cannot read its storage: %s", ck->path, t->name, zip_file_strerror(f));
    zip_fclose(f);
    return rc;
}
