/*
 * json.h - the one JSON writer of every command (compare's report, info, sweep): keys and values
 * written as they come, commas placed by nesting depth, strings escaped and always valid UTF-8
 * (control characters, C1 included, as \u00XX; bytes that are not valid UTF-8 become U+FFFD),
 * non-finite numbers written as null.
 * Every document a command writes carries a "format_version" key (JSON_FORMAT_VERSION or the
 * document's own version) so that scripts can tell revisions apart.
 *
 * Usage: jw w; jw_begin(&w, stdout); jw_open(&w, NULL, '{'); jw_int(&w, "format_version", 1);
 * ...; jw_close(&w, '}'); jw_end(&w);  A NULL key writes a bare value (inside an array).
 */
#ifndef AMPDIAG_JSON_H
#define AMPDIAG_JSON_H

#include <stdint.h>
#include <stdio.h>

typedef struct jw {
    FILE *f;
    int depth;
    int first[32];
} jw;

void jw_begin(jw *w, FILE *f);
/* Writes the final newline; returns 0, or -1 when the stream had a write error. */
int jw_end(jw *w);

void json_write_string(FILE *f, const char *s); /* "..." escaped, valid UTF-8; null for NULL */

void jw_key(jw *w, const char *k);              /* "k": (nothing for NULL), after a comma if due */
void jw_open(jw *w, const char *k, char c);     /* c is '{' or '[' */
void jw_close(jw *w, char c);                   /* c is '}' or ']' */
void jw_str(jw *w, const char *k, const char *v);   /* NULL -> null */
void jw_num(jw *w, const char *k, double v);        /* %.17g; NaN and inf -> null */
void jw_int(jw *w, const char *k, int64_t v);
void jw_opt_int(jw *w, const char *k, int64_t v);   /* v < 0 (a step or index meaning none) -> null */
void jw_u64(jw *w, const char *k, uint64_t v);
void jw_bool(jw *w, const char *k, int v);
void jw_null(jw *w, const char *k);

#endif
