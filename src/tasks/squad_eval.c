/* SQuAD evaluation (see squad_eval.h): JSON readers, normalize_answer, the v1.1 and v2.0
 * metrics and their JSON. */
#include "tasks/squad_eval.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/strmap.h"
#include "core/utf8.h"
#include "io/json_util.h"
#include "text/py_string.h"

/* ---- reading the JSON files ---- */

static const char *json_kind(const cJSON *v) {
    if (!v) return "missing";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "a list";
    return "an object";
}

/* ---- dataset ---- */

void squad_dataset_free(SquadDataset *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) {
        free(d->questions[i].id);
        for (int a = 0; a < d->questions[i].n_answers; a++) free(d->questions[i].answers[a]);
        free(d->questions[i].answers);
    }
    free(d->questions);
    free(d->version);
    free(d->name);
    memset(d, 0, sizeof *d);
}

/* Fills d from the tree; on a structure error, a message with the element's path. */
static int read_dataset(const cJSON *root, SquadDataset *d, BertError *err) {
    const char *name = d->name;
    if (!cJSON_IsObject(root)) return bert_fail(err, "%s: the top level is %s, not an object", name, json_kind(root));
    const cJSON *version = json_get_last(root, "version");
    if (cJSON_IsString(version)) d->version = xstrdup(version->valuestring);
    else d->version_bad = version != NULL;
    const cJSON *data = json_get_last(root, "data");
    if (!cJSON_IsArray(data)) return bert_fail(err, "%s: \"data\" is %s, not a list", name, json_kind(data));
    size_t cap = 0;
    int a = 0;
    const cJSON *article;
    cJSON_ArrayForEach(article, data) {
        const cJSON *paragraphs = cJSON_IsObject(article) ? json_get_last(article, "paragraphs") : NULL;
        if (!cJSON_IsObject(article)) return bert_fail(err, "%s: data[%d] is %s, not an object", name, a, json_kind(article));
        if (!cJSON_IsArray(paragraphs))
            return bert_fail(err, "%s: data[%d].paragraphs is %s, not a list", name, a, json_kind(paragraphs));
        int p = 0;
        const cJSON *para;
        cJSON_ArrayForEach(para, paragraphs) {
            const cJSON *qas = cJSON_IsObject(para) ? json_get_last(para, "qas") : NULL;
            if (!cJSON_IsObject(para))
                return bert_fail(err, "%s: data[%d].paragraphs[%d] is %s, not an object", name, a, p, json_kind(para));
            if (!cJSON_IsArray(qas))
                return bert_fail(err, "%s: data[%d].paragraphs[%d].qas is %s, not a list", name, a, p, json_kind(qas));
            int q = 0;
            const cJSON *qa;
            cJSON_ArrayForEach(qa, qas) {
                if (!cJSON_IsObject(qa))
                    return bert_fail(err, "%s: data[%d].paragraphs[%d].qas[%d] is %s, not an object", name, a, p, q,
                                     json_kind(qa));
                const cJSON *id = json_get_last(qa, "id"), *answers = json_get_last(qa, "answers");
                if (!cJSON_IsString(id))
                    return bert_fail(err, "%s: data[%d].paragraphs[%d].qas[%d].id is %s, not a string", name, a, p, q,
                                     json_kind(id));
                if (!cJSON_IsArray(answers))
                    return bert_fail(err, "%s: data[%d].paragraphs[%d].qas[%d].answers (question %s) is %s, not a list",
                                     name, a, p, q, id->valuestring, json_kind(answers));
                int n_answers = cJSON_GetArraySize(answers), k = 0;
                const cJSON *ans;
                cJSON_ArrayForEach(ans, answers) {
                    const cJSON *t = cJSON_IsObject(ans) ? json_get_last(ans, "text") : NULL;
                    if (!cJSON_IsString(t))
                        return bert_fail(err, "%s: data[%d].paragraphs[%d].qas[%d].answers[%d] (question %s) has no "
                                              "\"text\" string", name, a, p, q, k, id->valuestring);
                    k++;
                }
                ARRAY_RESERVE(d->questions, cap, d->n + 1, 1024);
                SquadQuestion *sq = &d->questions[d->n++];
                sq->id = xstrdup(id->valuestring);
                sq->n_answers = n_answers;
                sq->answers = n_answers ? xmalloc((size_t)n_answers * sizeof *sq->answers) : NULL;
                k = 0;
                cJSON_ArrayForEach(ans, answers) sq->answers[k++] = xstrdup(json_get_last(ans, "text")->valuestring);
                q++;
            }
            p++;
        }
        a++;
    }
    return 0;
}

int squad_dataset_from_file(const SquadFile *f, SquadDataset *d, BertError *err) {
    memset(d, 0, sizeof *d);
    d->name = xstrdup(f->name);
    int rc = read_dataset(f->root, d, err);
    if (rc != 0) squad_dataset_free(d);
    return rc;
}

int squad_dataset_parse(const char *text, size_t len, const char *name, SquadDataset *d, BertError *err) {
    memset(d, 0, sizeof *d);
    SquadFile f;
    if (squad_file_parse(text, len, name, SQUAD_JSON_PYTHON, &f, err) != 0) return -1;
    int rc = squad_dataset_from_file(&f, d, err);
    squad_file_free(&f);
    return rc;
}

int squad_dataset_load(const char *path, SquadDataset *d, BertError *err) {
    memset(d, 0, sizeof *d);
    SquadFile f;
    if (squad_file_load(path, SQUAD_JSON_PYTHON, &f, err) != 0) return -1;
    int rc = squad_dataset_from_file(&f, d, err);
    squad_file_free(&f);
    return rc;
}

/* ---- predictions ---- */

struct SquadPredictions {
    char *name;
    StrMap ids;           /* question id -> its place (entry index): a repeated id keeps its first */
    char **texts;         /* by place; NULL: the value is not a string */
    size_t cap;
};

void squad_predictions_free(SquadPredictions *p) {
    if (!p) return;
    for (size_t i = 0; i < p->ids.n; i++) free(p->texts[i]);
    free(p->texts);
    free(p->name);
    strmap_free(&p->ids);
    free(p);
}

size_t squad_predictions_count(const SquadPredictions *p) { return p ? p->ids.n : 0; }

SquadPredictions *squad_predictions_new(const char *name) {
    SquadPredictions *p = xcalloc(1, sizeof *p);
    p->name = xstrdup(name);
    strmap_init(&p->ids, 0, true);
    return p;
}

/* answer NULL: the file's value is not a string. */
void squad_predictions_set(SquadPredictions *p, const char *id, const char *answer) {
    bool added;
    size_t i = strmap_index(&p->ids, strmap_intern(&p->ids, id, strlen(id), &added));
    if (added) {
        ARRAY_RESERVE(p->texts, p->cap, i + 1, 64);
        p->texts[i] = NULL;
    }
    free(p->texts[i]);
    p->texts[i] = answer ? xstrdup(answer) : NULL;
}

int squad_predictions_parse(const char *text, size_t len, const char *name, SquadPredictions **out, BertError *err) {
    *out = NULL;
    cJSON *root;
    if (squad_json_parse(text, len, name, SQUAD_JSON_PYTHON, &root, err) != 0) return -1;
    if (!cJSON_IsObject(root)) {
        bert_fail(err, "%s: the top level is %s, not an object {question id: answer}", name, json_kind(root));
        cJSON_Delete(root);
        return -1;
    }
    SquadPredictions *p = squad_predictions_new(name);
    const cJSON *item;
    cJSON_ArrayForEach(item, root) squad_predictions_set(p, item->string, cJSON_IsString(item) ? item->valuestring : NULL);
    cJSON_Delete(root);
    *out = p;
    return 0;
}

int squad_predictions_load(const char *path, SquadPredictions **p, BertError *err) {
    char *text;
    size_t len;
    *p = NULL;
    if (read_file(path, &text, &len, err) != 0) return -1;   /* its message names the file and the reason */
    int rc = squad_predictions_parse(text, len, path, p, err);
    free(text);
    return rc;
}

/* ---- no-answer probabilities ---- */

struct SquadNaProbs {
    char *name;
    StrMap ids;         /* question id -> its place (entry index): a repeated id keeps its first */
    double *p;          /* by place */
    char (*repr)[40];   /* Python's repr of the value: an int stays an int */
};

void squad_na_probs_free(SquadNaProbs *p) {
    if (!p) return;
    free(p->p);
    free(p->repr);
    free(p->name);
    strmap_free(&p->ids);
    free(p);
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? : the numbers Python's json reads. */
static bool json_number_lexeme(const char *s, size_t n, bool *is_int) {
    size_t i = 0;
    if (i < n && s[i] == '-') i++;
    if (i < n && s[i] == '0') {
        i++;
    } else if (i < n && s[i] >= '1' && s[i] <= '9') {
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    } else {
        return false;
    }
    *is_int = true;
    if (i < n && s[i] == '.') {
        *is_int = false;
        size_t start = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == start) return false;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        *is_int = false;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t start = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == start) return false;
    }
    return i == n;
}

static void skip_ws(const char *t, size_t *i) {
    while ((unsigned char)t[*i] <= 32 && t[*i]) (*i)++;   /* cJSON's whitespace */
}

int squad_na_probs_parse(const char *text, size_t len, const char *name, SquadNaProbs **out, BertError *err) {
    *out = NULL;
    cJSON *root;
    if (squad_json_parse(text, len, name, SQUAD_JSON_PYTHON, &root, err) != 0) return -1;
    if (!cJSON_IsObject(root)) {
        bert_fail(err, "%s: the top level is %s, not an object {question id: probability}", name, json_kind(root));
        cJSON_Delete(root);
        return -1;
    }
    const cJSON *item;
    cJSON_ArrayForEach(item, root)
        if (!cJSON_IsNumber(item)) {
            bert_fail(err, "%s: the probability of question %s is %s, not a number", name, item->string,
                      json_kind(item));
            cJSON_Delete(root);
            return -1;
        }
    SquadNaProbs *p = xcalloc(1, sizeof *p);
    p->name = xstrdup(name);
    size_t count = (size_t)cJSON_GetArraySize(root);
    p->p = xcalloc(count ? count : 1, sizeof *p->p);
    p->repr = xcalloc(count ? count : 1, sizeof *p->repr);
    strmap_init(&p->ids, count, true);
    /* cJSON keeps no number's text, and Python's json makes "1" an int (a threshold prints as
     * 1) and "1.0" a float: the object's text is walked alongside its members (cJSON accepted
     * it, so each member is a key string, ':' and the number's characters, in member order). */
    size_t at = 0;
    skip_ws(text, &at);
    at++;   /* '{' */
    int rc = 0;
    cJSON_ArrayForEach(item, root) {
        /* the member's key string, ':' and the number's lexeme */
        skip_ws(text, &at);
        for (at++; text[at] != '"'; at++)
            if (text[at] == '\\') at++;
        at++;
        skip_ws(text, &at);
        at++;   /* ':' */
        skip_ws(text, &at);
        size_t start = at;
        while (text[at] && strchr("0123456789+-.eE", text[at])) at++;
        bool is_int = false;
        if (!json_number_lexeme(text + start, at - start, &is_int)) {
            rc = bert_fail(err, "%s: the probability of question %s, %.*s, is not a number as JSON writes one", name,
                           item->string, (int)(at - start > 40 ? 40 : at - start), text + start);
            break;
        }
        double v = item->valuedouble;
        char repr[40];
        if (is_int) {
            if (!(fabs(v) <= 9007199254740992.0)) {
                rc = bert_fail(err, "%s: the probability of question %s is an integer beyond 2^53", name, item->string);
                break;
            }
            snprintf(repr, sizeof repr, "%.0f", v == 0 ? 0.0 : v);   /* Python prints -0 as 0 */
        } else {
            squad_float_repr(v, repr);
        }
        skip_ws(text, &at);
        at++;   /* ',' or '}' */
        size_t i = strmap_index(&p->ids, strmap_intern(&p->ids, item->string, strlen(item->string), NULL));
        p->p[i] = v;
        memcpy(p->repr[i], repr, sizeof repr);
    }
    cJSON_Delete(root);
    if (rc != 0) return squad_na_probs_free(p), -1;
    *out = p;
    return 0;
}

int squad_na_probs_load(const char *path, SquadNaProbs **p, BertError *err) {
    char *text;
    size_t len;
    *p = NULL;
    if (read_file(path, &text, &len, err) != 0) return -1;   /* its message names the file and the reason */
    int rc = squad_na_probs_parse(text, len, path, p, err);
    free(text);
    return rc;
}

/* ---- normalize_answer ---- */

typedef struct {
    const char *s;
    size_t len;
} Tok;

typedef struct {
    int32_t *cp, *low, *out;   /* decoded; lower-cased, then without punctuation; articles gone */
    size_t cap;
    char *bytes;          /* the tokens' UTF-8, back to back */
    size_t nbytes, bytes_cap;
    size_t *off, *len;    /* token i is bytes[off[i], off[i] + len[i]) */
    Tok *sorted;          /* the tokens sorted by (length, bytes), for counting common ones */
    size_t ntok, tok_cap;
} Norm;

static void norm_free(Norm *n) {
    free(n->cp), free(n->low), free(n->out), free(n->bytes), free(n->off), free(n->len), free(n->sorted);
    memset(n, 0, sizeof *n);
}

static bool is_word(int32_t c) { return c == '_' || py_isalnum(c); }

static bool is_ascii_punct(int32_t c) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
}

/* Length of the article ("a", "an", "the") that re.sub(r'\b(a|an|the)\b', ...) replaces at
 * s[i], or 0. */
static size_t article_at(const int32_t *s, size_t n, size_t i) {
    if (i > 0 && is_word(s[i - 1])) return 0;
    static const char *const words[] = {"a", "an", "the"};
    for (int w = 0; w < 3; w++) {
        size_t k = 0;
        while (words[w][k] && i + k < n && s[i + k] == words[w][k]) k++;
        if (words[w][k]) continue;
        if (i + k == n || !is_word(s[i + k])) return k;
    }
    return 0;
}

static void push_token(Norm *n, const int32_t *s, size_t len) {
    if (n->ntok == n->tok_cap) {
        n->tok_cap = grow_capacity(n->tok_cap, n->ntok + 1, 16);
        n->off = xrealloc(n->off, n->tok_cap * sizeof *n->off);
        n->len = xrealloc(n->len, n->tok_cap * sizeof *n->len);
        n->sorted = xrealloc(n->sorted, n->tok_cap * sizeof *n->sorted);
    }
    ARRAY_RESERVE(n->bytes, n->bytes_cap, n->nbytes + 4 * len + 1, 256);
    n->off[n->ntok] = n->nbytes;
    for (size_t i = 0; i < len; i++) {
        uint32_t c = (uint32_t)s[i];
        unsigned char *o = (unsigned char *)n->bytes + n->nbytes;
        if (c < 0x80) o[0] = (unsigned char)c, n->nbytes += 1;
        else if (c < 0x800) o[0] = 0xC0 | c >> 6, o[1] = 0x80 | (c & 0x3F), n->nbytes += 2;
        else if (c < 0x10000) o[0] = 0xE0 | c >> 12, o[1] = 0x80 | (c >> 6 & 0x3F), o[2] = 0x80 | (c & 0x3F), n->nbytes += 3;
        else o[0] = 0xF0 | c >> 18, o[1] = 0x80 | (c >> 12 & 0x3F), o[2] = 0x80 | (c >> 6 & 0x3F), o[3] = 0x80 | (c & 0x3F),
             n->nbytes += 4;
    }
    n->len[n->ntok] = n->nbytes - n->off[n->ntok];
    n->ntok++;
}

/* normalize_answer(text).split(), into n's tokens. */
static void normalize(Norm *n, const char *text, size_t len) {
    if (n->cap < len + 1) {
        n->cap = grow_capacity(n->cap, len + 1, 64);
        n->cp = xrealloc(n->cp, n->cap * sizeof *n->cp);
        n->low = xrealloc(n->low, 2 * n->cap * sizeof *n->low);   /* lower() can double the length */
        n->out = xrealloc(n->out, 2 * n->cap * sizeof *n->out);
    }
    size_t m = 0;
    const unsigned char *u = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        int k;
        int32_t c = utf8_decode(u + i, len - i, &k);
        n->cp[m++] = c < 0 ? 0xFFFD : c;
        i += (size_t)k;
    }
    size_t nl = py_lower(n->cp, m, n->low);   /* lower() */
    size_t np = 0;
    for (size_t i = 0; i < nl; i++)           /* remove_punc: string.punctuation */
        if (!is_ascii_punct(n->low[i])) n->low[np++] = n->low[i];
    /* remove_articles (\b reads the string the regex runs on), then split() */
    n->ntok = n->nbytes = 0;
    size_t tok_start = 0, out = 0;
    const int32_t *s = n->low;
    int32_t *w = n->out;
    for (size_t i = 0; i < np;) {
        size_t a = (s[i] == 'a' || s[i] == 't') ? article_at(s, np, i) : 0;
        if (a) w[out++] = ' ', i += a;
        else w[out++] = s[i++];
    }
    for (size_t i = 0; i <= out; i++) {
        if (i < out && !py_isspace(w[i])) continue;
        if (i > tok_start) push_token(n, w + tok_start, i - tok_start);
        tok_start = i + 1;
    }
}

char *squad_normalize_answer(const char *text, size_t len) {
    Norm n = {0};
    normalize(&n, text, len);
    size_t total = n.nbytes + n.ntok + 1, o = 0;
    char *s = xmalloc(total);
    for (size_t i = 0; i < n.ntok; i++) {
        if (i) s[o++] = ' ';
        memcpy(s + o, n.bytes + n.off[i], n.len[i]);
        o += n.len[i];
    }
    s[o] = 0;
    norm_free(&n);
    return s;
}

static int cmp_tok(const Tok *a, const Tok *b) {
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return memcmp(a->s, b->s, a->len);
}

static int cmp_tok_qsort(const void *a, const void *b) { return cmp_tok(a, b); }

static void sort_tokens(Norm *n) {
    for (size_t i = 0; i < n->ntok; i++) n->sorted[i] = (Tok){n->bytes + n->off[i], n->len[i]};
    if (n->ntok > 1) qsort(n->sorted, n->ntok, sizeof *n->sorted, cmp_tok_qsort);
}

/* sum((Counter(x) & Counter(y)).values()), both sorted. */
static size_t common_tokens(const Norm *x, const Norm *y) {
    size_t i = 0, j = 0, same = 0;
    while (i < x->ntok && j < y->ntok) {
        int c = cmp_tok(&x->sorted[i], &y->sorted[j]);
        if (c == 0) same++, i++, j++;
        else if (c < 0) i++;
        else j++;
    }
    return same;
}

/* The normalized strings are equal: the same tokens in the same order. */
static bool same_tokens(const Norm *x, const Norm *y) {
    if (x->ntok != y->ntok) return false;
    for (size_t i = 0; i < x->ntok; i++)
        if (x->len[i] != y->len[i] || memcmp(x->bytes + x->off[i], y->bytes + y->off[i], x->len[i]) != 0) return false;
    return true;
}

/* 2PR/(P+R) over common tokens, in the scripts' operation order; 0 when none are common. */
static double f1_of(size_t same, size_t npred, size_t ngold) {
    if (same == 0) return 0;
    double precision = 1.0 * (double)same / (double)npred;
    double recall = 1.0 * (double)same / (double)ngold;
    return (2 * precision * recall) / (precision + recall);
}

/* ---- Python's float repr ---- */

/* Digits m (an integer) at 10^e read back as x. */
static bool reads_back(unsigned long long m, int e, double x) {
    char s[48];
    snprintf(s, sizeof s, "%llue%d", m, e);
    return strtod(s, NULL) == x;
}

void squad_float_repr(double x, char out[40]) {
    if (isnan(x)) return (void)snprintf(out, 40, "NaN");
    if (isinf(x)) return (void)snprintf(out, 40, x > 0 ? "Infinity" : "-Infinity");
    /* repr's digits: the shortest that read back as x, the nearest to x among those. At each
     * length the nearest decimal is tried, then its two neighbours: next to a power of two the
     * doubles below are twice as dense, so the nearest may miss while a neighbour reads back. */
    double ax = fabs(x);
    unsigned long long mant = 0;
    int exp10 = 0;
    for (int prec = 1; prec <= 17; prec++) {
        char e[40];
        snprintf(e, sizeof e, "%.*e", prec - 1, ax);
        mant = 0;
        const char *p = e;
        for (; *p != 'e'; p++)
            if (*p >= '0' && *p <= '9') mant = mant * 10 + (unsigned long long)(*p - '0');
        exp10 = atoi(p + 1) - (prec - 1);   /* ax ~ mant * 10^exp10 */
        if (reads_back(mant, exp10, ax)) break;
        if (reads_back(mant + 1, exp10, ax)) { mant++; break; }
        if (mant > 0 && reads_back(mant - 1, exp10, ax)) { mant--; break; }
    }
    while (mant >= 10 && mant % 10 == 0) mant /= 10, exp10++;
    char digits[24];
    int nd = snprintf(digits, sizeof digits, "%llu", mant);
    int decpt = mant == 0 ? 1 : nd + exp10;   /* ax = 0.digits * 10^decpt */
    char *o = out;
    if (signbit(x)) *o++ = '-';
    if (decpt <= -4 || decpt > 16) {   /* repr's switch to exponent form */
        *o++ = digits[0];
        if (nd > 1) *o++ = '.', memcpy(o, digits + 1, (size_t)nd - 1), o += nd - 1;
        snprintf(o, (size_t)(out + 40 - o), "e%c%02d", decpt - 1 < 0 ? '-' : '+', abs(decpt - 1));
    } else if (decpt <= 0) {
        *o++ = '0', *o++ = '.';
        for (int i = 0; i < -decpt; i++) *o++ = '0';
        memcpy(o, digits, (size_t)nd + 1);
    } else if (decpt >= nd) {
        memcpy(o, digits, (size_t)nd), o += nd;
        for (int i = nd; i < decpt; i++) *o++ = '0';
        memcpy(o, ".0", 3);
    } else {
        memcpy(o, digits, (size_t)decpt), o += decpt;
        *o++ = '.';
        memcpy(o, digits + decpt, (size_t)(nd - decpt) + 1);
    }
}

/* ---- the metrics ---- */

SquadEvalOptions squad_eval_default_options(SquadVersion version) {
    SquadEvalOptions o = {0};
    o.version = version;
    o.na_prob_thresh = 1.0;
    return o;
}

/* One line for opt->note: prefix, the id (or version), suffix. */
static void note(const SquadEvalOptions *o, const char *prefix, const char *a, const char *suffix) {
    if (!o->note) return;
    size_t n = strlen(prefix) + strlen(a) + strlen(suffix) + 1;
    char *line = xmalloc(n);
    snprintf(line, n, "%s%s%s", prefix, a, suffix);
    o->note(line, o->note_ctx);
    free(line);
}

/* The place of id in map (its entry index), or SIZE_MAX. */
static size_t place_of(const StrMap *map, const char *id) {
    const StrMapEntry *e = strmap_find(map, id, strlen(id));
    return e ? strmap_index(map, e) : SIZE_MAX;
}

static const char *prediction_of(const SquadPredictions *p, const char *qid, bool *found) {
    size_t i = place_of(&p->ids, qid);
    *found = i != SIZE_MAX;
    return *found ? p->texts[i] : NULL;
}

static int evaluate_v1(const SquadDataset *d, const SquadPredictions *p, const SquadEvalOptions *o, SquadMetrics *m,
                       BertError *err) {
    if (d->version_bad) return bert_fail(err, "%s: \"version\" is not a string", d->name);
    if (!d->version) return bert_fail(err, "%s: no \"version\" string, which the official v1.1 script reads", d->name);
    if (strcmp(d->version, "1.1") != 0)
        note(o, "Evaluation expects v-1.1, but got dataset with v-", d->version, "");
    if (d->n == 0) return bert_fail(err, "%s has no questions", d->name);
    Norm pred = {0}, gold = {0};
    long exact = 0;
    double f1 = 0;
    int rc = 0;
    for (size_t i = 0; i < d->n; i++) {
        const SquadQuestion *q = &d->questions[i];
        bool found;
        const char *text = prediction_of(p, q->id, &found);
        if (!found) {
            note(o, "Unanswered question ", q->id, " will receive score 0.");
            m->unanswered++;
            continue;
        }
        if (!text) {
            rc = bert_fail(err, "%s: the prediction for question %s is not a string", p->name, q->id);
            break;
        }
        if (q->n_answers == 0) {
            rc = bert_fail(err, "%s: question %s has no answers (a v2.0 dataset? %s)", d->name, q->id,
                           o->v2_hint ? o->v2_hint : "use --version 2.0");
            break;
        }
        normalize(&pred, text, strlen(text));
        sort_tokens(&pred);
        bool em = false;
        double best_f1 = 0;
        for (int a = 0; a < q->n_answers; a++) {
            normalize(&gold, q->answers[a], strlen(q->answers[a]));
            em = em || same_tokens(&pred, &gold);
            sort_tokens(&gold);
            double s = f1_of(common_tokens(&pred, &gold), pred.ntok, gold.ntok);
            if (a == 0 || s > best_f1) best_f1 = s;
        }
        exact += em;
        f1 += best_f1;
    }
    norm_free(&pred);
    norm_free(&gold);
    if (rc != 0) return rc;
    m->total = (long)d->n;
    m->exact = 100.0 * (double)exact / (double)m->total;
    m->f1 = 100.0 * f1 / (double)m->total;
    return 0;
}

/* One question id of a v2.0 evaluation (ids count once, at their first place). */
typedef struct {
    const char *id;
    bool has_ans, scored;
    const char *pred;
    double exact, f1;   /* raw scores (get_raw_scores) */
} Slot;

/* find_best_thresh over the probabilities in ascending order (ties in file order). */
static void best_thresh(const Slot *slots, const size_t *sorted, const size_t *slot_of, size_t n_probs,
                        const SquadNaProbs *na, long num_no_ans, long n_scored, bool use_f1, double *best,
                        char thresh[40]) {
    double cur = (double)num_no_ans, best_score = cur;
    snprintf(thresh, 40, "0.0");
    for (size_t k = 0; k < n_probs; k++) {
        size_t j = sorted[k], s = slot_of[j];
        if (s == SIZE_MAX || !slots[s].scored) continue;
        double diff = slots[s].has_ans ? (use_f1 ? slots[s].f1 : slots[s].exact) : (slots[s].pred[0] ? -1 : 0);
        cur += diff;
        if (cur > best_score) best_score = cur, memcpy(thresh, na->repr[j], 40);
    }
    *best = 100.0 * best_score / (double)n_scored;
}

typedef struct {
    double p;
    size_t at;   /* place in the file (first occurrence) */
} ProbAt;

static int cmp_prob(const void *pa, const void *pb) {
    const ProbAt *a = pa, *b = pb;
    if (a->p != b->p) return a->p < b->p ? -1 : 1;
    return a->at < b->at ? -1 : a->at > b->at;   /* sorted() is stable */
}

static int evaluate_v2(const SquadDataset *d, const SquadPredictions *p, const SquadEvalOptions *o, SquadMetrics *m,
                       BertError *err) {
    StrMap ids;   /* question id -> its slot (entry index) */
    strmap_init(&ids, d->n, false);
    Slot *slots = xcalloc(d->n ? d->n : 1, sizeof *slots);
    size_t n_slots = 0, missing = 0;
    const char *first_missing = NULL;
    Norm pred = {0}, gold = {0};
    int rc = 0;
    for (size_t i = 0; i < d->n; i++) {
        const SquadQuestion *q = &d->questions[i];
        bool added;
        size_t s = strmap_index(&ids, strmap_intern(&ids, q->id, strlen(q->id), &added));
        if (added) slots[n_slots++].id = q->id;
        Slot *sl = &slots[s];
        sl->has_ans = q->n_answers > 0;
        bool found;
        const char *text = prediction_of(p, q->id, &found);
        if (!found) {
            note(o, "Missing prediction for ", q->id, "");
            if (!missing++) first_missing = q->id;
            continue;
        }
        if (!text) {
            rc = bert_fail(err, "%s: the prediction for question %s is not a string", p->name, q->id);
            break;
        }
        normalize(&pred, text, strlen(text));
        sort_tokens(&pred);
        /* the gold answers: those that normalize to something, else "" alone; the best counts */
        int n_gold = 0;
        double best_exact = 0, best_f1 = 0;
        for (int a = 0; a <= q->n_answers; a++) {
            if (a < q->n_answers) {
                normalize(&gold, q->answers[a], strlen(q->answers[a]));
                if (gold.ntok == 0) continue;
            } else if (n_gold > 0) {
                break;
            } else {
                gold.ntok = gold.nbytes = 0;   /* the "" answer */
            }
            double e = same_tokens(&pred, &gold);
            double f;
            if (pred.ntok == 0 || gold.ntok == 0) {
                f = pred.ntok == gold.ntok;
            } else {
                sort_tokens(&gold);
                f = f1_of(common_tokens(&pred, &gold), pred.ntok, gold.ntok);
            }
            if (n_gold == 0 || e > best_exact) best_exact = e;
            if (n_gold == 0 || f > best_f1) best_f1 = f;
            n_gold++;
        }
        sl->scored = true;
        sl->pred = text;
        sl->exact = best_exact;
        sl->f1 = best_f1;
    }
    norm_free(&pred);
    norm_free(&gold);
    if (rc == 0 && missing)
        rc = bert_fail(err, "%s has no prediction for %zu of the questions of %s (first: %s); the official v2.0 "
                            "script stops with a KeyError then: give every question an answer (\"\" for none)",
                       p->name, missing, d->name, first_missing);
    if (rc == 0 && n_slots == 0) rc = bert_fail(err, "%s has no questions", d->name);
    /* apply_no_ans_threshold, then the sums in the dicts' order */
    double *ex = xcalloc(n_slots ? n_slots : 1, sizeof *ex), *f1 = xcalloc(n_slots ? n_slots : 1, sizeof *f1);
    for (size_t s = 0; rc == 0 && s < n_slots; s++) {
        double prob = 0.0;
        if (o->na_probs) {
            size_t j = place_of(&o->na_probs->ids, slots[s].id);
            if (j == SIZE_MAX) {
                rc = bert_fail(err, "%s has no probability for question %s", o->na_probs->name, slots[s].id);
                break;
            }
            prob = o->na_probs->p[j];
        }
        bool pred_na = prob > o->na_prob_thresh;
        ex[s] = pred_na ? (double)!slots[s].has_ans : slots[s].exact;
        f1[s] = pred_na ? (double)!slots[s].has_ans : slots[s].f1;
    }
    if (rc == 0) {
        double se = 0, sf = 0, he = 0, hf = 0, ne = 0, nf = 0;
        for (size_t s = 0; s < n_slots; s++) {
            se += ex[s], sf += f1[s];
            if (slots[s].has_ans) he += ex[s], hf += f1[s], m->has_ans_total++;
            else ne += ex[s], nf += f1[s], m->no_ans_total++;
        }
        m->total = (long)n_slots;
        m->exact = 100.0 * se / (double)m->total;
        m->f1 = 100.0 * sf / (double)m->total;
        if ((m->has_ans = m->has_ans_total > 0)) {
            m->has_ans_exact = 100.0 * he / (double)m->has_ans_total;
            m->has_ans_f1 = 100.0 * hf / (double)m->has_ans_total;
        }
        if ((m->no_ans = m->no_ans_total > 0)) {
            m->no_ans_exact = 100.0 * ne / (double)m->no_ans_total;
            m->no_ans_f1 = 100.0 * nf / (double)m->no_ans_total;
        }
        if (o->na_probs) {
            const SquadNaProbs *na = o->na_probs;
            const size_t n_probs = na->ids.n;
            ProbAt *by_prob = xmalloc((n_probs ? n_probs : 1) * sizeof *by_prob);
            size_t *sorted = xmalloc((n_probs ? n_probs : 1) * sizeof *sorted);
            size_t *slot_of = xmalloc((n_probs ? n_probs : 1) * sizeof *slot_of);
            for (size_t j = 0; j < n_probs; j++)
                by_prob[j] = (ProbAt){na->p[j], j}, slot_of[j] = place_of(&ids, na->ids.entries[j].key);
            qsort(by_prob, n_probs, sizeof *by_prob, cmp_prob);
            for (size_t j = 0; j < n_probs; j++) sorted[j] = by_prob[j].at;
            free(by_prob);
            m->best = true;
            best_thresh(slots, sorted, slot_of, n_probs, na, m->no_ans_total, m->total, false, &m->best_exact,
                        m->best_exact_thresh);
            best_thresh(slots, sorted, slot_of, n_probs, na, m->no_ans_total, m->total, true, &m->best_f1,
                        m->best_f1_thresh);
            free(sorted);
            free(slot_of);
        }
    }
    free(ex);
    free(f1);
    free(slots);
    strmap_free(&ids);
    return rc;
}

int squad_evaluate(const SquadDataset *d, const SquadPredictions *p, const SquadEvalOptions *opt, SquadMetrics *m,
                   BertError *err) {
    memset(m, 0, sizeof *m);
    m->version = opt->version;
    if (opt->version == SQUAD_V1_1) {
        if (opt->na_probs) return bert_fail(err, "no-answer probabilities are a SQuAD v2.0 option");
        return evaluate_v1(d, p, opt, m, err);
    }
    if (opt->version == SQUAD_V2_0) return evaluate_v2(d, p, opt, m, err);
    return bert_fail(err, "unknown SQuAD version %d", (int)opt->version);
}

/* ---- JSON out ---- */

typedef struct {
    char *s;
    size_t n, cap;
    int indent, items;
} Out;

static void out_add(Out *o, const char *s) {
    size_t k = strlen(s);
    ARRAY_RESERVE(o->s, o->cap, o->n + k + 1, 256);
    memcpy(o->s + o->n, s, k + 1);
    o->n += k;
}

static void out_key(Out *o, const char *key) {
    out_add(o, o->items++ ? (o->indent ? ",\n  " : ", ") : (o->indent ? "{\n  " : "{"));
    out_add(o, "\"");
    out_add(o, key);
    out_add(o, "\": ");
}

static void out_float(Out *o, const char *key, double v) {
    char r[40];
    squad_float_repr(v, r);
    out_key(o, key);
    out_add(o, r);
}

static void out_long(Out *o, const char *key, long v) {
    char r[32];
    snprintf(r, sizeof r, "%ld", v);
    out_key(o, key);
    out_add(o, r);
}

char *squad_metrics_json(const SquadMetrics *m, int indent) {
    Out o = {NULL, 0, 0, indent > 0, 0};
    if (m->version == SQUAD_V1_1) {
        out_float(&o, "exact_match", m->exact);
        out_float(&o, "f1", m->f1);
    } else {
        out_float(&o, "exact", m->exact);
        out_float(&o, "f1", m->f1);
        out_long(&o, "total", m->total);
        if (m->has_ans) {
            out_float(&o, "HasAns_exact", m->has_ans_exact);
            out_float(&o, "HasAns_f1", m->has_ans_f1);
            out_long(&o, "HasAns_total", m->has_ans_total);
        }
        if (m->no_ans) {
            out_float(&o, "NoAns_exact", m->no_ans_exact);
            out_float(&o, "NoAns_f1", m->no_ans_f1);
            out_long(&o, "NoAns_total", m->no_ans_total);
        }
        if (m->best) {
            out_float(&o, "best_exact", m->best_exact);
            out_key(&o, "best_exact_thresh");
            out_add(&o, m->best_exact_thresh);
            out_float(&o, "best_f1", m->best_f1);
            out_key(&o, "best_f1_thresh");
            out_add(&o, m->best_f1_thresh);
        }
    }
    out_add(&o, o.indent ? "\n}" : "}");
    return o.s;
}
