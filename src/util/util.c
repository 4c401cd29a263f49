/*
 * util.c - small helpers shared by the library's modules (util.h).
 */
#include "util/util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

const char *fmt_num(char *buf, size_t n, double v, int digits)
{
    if (isnan(v))
        snprintf(buf, n, "nan");
    else if (isinf(v))
        snprintf(buf, n, "%sinf", v < 0 ? "-" : "");
    else
        snprintf(buf, n, "%.*g", digits, v);
    return buf;
}

static char *escape(char *dst, size_t n, const char *src, int md)
{
    if (!dst || !n)
        return dst;
    size_t k = 0;
    for (const unsigned char *q = (const unsigned char *)(src ? src : ""); *q; q++) {
        char tmp[8];
        const char *piece = tmp;
        if (*q < 0x20 || *q == 0x7f)
            snprintf(tmp, sizeof tmp, "\\x%02x", *q);
        else if (md && *q == '|')
            piece = "\\|";
        else if (md && *q == '`')
            piece = "\\`";
        else if (md && *q == '<')
            piece = "&lt;";
        else {
            tmp[0] = (char)*q;
            tmp[1] = 0;
        }
        size_t len = strlen(piece);
        if (k + len >= n)
            break;
        memcpy(dst + k, piece, len);
        k += len;
    }
    dst[k] = 0;
    return dst;
}

char *str_escape_ctl(char *dst, size_t n, const char *src) { return escape(dst, n, src, 0); }

char *str_escape_md(char *dst, size_t n, const char *src) { return escape(dst, n, src, 1); }
