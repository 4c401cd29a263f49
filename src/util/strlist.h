/*
 * strlist.h - a growable list of strings (util/vec.h underneath): lines of text a caller
 * collects and frees together.
 */
#ifndef AMPDIAG_STRLIST_H
#define AMPDIAG_STRLIST_H

#include <stddef.h>

#include "util/vec.h"

typedef struct strlist {
    char **s;
    size_t n, cap;
    int oom; /* an allocation failed: some lines are missing */
} strlist;

/* Append a printf-formatted line. Returns 0, or -1 (and sets oom) when out of memory. */
int strlist_addf(strlist *l, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void strlist_free(strlist *l);

#endif
