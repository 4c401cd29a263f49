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

/* Copy src into dst (n bytes, NUL-terminated), each control byte (< 0x20 and 0x7f) written as
 * the four characters \xNN, so that text from a file (a trace's names, messages, attributes)
 * cannot send terminal escapes. An escape is never cut: what does not fit is left out.
 * Returns dst. */
char *str_escape_ctl(char *dst, size_t n, const char *src);

/* The same for Markdown tables and text: also '|' as \|, '`' as \` and '<' as &lt;. */
char *str_escape_md(char *dst, size_t n, const char *src);

#endif
