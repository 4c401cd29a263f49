/*
 * util.c - small helpers shared by the library's modules (util.h).
 */
#include "util/util.h"

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
