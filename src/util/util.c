/*
 * util.c - small helpers shared by the library's modules (util.h).
 */
#include "util/util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

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
