#include "io/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/test_hooks.h"

static const struct {
    const char *name;
    size_t size;
} DTYPES[] = {
    [ST_F64] = {"F64", 8}, [ST_F32] = {"F32", 4}, [ST_F16] = {"F16", 2}, [ST_BF16] = {"BF16", 2},
    [ST_I64] = {"I64", 8}, [ST_I32] = {"I32", 4}, [ST_I16] = {"I16", 2}, [ST_I8] = {"I8", 1},
    [ST_U8] = {"U8", 1},   [ST_BOOL] = {"BOOL", 1},
};
#define NDTYPES ((int)(sizeof DTYPES / sizeof DTYPES[0]))

/* Headers larger than this are not plausible and would only exhaust memory. */
#define MAX_HEADER_BYTES ((uint64_t)100 << 20)
/* Bound on every dimension and on every running product of them (2^53, exact in a
 * double): keeps the int64 conversions and st_numel's products defined even for shapes
 * such as [2^40, 2^40, 0], which need no bytes. */
#define MAX_ELEMENTS 9007199254740992.0

const char *st_dtype_name(StDtype d) { return DTYPES[d].name; }
size_t st_dtype_size(StDtype d) { return DTYPES[d].size; }

int64_t st_numel(const StTensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

static int parse_dtype(const char *s, StDtype *out) {
    for (int i = 0; i < NDTYPES; i++)
        if (!strcmp(DTYPES[i].name, s)) { *out = (StDtype)i; return 0; }
    return -1;
}

/* Parses one header entry, checking that its byte range lies inside the data section
 * and matches its shape and dtype exactly. */
static int parse_entry(const cJSON *item, StTensor *t, size_t data_len, const char *path, BertError *err) {
    const char *name = item->string;
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsObject(item) || !cJSON_IsString(dtype) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs) ||
        cJSON_GetArraySize(offs) != 2)
        return bert_fail(err, "%s: tensor '%s': malformed header entry", path, name);
    if (parse_dtype(dtype->valuestring, &t->dtype) != 0)
        return bert_fail(err, "%s: tensor '%s': unsupported dtype %s", path, name, dtype->valuestring);
    t->ndim = cJSON_GetArraySize(shape);
    if (t->ndim > ST_MAX_DIMS) return bert_fail(err, "%s: tensor '%s': too many dimensions (%d)", path, name, t->ndim);
    double bytes = (double)st_dtype_size(t->dtype), elements = 1;
    for (int i = 0; i < t->ndim; i++) {
        const cJSON *d = cJSON_GetArrayItem(shape, i);
        if (!cJSON_IsNumber(d) || !(d->valuedouble >= 0 && d->valuedouble <= MAX_ELEMENTS) ||
            d->valuedouble != (double)(int64_t)d->valuedouble || (elements *= d->valuedouble) > MAX_ELEMENTS)
            return bert_fail(err, "%s: tensor '%s': bad shape", path, name);
        t->shape[i] = (int64_t)d->valuedouble;
        bytes *= d->valuedouble;
    }
    const cJSON *begin = cJSON_GetArrayItem(offs, 0), *end = cJSON_GetArrayItem(offs, 1);
    if (!cJSON_IsNumber(begin) || !cJSON_IsNumber(end))
        return bert_fail(err, "%s: tensor '%s': data_offsets are not numbers", path, name);
    double b = begin->valuedouble, e = end->valuedouble;
    if (b != floor(b) || e != floor(e))
        return bert_fail(err, "%s: tensor '%s': data offsets [%g, %g) are not whole numbers", path, name, b, e);
    if (!(b >= 0 && e >= b && e <= (double)data_len))
        return bert_fail(err, "%s: tensor '%s': data offsets [%.0f, %.0f) outside the %zu-byte data section (truncated file?)",
                         path, name, b, e, data_len);
    if (e - b != bytes)
        return bert_fail(err, "%s: tensor '%s': %.0f bytes stored but shape and dtype need %.0f", path, name, e - b, bytes);
    t->begin = (size_t)b;
    t->end = (size_t)e;
    t->name = xstrdup(name);
    return 0;
}

static int compare_tensor_names(const void *a, const void *b, void *table) {
    const StTensor *t = table;
    TEST_COUNT_WORK(1);   /* the duplicate check's scaling test counts comparisons */
    return strcmp(t[*(const int *)a].name, t[*(const int *)b].name);
}

static int compare_begin(const void *a, const void *b, void *table) {
    const StTensor *t = table;
    size_t x = t[*(const int *)a].begin, y = t[*(const int *)b].begin;
    if (x != y) return (x > y) - (x < y);
    return (t[*(const int *)a].end > t[*(const int *)b].end) - (t[*(const int *)a].end < t[*(const int *)b].end);
}

/* The format's rule (as the reference library checks it): the tensors' byte ranges, in
 * order, follow one another without gaps or overlaps and cover the data section exactly. */
static int check_offsets_cover(const SafeTensors *st, BertError *err) {
    int *order = xmalloc(sizeof(int) * (size_t)(st->n + 1));
    for (int i = 0; i < st->n; i++) order[i] = i;
    qsort_r(order, (size_t)st->n, sizeof(int), compare_begin, st->tensors);
    size_t at = 0;
    int rc = 0;
    for (int i = 0; i < st->n && rc == 0; i++) {
        const StTensor *t = &st->tensors[order[i]];
        if (t->begin != at)
            rc = bert_fail(err, "%s: tensor '%s' starts at byte %zu of the data, expected %zu (%s)", st->path, t->name,
                           t->begin, at, t->begin < at ? "overlapping another tensor" : "a gap before it");
        at = t->end;
    }
    if (rc == 0 && at != st->data_len)
        rc = bert_fail(err, "%s: the tensors cover %zu of the %zu data bytes", st->path, at, st->data_len);
    free(order);
    return rc;
}

static int parse_header(SafeTensors *st, const char *json, size_t len, BertError *err) {
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return bert_fail(err, "%s: header is not a JSON object (not a safetensors file?)", st->path);
    }
    int count = cJSON_GetArraySize(root);
    st->tensors = xcalloc((size_t)count, sizeof(StTensor));
    st->n = 0;
    int rc = 0;
    for (const cJSON *item = root->child; item && rc == 0; item = item->next) {
        if (!strcmp(item->string, "__metadata__")) continue;
        if ((rc = parse_entry(item, &st->tensors[st->n], st->data_len, st->path, err)) == 0) st->n++;
    }
    cJSON_Delete(root);
    if (rc != 0) return rc;
    /* names sorted once: duplicates are neighbours, and look-ups are binary searches (a
     * header of 100,000 names costs n log n, not n^2) */
    st->sorted = xmalloc(sizeof(int) * (size_t)(st->n + 1));
    for (int i = 0; i < st->n; i++) st->sorted[i] = i;
    qsort_r(st->sorted, (size_t)st->n, sizeof(int), compare_tensor_names, st->tensors);
    for (int i = 1; i < st->n; i++)
        if (!strcmp(st->tensors[st->sorted[i]].name, st->tensors[st->sorted[i - 1]].name))
            return bert_fail(err, "%s: tensor '%s' appears twice", st->path, st->tensors[st->sorted[i]].name);
    return check_offsets_cover(st, err);
}

int safetensors_open(SafeTensors *st, const char *path, BertError *err) {
    memset(st, 0, sizeof *st);
    snprintf(st->path, sizeof st->path, "%s", path);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return bert_fail(err, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || sb.st_size < 8) {
        close(fd);
        return bert_fail(err, "%s: too short to be a safetensors file (truncated?)", path);
    }
    st->map_len = (size_t)sb.st_size;
    st->map = mmap(NULL, st->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (st->map == MAP_FAILED) {
        st->map = NULL;
        return bert_fail(err, "cannot map %s: %s", path, strerror(errno));
    }
    const unsigned char *p = st->map;
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = (header_len << 8) | p[i];
    if (header_len > MAX_HEADER_BYTES || header_len > st->map_len - 8) {
        safetensors_close(st);
        return bert_fail(err, "%s: header length %llu does not fit in the %zu-byte file (truncated or not safetensors)",
                         path, (unsigned long long)header_len, (size_t)sb.st_size);
    }
    st->data = p + 8 + header_len;
    st->data_len = st->map_len - 8 - header_len;
    if (parse_header(st, (const char *)p + 8, header_len, err) != 0) {
        safetensors_close(st);
        return -1;
    }
    return 0;
}

void safetensors_close(SafeTensors *st) {
    for (int i = 0; i < st->n; i++) free(st->tensors[i].name);
    free(st->tensors), free(st->sorted);
    st->sorted = NULL;
    if (st->map) munmap(st->map, st->map_len);
    st->tensors = NULL;
    st->map = NULL;
    st->n = 0;
}

const StTensor *safetensors_find(const SafeTensors *st, const char *name) {
    int lo = 0, hi = st->n - 1;
    while (st->sorted && lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(st->tensors[st->sorted[mid]].name, name);
        if (c == 0) return &st->tensors[st->sorted[mid]];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);        /* inf / nan */
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13); /* normal: rebias 15 -> 127 */
    } else if (man == 0) {
        bits = sign;                                     /* zero */
    } else {                                             /* subnormal: normalise */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Finds `name` and checks its shape against the caller's expectation. */
static const StTensor *find_checked(const SafeTensors *st, const char *name, const int64_t *shape, int ndim,
                                    BertError *err) {
    const StTensor *t = safetensors_find(st, name);
    if (!t) {
        bert_fail(err, "%s: missing tensor '%s'", st->path, name);
        return NULL;
    }
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char want[128] = "", got[128] = "";
        for (int i = 0; i < ndim; i++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? ", " : "", (long long)shape[i]);
        for (int i = 0; i < t->ndim; i++) snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        bert_fail(err, "%s: tensor '%s' has shape [%s], expected [%s]", st->path, name, got, want);
        return NULL;
    }
    return t;
}

int st_to_f32(StDtype dtype, const void *from, int64_t n, float *dst) {
    const unsigned char *src = from;
    switch (dtype) {
    case ST_F32: memcpy(dst, src, (size_t)n * 4); return 0;
    case ST_F64:
        for (int64_t i = 0; i < n; i++) { double d; memcpy(&d, src + 8 * i, 8); dst[i] = (float)d; }
        return 0;
    case ST_F16:
        for (int64_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, src + 2 * i, 2); dst[i] = half_to_float(h); }
        return 0;
    case ST_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h; memcpy(&h, src + 2 * i, 2);
            uint32_t bits = (uint32_t)h << 16;
            memcpy(&dst[i], &bits, 4);
        }
        return 0;
    default:
        return -1;
    }
}

int safetensors_read_f32(const SafeTensors *st, const char *name, const int64_t *shape, int ndim, float *dst,
                         BertError *err) {
    const StTensor *t = find_checked(st, name, shape, ndim, err);
    if (!t) return -1;
    if (st_to_f32(t->dtype, st->data + t->begin, st_numel(t), dst) != 0)
        return bert_fail(err, "%s: tensor '%s' has dtype %s, expected a floating-point type", st->path, name, st_dtype_name(t->dtype));
    return 0;
}

int safetensors_read_i32(const SafeTensors *st, const char *name, const int64_t *shape, int ndim, int32_t *dst,
                         BertError *err) {
    const StTensor *t = find_checked(st, name, shape, ndim, err);
    if (!t) return -1;
    const unsigned char *src = st->data + t->begin;
    int64_t n = st_numel(t);
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        switch (t->dtype) {
        case ST_I64: { int64_t x; memcpy(&x, src + 8 * i, 8); v = x; break; }
        case ST_I32: { int32_t x; memcpy(&x, src + 4 * i, 4); v = x; break; }
        case ST_I16: { int16_t x; memcpy(&x, src + 2 * i, 2); v = x; break; }
        case ST_I8: v = (int8_t)src[i]; break;
        case ST_U8: case ST_BOOL: v = src[i]; break;
        default:
            return bert_fail(err, "%s: tensor '%s' has dtype %s, expected an integer type", st->path, name, st_dtype_name(t->dtype));
        }
        if (v < INT32_MIN || v > INT32_MAX) return bert_fail(err, "%s: tensor '%s': value %lld overflows int32", st->path, name, (long long)v);
        dst[i] = (int32_t)v;
    }
    return 0;
}

static char *build_header(const StWriteTensor *tensors, int n, const char *const *metadata, size_t *total_data) {
    cJSON *root = cJSON_CreateObject();
    if (metadata && metadata[0]) {
        cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; metadata[i] && metadata[i + 1]; i += 2) cJSON_AddStringToObject(meta, metadata[i], metadata[i + 1]);
    }
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        const StWriteTensor *t = &tensors[i];
        size_t bytes = st_dtype_size(t->dtype);
        cJSON *e = cJSON_AddObjectToObject(root, t->name);
        cJSON_AddStringToObject(e, "dtype", st_dtype_name(t->dtype));
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < t->ndim; d++) {
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
            bytes *= (size_t)t->shape[d];
        }
        cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(offset + bytes)));
        offset += bytes;
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    *total_data = offset;
    return json;
}

static int compare_strings(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int safetensors_write(const char *path, const StWriteTensor *tensors, int n, const char *const *metadata,
                      BertError *err) {
    const char **names = xmalloc(sizeof(char *) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) names[i] = tensors[i].name;
    qsort(names, (size_t)n, sizeof(char *), compare_strings);
    for (int i = 1; i < n; i++)
        if (!strcmp(names[i], names[i - 1])) {
            int rc = bert_fail(err, "safetensors_write: tensor '%s' given twice", names[i]);
            free(names);
            return rc;
        }
    free(names);
    size_t data_bytes;
    char *json = build_header(tensors, n, metadata, &data_bytes);
    size_t json_len = strlen(json);
    size_t padded = (json_len + 7) & ~(size_t)7;  /* data section starts 8-byte aligned */
    AtomicFile af;
    if (atomic_open(&af, path, err) != 0) { free(json); return -1; }
    unsigned char len_le[8];
    for (int i = 0; i < 8; i++) len_le[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    fwrite(len_le, 1, 8, af.fp);
    fwrite(json, 1, json_len, af.fp);
    for (size_t i = json_len; i < padded; i++) fputc(' ', af.fp);
    free(json);
    for (int i = 0; i < n; i++) {
        size_t bytes = st_dtype_size(tensors[i].dtype);
        for (int d = 0; d < tensors[i].ndim; d++) bytes *= (size_t)tensors[i].shape[d];
        if (bytes && fwrite(tensors[i].data, 1, bytes, af.fp) != bytes) break;
    }
    return atomic_commit(&af, err);
}
