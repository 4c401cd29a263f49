/*
 * json.c - the JSON writer (json.h).
 */
#include "util/json.h"
#include "util/escape.h"

#include <inttypes.h>
#include <math.h>

void jw_begin(jw *w, FILE *f)
{
    w->f = f;
    w->depth = 0;
    w->first[0] = 1;
}

int jw_end(jw *w)
{
    fputc('\n', w->f);
    return ferror(w->f) ? -1 : 0;
}

static void jw_sep(jw *w)
{
    if (w->depth > 0) {
        if (!w->first[w->depth])
            fputc(',', w->f);
        w->first[w->depth] = 0;
    }
}

/* JSON string: escapes, control characters (C0, DEL, C1) as \u00XX, the layout controls
 * (str_layout_control) as \uXXXX, and bytes that are not valid UTF-8 as U+FFFD
 * (util/escape.h). */
void json_write_string(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned char ch = *p;
        size_t len = str_utf8_len((const char *)p);
        if (len == 0) {
            fputs("\\ufffd", f);
            p++;
        } else if (len == 2 && ch == 0xc2 && p[1] < 0xa0) {
            fprintf(f, "\\u%04x", p[1]); /* a C1 control, U+0080..U+009F */
            p += 2;
        } else if (len > 1 && str_layout_control((const char *)p, len)) {
            fprintf(f, "\\u%04x", str_layout_control((const char *)p, len)); /* U+202E, ... */
            p += len;
        } else if (len > 1) {
            fwrite(p, 1, len, f);
            p += len;
        } else {
            switch (ch) {
            case '"': fputs("\\\"", f); break;
            case '\\': fputs("\\\\", f); break;
            case '\n': fputs("\\n", f); break;
            case '\r': fputs("\\r", f); break;
            case '\t': fputs("\\t", f); break;
            default:
                if (ch < 0x20 || ch == 0x7f)
                    fprintf(f, "\\u%04x", ch);
                else
                    fputc(ch, f);
            }
            p++;
        }
    }
    fputc('"', f);
}

void jw_key(jw *w, const char *k)
{
    jw_sep(w);
    if (k) {
        json_write_string(w->f, k);
        fputc(':', w->f);
    }
}

void jw_open(jw *w, const char *k, char c)
{
    jw_key(w, k);
    fputc(c, w->f);
    w->depth++;
    w->first[w->depth] = 1;
}

void jw_close(jw *w, char c)
{
    w->depth--;
    fputc(c, w->f);
}

void jw_str(jw *w, const char *k, const char *v)
{
    jw_key(w, k);
    json_write_string(w->f, v);
}

void jw_num(jw *w, const char *k, double v)
{
    jw_key(w, k);
    if (isfinite(v))
        fprintf(w->f, "%.17g", v);
    else
        fputs("null", w->f);
}

void jw_int(jw *w, const char *k, int64_t v)
{
    jw_key(w, k);
    fprintf(w->f, "%" PRId64, v);
}

/* A step or layer index where -1 means none: null. */
void jw_opt_int(jw *w, const char *k, int64_t v)
{
    if (v < 0) {
        jw_key(w, k);
        fputs("null", w->f);
    } else {
        jw_int(w, k, v);
    }
}

void jw_u64(jw *w, const char *k, uint64_t v)
{
    jw_key(w, k);
    fprintf(w->f, "%" PRIu64, v);
}

void jw_bool(jw *w, const char *k, int v)
{
    jw_key(w, k);
    fputs(v ? "true" : "false", w->f);
}

void jw_null(jw *w, const char *k)
{
    jw_key(w, k);
    fputs("null", w->f);
}
