/* data/pyrandom: CPython 3.11's `random` streams, value for value, against
 * tests/data/pretraining/pyrandom_streams.txt (tools/make_pretraining_fixtures.py). */
#include <inttypes.h>
#include <stdlib.h>

#include "data/pyrandom.h"
#include "test.h"

#define STREAMS "tests/data/pretraining/pyrandom_streams.txt"

typedef struct {
    long seeds, values, mismatches;
} StreamCounts;

/* Checks one fixture line ("<op> <args> : <values>") against r. */
static void check_line(PyRandom *r, char *line, StreamCounts *c) {
    char *colon = strstr(line, " : ");
    CHECKF(colon != NULL, "malformed line: %.60s", line);
    if (!colon) return;
    *colon = 0;
    char *values = colon + 3, *end;
    char op[32];
    long long a = 0, b = 0;
    int nargs = sscanf(line, "%31s %lld %lld", op, &a, &b);
    if (!strcmp(op, "shuffle")) {
        uint32_t *x = malloc((size_t)a * sizeof *x);
        for (long long k = 0; k < a; k++) x[k] = (uint32_t)k;
        pyrandom_shuffle(r, x, (size_t)a, sizeof *x);
        for (long long k = 0; k < a; k++, values = end) {
            long long want = strtoll(values, &end, 10);
            c->values++;
            if ((long long)x[k] != want) c->mismatches++;
        }
        free(x);
        return;
    }
    for (;; values = end) {
        while (*values == ' ') values++;
        if (!*values || *values == '\n') break;
        int same;
        if (!strcmp(op, "random")) {
            double want = strtod(values, &end);
            same = pyrandom_random(r) == want;
        } else if (!strcmp(op, "uint32")) {
            same = pyrandom_uint32(r) == strtoull(values, &end, 10);
        } else if (!strcmp(op, "getrandbits") && nargs == 2) {
            same = pyrandom_getrandbits(r, (int)a) == strtoull(values, &end, 10);
        } else if (!strcmp(op, "randint") && nargs == 3) {
            same = pyrandom_randint(r, a, b) == strtoll(values, &end, 10);
        } else {
            CHECKF(0, "unknown op %s", op);
            return;
        }
        c->values++;
        if (!same) c->mismatches++;
    }
}

static void test_streams_match_cpython(void) {
    FILE *f = fopen(STREAMS, "r");
    CHECKF(f != NULL, "cannot open %s", STREAMS);
    if (!f) return;
    StreamCounts c = {0};
    PyRandom r;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        if (line[0] == '#') continue;
        long long seed;
        if (sscanf(line, "seed %lld", &seed) == 1) {
            pyrandom_seed(&r, (int64_t)seed);
            c.seeds++;
            continue;
        }
        check_line(&r, line, &c);
    }
    free(line);
    fclose(f);
    printf("    %ld seeds, %ld values, %ld mismatches\n", c.seeds, c.values, c.mismatches);
    CHECK(c.seeds == 8);
    CHECK(c.values > 10000);
    CHECK(c.mismatches == 0);
}

/* Reseeding restarts the stream; negative seeds use |seed| as CPython does. */
static void test_reseeding_and_negative_seeds(void) {
    PyRandom r;
    pyrandom_seed(&r, 12345);
    uint32_t first = pyrandom_uint32(&r);
    for (int k = 0; k < 1000; k++) pyrandom_uint32(&r);
    pyrandom_seed(&r, 12345);
    CHECK(pyrandom_uint32(&r) == first);
    pyrandom_seed(&r, -12345);
    CHECK(pyrandom_uint32(&r) == first);
}

static void test_randbelow_one_consumes_until_zero(void) {
    /* randint(0, 0) still draws getrandbits(1) until it is 0, as CPython does. */
    PyRandom a, b;
    pyrandom_seed(&a, 42);
    b = a;
    CHECK(pyrandom_randint(&a, 0, 0) == 0);
    uint32_t bit;
    do bit = pyrandom_uint32(&b) >> 31; while (bit != 0);
    CHECK(pyrandom_uint32(&a) == pyrandom_uint32(&b));
}

int main(void) {
    RUN_TEST(test_streams_match_cpython);
    RUN_TEST(test_reseeding_and_negative_seeds);
    RUN_TEST(test_randbelow_one_consumes_until_zero);
    return test_summary();
}
