/* bert serve's request bodies: JSON as the clients send it (OpenAI's /v1/embeddings, text-
 * embeddings-inference's /embed and /predict), checked and turned into texts. Pure parsing, no
 * HTTP and no model, so any bytes can be fuzzed (tests/fuzz/fuzz_serve_request.c): a body
 * gives a request or an HTTP status with a one-line message, never a crash. */
#ifndef BERT_SERVE_REQUEST_H
#define BERT_SERVE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "core/common.h"

typedef enum { SERVE_OPENAI_EMBEDDINGS = 0, SERVE_TEI_EMBED, SERVE_TEI_PREDICT } ServeEndpoint;

typedef struct {
    int max_inputs;   /* texts in one request; more: 413 */
} ServeLimits;

typedef struct {
    int n;                  /* texts, >= 1 */
    char **text_a;          /* NUL-terminated copies, valid UTF-8 */
    char **text_b;          /* /predict's second text of a pair, else NULL (each may be NULL) */
    bool input_is_list;     /* the input was a list (the answer is then a list too) */
    bool base64;            /* OpenAI encoding_format "base64": little-endian float32 bytes */
    int normalize;          /* TEI "normalize": 1, 0, or -1 unset (the server's default) */
    int truncate;           /* TEI "truncate": 1, 0, or -1 unset (the server's --truncate) */
    bool raw_scores;        /* TEI /predict "raw_scores": logits instead of softmax */
    char model[128];        /* OpenAI "model", echoed back ("" when absent) */
} ServeRequest;

/* Parses body[0..len) for the endpoint. Returns 0, or the HTTP status (400 malformed, wrong
 * types, empty input; 413 more than lim->max_inputs texts) with the message in err; r is
 * then empty (serve_request_free is safe either way). */
int serve_request_parse(ServeEndpoint ep, const char *body, size_t len, const ServeLimits *lim, ServeRequest *r,
                        BertError *err);
void serve_request_free(ServeRequest *r);

/* Whether s[0..len) is valid UTF-8 (no overlong forms, surrogates or NUL bytes). */
bool serve_valid_utf8(const char *s, size_t len);

#endif
