#include "kernels/cpu/amx_int8.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define AMX_BUILD 1
#else
#define AMX_BUILD 0
#endif

/* Linux's arch_prctl request for a feature whose state the kernel allocates on first use. */
enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };

static bool amx_ok;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_probe(void) {
#if AMX_BUILD
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    const bool tile = d & (1u << 24), int8 = d & (1u << 25);
    amx_ok = tile && int8 && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#endif
}

bool amx_int8_available(void) {
    pthread_once(&amx_once, amx_probe);
    return amx_ok;
}

bool amx_int8_shape_ok(int M, int N, int K) { return M > 0 && N > 0 && K > 0 && M % 16 == 0 && N % 32 == 0 && K % 64 == 0; }

#if AMX_BUILD
#define AMX_TARGET __attribute__((target("amx-tile,amx-int8")))

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

/* The 32 x 32 (two_rows) or 16 x 32 sums at C from K values k0 .. k1 - 1: zeroed first, then
 * one step of 64 at a time. a: A's first row at k 0; b: the packed B's first column's strip. */
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

static size_t l2_bytes(void) {
    static long l2;
    if (!l2) {
        const long got = sysconf(_SC_LEVEL2_CACHE_SIZE);
        l2 = got > 0 ? got : 1L << 20;
    }
    return (size_t)l2;
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
    if ((size_t)N * K <= l2_bytes() / 4 * 3) {
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
#else
int amx_int8_instruction_loop(long iters) {
    (void)iters;
    return 0;
}

void amx_int8_product(int M, int N, int K, const int8_t *A, int lda, const int8_t *B, int32_t *C, int ldc) {
    (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)C, (void)ldc;
}
#endif
