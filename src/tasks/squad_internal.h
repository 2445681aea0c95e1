/* Text helpers shared by src/tasks/squad*.c (not part of the library's interface). */
#ifndef BERT_TASKS_SQUAD_INTERNAL_H
#define BERT_TASKS_SQUAD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The code point at s[*i] of valid UTF-8 (advancing *i); -1 for an invalid sequence. */
int32_t squad_next_cp(const char *s, size_t n, size_t *i);
/* Code points in s[0..n). */
size_t squad_count_cps(const char *s, size_t n);
/* " ".join(s.split()) with Python's whitespace, into out (room for strlen(s) + 1). */
void squad_normalize_spaces(const char *s, char *out);

/* JSON as Python's json.dumps writes it: a string with ensure_ascii (\uXXXX escapes), a
 * float as repr() (the shortest digits that read back; NaN, Infinity). */
void squad_json_string(FILE *fp, const char *s);
void squad_json_float(FILE *fp, double x);

#endif
