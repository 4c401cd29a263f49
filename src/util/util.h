/*
 * util.h - small helpers shared by the library's modules.
 */
#ifndef AMPDIAG_UTIL_H
#define AMPDIAG_UTIL_H

#include <stddef.h>

/* snprintf into a caller's error buffer (err may be NULL or errlen 0: nothing is written). */
__attribute__((format(printf, 3, 4)))
void errf(char *err, size_t errlen, const char *fmt, ...);

/* v as "%.*g" with NaN and infinities written "nan", "inf", "-inf" (printf may write "-nan"):
 * every number a person reads goes through this. Returns buf. */
const char *fmt_num(char *buf, size_t n, double v, int digits);

/* Escaping text from files for where it is printed: util/escape.h. */

#endif
