/*
 * strlist.c - a growable list of strings (strlist.h).
 */
#include "util/strlist.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int strlist_addf(strlist *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = len < 0 ? NULL : malloc((size_t)len + 1);
    if (!s) {
        l->oom = 1;
        return -1;
    }
    va_start(ap, fmt);
    vsnprintf(s, (size_t)len + 1, fmt, ap);
    va_end(ap);
    if (vec_reserve_((void **)&l->s, &l->cap, l->n + 1, sizeof *l->s)) {
        free(s);
        l->oom = 1;
        return -1;
    }
    l->s[l->n++] = s;
    return 0;
}

void strlist_free(strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->s[i]);
    free(l->s);
    memset(l, 0, sizeof *l);
}
