/*
 * escape.h - text that came from a file (a trace's layer names, messages, skip reasons and
 * attributes, a model file's words, a path) made safe for the place it is printed: one rule per
 * kind of sink (traces/FORMAT.md, "Strings"). Text without control characters, invalid UTF-8
 * or the sink's special characters comes out unchanged.
 *
 *   text      a terminal, a log, a plain-text report: the C0 controls (newline and tab
 *             included), DEL, the C1 controls U+0080..U+009F, the invisible controls that
 *             reorder or break the text around them (str_layout_control: bidirectional
 *             embeddings, overrides, isolates and marks, the line and paragraph separators) and
 *             every byte that is not part of valid UTF-8 are written as \xNN, one per byte
 *             (U+009B, C2 9B, as \xc2\x9b; U+202E as \xe2\x80\xae); other valid printable
 *             UTF-8 is kept, a backslash too.
 *   Markdown  text, then a backslash before | ` * _ < > [ ] & and \ (so nothing becomes a
 *             table cell, code, emphasis, HTML, a link or an entity), before a leading # and a
 *             leading list marker ("- ", "+ ", "1. ", "1) "); a newline becomes a space.
 *   HTML      text (in an HTML block of a Markdown file, where backslashes escape nothing), then
 *             & < > " ' as &amp; &lt; &gt; &quot; &#39;.
 *   gnuplot   the inside of a single-quoted string (the caller writes the quotes): text, then
 *             ' doubled. Single-quoted strings know no backslash escapes, backquote or @ macro
 *             substitution, and text leaves no newline to end one. For enhanced text (titles,
 *             legends), a backslash also before ^ _ @ & ~ { } and \ (gnuplot's markup). For a
 *             tic label (SINK_GP_TIC: enhanced text that gnuplot also reads as a format), %
 *             doubled. A file name (SINK_GP_PATH) is the inside of a double-quoted string whose
 *             bytes gnuplot gives back exactly: printable ASCII kept but " \ ` @ $, every other
 *             byte as an octal escape \ooo (gnuplot 5.4 reads '' in a single-quoted string, but
 *             not two of them in a row, and no byte escape there).
 *   JSON      util/json.h: control characters (C1 included) as \u00XX, the layout controls
 *             as \uXXXX (\u202e), invalid UTF-8 as U+FFFD.
 *   file name str_file_part: [A-Za-z0-9._-] only.
 */
#ifndef AMPDIAG_ESCAPE_H
#define AMPDIAG_ESCAPE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

typedef enum str_sink {
    SINK_TEXT,     /* terminal, log, plain text */
    SINK_MD,       /* Markdown text, list items and table cells */
    SINK_HTML,     /* HTML text or attribute value (<summary> in Markdown) */
    SINK_GP,       /* inside a gnuplot single-quoted string */
    SINK_GP_ENH,   /* the same, shown as gnuplot enhanced text */
    SINK_GP_TIC,   /* the same, as a tic label (also a format: % doubled) */
    SINK_GP_PATH   /* a file or directory name inside a gnuplot double-quoted string */
} str_sink;

/* The longest an escaped copy of n bytes can be in any sink, with its NUL. */
#define STR_ESCAPED_SIZE(n) (6 * (size_t)(n) + 1)

/* Length of the valid UTF-8 sequence s starts with (1 for an ASCII byte; shortest form, no
 * surrogates, at most U+10FFFF), or 0 when it starts none (and at the end of the string). */
size_t str_utf8_len(const char *s);

/* The code point of the layout control the valid UTF-8 sequence s (of len bytes) is, else 0:
 * U+061C, U+200E, U+200F, U+2028..U+202E and U+2066..U+2069 (bidirectional marks, embeddings,
 * overrides and isolates, which can make a terminal show a name reversed or a line that is not
 * there; the line and paragraph separators). */
unsigned str_layout_control(const char *s, size_t len);

/* src escaped for `sink` into dst (n bytes, NUL-terminated); an escape is never cut: what does
 * not fit is left out. A NULL src is "". Returns dst. */
char *str_escape(char *dst, size_t n, const char *src, str_sink sink);

/* The same for the terminal and for Markdown. */
char *str_escape_ctl(char *dst, size_t n, const char *src);
char *str_escape_md(char *dst, size_t n, const char *src);

/* s escaped for `sink` onto f (NULL writes nothing); 0, or -1 when f has a write error. */
int str_fputs(const char *s, str_sink sink, FILE *f);

/* A path or file name as Markdown inline code: `s` with | as \| (as GitHub's tables need) and
 * controls as \xNN; s escaped as Markdown text when it holds a backquote. 0 or -1. */
int str_fputs_md_code(const char *s, FILE *f);

/* fprintf whose whole output is escaped as text, except one newline that ends it: for a line
 * (or part of one) that quotes a file's contents, a path or an argument. 0 or -1. */
__attribute__((format(printf, 2, 3)))
int fprintf_text(FILE *f, const char *fmt, ...);
__attribute__((format(printf, 2, 0)))
int vfprintf_text(FILE *f, const char *fmt, va_list ap);

/* A part of a file name made from text (a run's label, a layer name), into dst (n bytes):
 * letters, digits, '.', '_' and '-' kept, every other run of bytes one '-', no '-' at the end,
 * "x" when nothing is left. To be used after a fixed prefix ("exponent-histogram-"), so that
 * a name never starts with '.' or '-'. Returns dst. */
char *str_file_part(char *dst, size_t n, const char *src);

#endif
