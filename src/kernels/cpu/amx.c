#include "kernels/cpu/amx.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/common.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define AMX_BUILD 1
#else
#define AMX_BUILD 0
#endif

/* Linux's arch_prctl request for a feature whose state the kernel allocates on first use. */
enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };

static bool amx_int8_ok, amx_bf16_ok;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_probe(void) {
#if AMX_BUILD
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    const bool tile = d & (1u << 24), int8 = d & (1u << 25), bf16 = d & (1u << 22);
    if (!tile || syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) return;
    amx_int8_ok = int8, amx_bf16_ok = bf16;
#endif
}

bool amx_int8_available(void) {
    pthread_once(&amx_once, amx_probe);
    return amx_int8_ok;
}

bool amx_bf16_available(void) {
    pthread_once(&amx_once, amx_probe);
    return amx_bf16_ok;
}

/* -1: not decided yet (the environment's BERT_AMX decides on first use). */
static _Atomic int amx_on = -1, amx_gen;

/* oneDNN's ISA cap (ONEDNN_MAX_CPU_ISA, or DNNL_ as before) set below AMX: the loops here keep
 * to it, so that a capped run tests the paths of a CPU without AMX throughout. */
static bool isa_capped_below_amx(void) {
    const char *cap = getenv("ONEDNN_MAX_CPU_ISA");
    if (!cap) cap = getenv("DNNL_MAX_CPU_ISA");
    return cap && *cap && !strcasestr(cap, "AMX") && strcasecmp(cap, "ALL") != 0;
}

bool amx_enabled(void) {
    int on = amx_on;
    if (on < 0) {
        const char *env = getenv("BERT_AMX");
        on = !(env && !strcmp(env, "0")) && !isa_capped_below_amx();
        amx_on = on;
    }
    return on;
}

void amx_set_enabled(bool on) {
    amx_on = on;
    amx_gen++;
}

int amx_generation(void) { return amx_gen; }

bool amx_int8_shape_ok(int M, int N, int K) { return M > 0 && N > 0 && K > 0 && M % 16 == 0 && N % 32 == 0 && K % 64 == 0; }

/* ---- attention (bf16) ---- */

/* The scratch's parts for L keys and d values per head: keys rounded up to 32 (two tiles of 16
 * keys in the scores; 32 keys a step in the context), query rows in blocks of 32 (two tiles). */
typedef struct {
    uint32_t *kt;   /* K^T [d/2][Lk]: a key's pair of d values (2 bf16) per 32-bit element */
    uint16_t *vp;   /* V in pairs of keys [Lv/2][2d]: for each d value, the two keys' values */
    float *s;       /* scores of 32 query rows [32][Lk] */
    uint16_t *p;    /* their probabilities [32][Lv] */
    uint16_t *qt;   /* a last block of fewer than 32 query rows, zero rows after them [32][d] */
    float *ct;      /* its context [32][d] */
    int Lk, Lv;
} AttnScratch;

static size_t up64(size_t n) { return (n + 63) / 64 * 64; }

/* The parts' sizes in bytes, each rounded up to 64 (kt, vp, s, p, qt, ct). */
enum { ATTN_PARTS = 6 };
static void attn_sizes(int L, int d, size_t size[ATTN_PARTS]) {
    const size_t keys = (size_t)(L + 31) / 32 * 32, D = (size_t)d;
    const size_t bytes[ATTN_PARTS] = {sizeof(uint32_t) * D / 2 * keys, sizeof(uint16_t) * keys * D,
                                      sizeof(float) * 32 * keys,        sizeof(uint16_t) * 32 * keys,
                                      sizeof(uint16_t) * 32 * D,        sizeof(float) * 32 * D};
    for (int i = 0; i < ATTN_PARTS; i++) size[i] = up64(bytes[i]);
}

static AttnScratch attn_scratch(void *base, int L, int d) {
    size_t size[ATTN_PARTS];
    attn_sizes(L, d, size);
    char *part[ATTN_PARTS], *b = base;
    for (int i = 0; i < ATTN_PARTS; i++) part[i] = b, b += size[i];
    return (AttnScratch){.kt = (uint32_t *)part[0], .vp = (uint16_t *)part[1], .s = (float *)part[2],
                         .p = (uint16_t *)part[3], .qt = (uint16_t *)part[4], .ct = (float *)part[5],
                         .Lk = (L + 31) / 32 * 32, .Lv = (L + 31) / 32 * 32};
}

bool amx_attention_ok(int L, int d) { return (d == 32 || d == 64) && L >= 1 && L <= 512 && amx_bf16_available(); }

size_t amx_attention_scratch_bytes(int L, int d) {
    size_t size[ATTN_PARTS], total = 0;
    attn_sizes(L, d, size);
    for (int i = 0; i < ATTN_PARTS; i++) total += size[i];
    return total;
}

#if AMX_BUILD
#define AMX_TARGET __attribute__((target("amx-tile,amx-int8,amx-bf16,avx512f,avx512bw")))

/* ldtilecfg's 64-byte operand: palette 1, every tile 16 rows of 64 bytes. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} __attribute__((packed, aligned(64))) TileConfig;

/* The tiles: C sums 0-3 (rows r, r + 16 x columns n, n + 16), A 4-5 (the two row tiles of a
 * step of 64 K values), B 6-7 (the two column tiles). A B tile is 16 rows (groups of 4 K
 * values) of 64 bytes (16 columns x 4), 256 bytes apart in the packed block of 64 columns. */
enum { PACKED_ROW = 256, PACKED_BLOCK = 4096 };

/* The 32 x 32 (two_rows) or 16 x 32 sums at C over all K values: zeroed first, then one step
 * of 64 at a time. a: A's first row at k 0; b: the packed B's first column's strip. */
static inline AMX_TARGET void sums_32(const int8_t *a, int lda, const int8_t *b, int32_t *C, int ldc, int K,
                                      bool two_rows) {
    _tile_zero(0);
    _tile_zero(1);
    if (two_rows) {
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int k = 0; k < K; k += 64) {
        const int8_t *bk = b + (size_t)(k / 64) * PACKED_BLOCK;
        _tile_loadd(6, bk, PACKED_ROW);
        _tile_loadd(7, bk + 64, PACKED_ROW);
        _tile_loadd(4, a + k, lda);
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        if (!two_rows) continue;
        _tile_loadd(5, a + (size_t)16 * lda + k, lda);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
    }
    const size_t stride = sizeof(int32_t) * (size_t)ldc;
    _tile_stored(0, C, stride);
    _tile_stored(1, C + 16, stride);
    if (!two_rows) return;
    _tile_stored(2, C + (size_t)16 * ldc, stride);
    _tile_stored(3, C + (size_t)16 * ldc + 16, stride);
}

/* The packed B's strip of the 32 columns from n (a multiple of 32). */
static inline const int8_t *strip(const int8_t *B, int K, int n) {
    return B + (size_t)(n / 64) * (size_t)(K / 64) * PACKED_BLOCK + (size_t)(n % 64) * 4;
}

/* Which operand stays while the other streams: a weight that fits in 3/4 of L2 is read from
 * there for every pair of A's row tiles, which stay in L1 (bert-base, 64 rows, 2 threads: 7.0
 * TOP/s for N = K = 768 against 6.0 the other way, 6.8 against 5.0 for N = 1536); a larger one
 * would come from L3 each time, so each strip of 32 columns stays while the rows pass (N = 768,
 * K = 3072: 5.1 against 3.2; N = 2304, K = 768: 4.2 against 3.8). */
static AMX_TARGET void configure_tiles(void) {
    TileConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.bytes_per_row[t] = 64, cfg.rows[t] = 16;
    _tile_loadconfig(&cfg);
}

AMX_TARGET void amx_int8_product(int M, int N, int K, const int8_t *A, int lda, const int8_t *B, int32_t *C, int ldc) {
    configure_tiles();
    if ((size_t)N * K <= l2_cache_bytes() / 4 * 3) {
        for (int m = 0; m < M; m += 32)
            for (int n = 0; n < N; n += 32)
                sums_32(A + (size_t)m * lda, lda, strip(B, K, n), C + (size_t)m * ldc + n, ldc, K, m + 32 <= M);
    } else {
        for (int n = 0; n < N; n += 32)
            for (int m = 0; m < M; m += 32)
                sums_32(A + (size_t)m * lda, lda, strip(B, K, n), C + (size_t)m * ldc + n, ldc, K, m + 32 <= M);
    }
    _tile_release();   /* oneDNN's kernels load their own configuration before theirs */
}

AMX_TARGET int amx_int8_instruction_loop(long iters) {
    int8_t data[4][1024] __attribute__((aligned(64)));
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < 1024; i++) data[t][i] = (int8_t)((i * 2654435761u + 977u * t) >> 11);
    configure_tiles();
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, data[0], 64);
    _tile_loadd(5, data[1], 64);
    _tile_loadd(6, data[2], 64);
    _tile_loadd(7, data[3], 64);
    for (long i = 0; i < iters; i++) {   /* four independent sums: the instruction's latency hidden */
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
    }
    int32_t out[256] __attribute__((aligned(64)));
    _tile_stored(3, out, 64);
    _tile_release();
    return out[0] + out[255];
}
/* Columns 4l .. 4l + 3 of the 16 x 16 transpose from u (see transpose16). */
#define TRANSPOSE_COLUMNS(l)                                                                                   \
    for (int m = 0; m < 4; m++) {                                                                              \
        const __m512i x = _mm512_shuffle_i32x4(u[m], u[4 + m], (l) * 0x55);                                   \
        const __m512i y = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], (l) * 0x55);                               \
        out[4 * (l) + m] = _mm512_shuffle_i32x4(x, y, 0x88);                                                   \
    }

/* out[c][r] = r[r][c] for 16 x 16 32-bit elements. After the two unpack stages u[4j + m] holds,
 * in its 128-bit lane l, column 4l + m of rows 4j .. 4j + 3; the shuffles gather lane l of
 * u[m], u[4 + m], u[8 + m], u[12 + m]. */
static inline AMX_TARGET void transpose16(const __m512i r[16], __m512i out[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int j = 0; j < 4; j++) {
        u[4 * j] = _mm512_unpacklo_epi64(t[4 * j], t[4 * j + 2]);
        u[4 * j + 1] = _mm512_unpackhi_epi64(t[4 * j], t[4 * j + 2]);
        u[4 * j + 2] = _mm512_unpacklo_epi64(t[4 * j + 1], t[4 * j + 3]);
        u[4 * j + 3] = _mm512_unpackhi_epi64(t[4 * j + 1], t[4 * j + 3]);
    }
    TRANSPOSE_COLUMNS(0)
    TRANSPOSE_COLUMNS(1)
    TRANSPOSE_COLUMNS(2)
    TRANSPOSE_COLUMNS(3)
}

/* K^T: for each block of 16 keys and 32 d values, the keys' rows (16 pairs each) transposed;
 * keys from L on are zero. */
static AMX_TARGET void stage_keys(const AttnScratch *a, const uint16_t *k, int ld, int L, int d) {
    for (int kb = 0; kb < a->Lk; kb += 16)
        for (int dc = 0; dc < d / 32; dc++) {
            __m512i r[16], out[16];
            for (int i = 0; i < 16; i++)
                r[i] = kb + i < L ? _mm512_loadu_si512(k + (size_t)(kb + i) * ld + dc * 32) : _mm512_setzero_si512();
            transpose16(r, out);
            for (int i = 0; i < 16; i++) _mm512_storeu_si512(a->kt + (size_t)(dc * 16 + i) * a->Lk + kb, out[i]);
        }
}

/* V in pairs of keys: row j of vp interleaves keys 2j and 2j + 1 value by value; keys from L
 * on are zero. */
static AMX_TARGET void stage_values(const AttnScratch *a, const uint16_t *v, int ld, int L, int d) {
    int16_t lo[32], hi[32];
    for (int n = 0; n < 16; n++) lo[2 * n] = (int16_t)n, lo[2 * n + 1] = (int16_t)(32 + n), hi[2 * n] = (int16_t)(16 + n),
                                 hi[2 * n + 1] = (int16_t)(48 + n);
    const __m512i ilo = _mm512_loadu_si512(lo), ihi = _mm512_loadu_si512(hi);
    for (int j = 0; j < a->Lv / 2; j++)
        for (int dc = 0; dc < d / 32; dc++) {
            const int k0 = 2 * j, k1 = 2 * j + 1;
            const __m512i x = k0 < L ? _mm512_loadu_si512(v + (size_t)k0 * ld + dc * 32) : _mm512_setzero_si512();
            const __m512i y = k1 < L ? _mm512_loadu_si512(v + (size_t)k1 * ld + dc * 32) : _mm512_setzero_si512();
            uint16_t *o = a->vp + (size_t)j * 2 * d + dc * 64;
            _mm512_storeu_si512(o, _mm512_permutex2var_epi16(x, ilo, y));
            _mm512_storeu_si512(o + 32, _mm512_permutex2var_epi16(x, ihi, y));
        }
}

/* The context's 2 x 2 tiles of a step, as in sums_32: A row tiles 4, 5 (query rows 0-15, 16-31),
 * B column tiles 6, 7, sums 0-3 (rows 0-15 x columns 0-15, 16-31; rows 16-31 x the same):
 * four independent sums, each operand tile used twice. */
static inline AMX_TARGET void products_2x2(void) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
}

static inline AMX_TARGET void zero_2x2(void) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
}

/* The four sums into out [32][16 + 16] (rows ld floats apart). */
static inline AMX_TARGET void store_2x2(float *out, size_t ld) {
    const size_t stride = sizeof(float) * ld;
    _tile_stored(0, out, stride);
    _tile_stored(1, out + 16, stride);
    _tile_stored(2, out + 16 * ld, stride);
    _tile_stored(3, out + 16 * ld + 16, stride);
}

/* S for 32 query rows (q: their first, rows ldq bytes apart) against every key, into s (rows
 * a->Lk apart). The rows' Q tiles stay loaded (tiles 2, 3: rows 0-15, d in two halves of 32
 * where d is 64; 4, 5: rows 16-31), and each block of 16 keys brings its K^T tiles (6, 7) once
 * for both row tiles, d in order: attention alone 7% faster than the 2 x 2 step reloading Q's
 * tiles for every 32 keys (bert-base, 32 x 128). */
static AMX_TARGET void scores32(const AttnScratch *a, const uint16_t *q, size_t ldq, int d, float *s) {
    const size_t ldkt = sizeof(uint32_t) * (size_t)a->Lk, lds = sizeof(float) * (size_t)a->Lk;
    _tile_loadd(2, q, ldq);
    _tile_loadd(4, (const char *)q + 16 * ldq, ldq);
    if (d == 64) {
        _tile_loadd(3, q + 32, ldq);
        _tile_loadd(5, (const char *)(q + 32) + 16 * ldq, ldq);
    }
    for (int j = 0; j < a->Lk; j += 16) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_loadd(6, a->kt + j, ldkt);
        _tile_dpbf16ps(0, 2, 6);
        _tile_dpbf16ps(1, 4, 6);
        if (d == 64) {
            _tile_loadd(7, a->kt + (size_t)16 * a->Lk + j, ldkt);
            _tile_dpbf16ps(0, 3, 7);
            _tile_dpbf16ps(1, 5, 7);
        }
        _tile_stored(0, s + j, lds);
        _tile_stored(1, s + (size_t)16 * a->Lk + j, lds);
    }
}

/* C = P V for the 32 rows of p (a->Lv apart) into c (rows ldc floats apart): 32 values of d at a
 * time, the keys in order, 32 a step. */
static AMX_TARGET void context32(const AttnScratch *a, const uint16_t *p, float *c, int ldc, int d) {
    const size_t ldvp = sizeof(uint16_t) * 2 * (size_t)d, ldp = sizeof(uint16_t) * (size_t)a->Lv;
    for (int d0 = 0; d0 < d; d0 += 32) {
        zero_2x2();
        for (int kb = 0; kb < a->Lv; kb += 32) {
            const uint16_t *vp = a->vp + (size_t)kb * d + 2 * d0;
            _tile_loadd(4, p + kb, ldp);
            _tile_loadd(5, p + (size_t)16 * a->Lv + kb, ldp);
            _tile_loadd(6, vp, ldvp);
            _tile_loadd(7, vp + 32, ldvp);
            products_2x2();
        }
        store_2x2(c + d0, (size_t)ldc);
    }
}

AMX_TARGET void amx_attention_head(const uint16_t *q, const uint16_t *k, const uint16_t *v, int ld, int T, int L, int d,
                                   float *c, int ldc, void *scratch, AmxSoftmax softmax, void *arg) {
    const AttnScratch a = attn_scratch(scratch, L, d);
    stage_keys(&a, k, ld, L, d);
    stage_values(&a, v, ld, L, d);
    memset(a.p, 0, sizeof(uint16_t) * 32 * (size_t)a.Lv);   /* the columns from L on stay 0 */
    configure_tiles();
    for (int row0 = 0; row0 < T; row0 += 32) {
        const int rows = T - row0 < 32 ? T - row0 : 32;
        const uint16_t *qb = q + (size_t)row0 * ld;
        size_t ldq = sizeof(uint16_t) * (size_t)ld;
        if (rows < 32) {   /* the rows after the sequence's are not to be read */
            memset(a.qt, 0, sizeof(uint16_t) * 32 * (size_t)d);
            for (int i = 0; i < rows; i++) memcpy(a.qt + (size_t)i * d, qb + (size_t)i * ld, sizeof(uint16_t) * d);
            qb = a.qt, ldq = sizeof(uint16_t) * (size_t)d;
        }
        scores32(&a, qb, ldq, d, a.s);
        softmax(arg, a.s, a.Lk, a.p, a.Lv, row0, rows);
        if (rows == 32) {
            context32(&a, a.p, c + (size_t)row0 * ldc, ldc, d);
            continue;
        }
        context32(&a, a.p, a.ct, d, d);
        for (int i = 0; i < rows; i++) memcpy(c + (size_t)(row0 + i) * ldc, a.ct + (size_t)i * d, sizeof(float) * d);
    }
    _tile_release();
}
#else
int amx_int8_instruction_loop(long iters) {
    (void)iters;
    return 0;
}

void amx_int8_product(int M, int N, int K, const int8_t *A, int lda, const int8_t *B, int32_t *C, int ldc) {
    (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)C, (void)ldc;
}

void amx_attention_head(const uint16_t *q, const uint16_t *k, const uint16_t *v, int ld, int T, int L, int d,
                        float *c, int ldc, void *scratch, AmxSoftmax softmax, void *arg) {
    (void)q, (void)k, (void)v, (void)ld, (void)T, (void)L, (void)d, (void)c, (void)ldc, (void)scratch, (void)softmax,
        (void)arg;
}
#endif

