/*
 * escape.c - text from files made safe for each kind of sink (escape.h).
 *
 * Every sink starts from the text rule (controls and invalid UTF-8 as \xNN) and adds its own:
 * the string is cut into characters, each becomes one piece, and the pieces are written into a
 * buffer or onto a stream.
 */
#include "util/escape.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Markdown inside a code span: only for str_fputs_md_code. */
#define SINK_MD_CODE ((str_sink)100)

size_t str_utf8_len(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    unsigned char c = s[0];
    if (c == 0)
        return 0;
    if (c < 0x80)
        return 1;
    size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0; /* also stops at the string's end */
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0) || /* overlong, surrogate */
        (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))   /* overlong, > U+10FFFF */
        return 0;
    return len;
}

unsigned str_layout_control(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    unsigned cp;
    if (len == 2 && s[0] == 0xd8 && s[1] == 0x9c)
        return 0x061c;
    if (len != 3 || s[0] != 0xe2)
        return 0;
    cp = ((unsigned)(s[0] & 0x0f) << 12) | ((unsigned)(s[1] & 0x3f) << 6) | (s[2] & 0x3fu);
    return cp == 0x200e || cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) ||
                   (cp >= 0x2066 && cp <= 0x2069)
               ? cp
               : 0;
}

/* One character's escaped form (the longest: a C1 control in enhanced gnuplot text, 10 bytes). */
typedef struct piece {
    char s[24];
    size_t len;
} piece;

static void put(piece *p, const char *s, size_t n)
{
    memcpy(p->s + p->len, s, n);
    p->len += n;
}

/* The text rule for the character at s: kept, or each of its bytes as \xNN. Bytes used. */
static size_t text_piece(const unsigned char *s, piece *p)
{
    size_t n = str_utf8_len((const char *)s);
    int plain = n == 1 ? s[0] >= 0x20 && s[0] != 0x7f
                       : n > 1 && !(s[0] == 0xc2 && s[1] < 0xa0) && !str_layout_control((const char *)s, n);
    size_t used = n ? n : 1;
    p->len = 0;
    if (plain) {
        put(p, (const char *)s, used);
        return used;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < used; i++) {
        char e[4] = {'\\', 'x', hex[s[i] >> 4], hex[s[i] & 15]};
        put(p, e, 4);
    }
    return used;
}

/* At the start of a Markdown text: the bytes of a heading or list marker that would make the
 * text a heading or a (nested) list, with the character that makes it one escaped; 0 if none.
 * "# ", "#x": \#; "- x", "+ x": \- / \+; "12. x", "3)": 12\. / 3\). */
static size_t md_marker(const unsigned char *s, piece *p)
{
    p->len = 0;
    if (s[0] == '#') {
        put(p, "\\#", 2);
        return 1;
    }
    if ((s[0] == '-' || s[0] == '+') && (s[1] == ' ' || s[1] == '\t')) {
        char e[2] = {'\\', (char)s[0]};
        put(p, e, 2);
        return 1;
    }
    size_t d = 0;
    while (d < 9 && s[d] >= '0' && s[d] <= '9')
        d++;
    if (d == 0 || (s[d] != '.' && s[d] != ')') || (s[d + 1] && s[d + 1] != ' ' && s[d + 1] != '\t'))
        return 0;
    put(p, (const char *)s, d);
    char e[2] = {'\\', (char)s[d]};
    put(p, e, 2);
    return d + 1;
}

/* Markdown's own escapes for the character at s (bytes used), 0 where the text rule applies. */
static size_t md_piece(const unsigned char *s, int at_start, piece *p)
{
    size_t m = at_start ? md_marker(s, p) : 0;
    if (m)
        return m;
    p->len = 0;
    if (*s == '\n') {
        put(p, " ", 1);
        return 1;
    }
    if (strchr("\\`*_|<>[]&", *s)) {
        char e[2] = {'\\', (char)*s};
        put(p, e, 2);
        return 1;
    }
    return 0;
}

/* HTML's entities for the character at s (1), 0 where the text rule applies. */
static size_t html_piece(const unsigned char *s, piece *p)
{
    static const char special[] = "&<>\"'";
    static const char *const entity[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"};
    const char *h = strchr(special, *s);
    if (!h)
        return 0;
    p->len = 0;
    put(p, entity[h - special], strlen(entity[h - special]));
    return 1;
}

/* The text rule's piece t inside a gnuplot single-quoted string, enhanced text or not, a tic
 * label (a format too) or not. */
static void gp_piece(const piece *t, int enhanced, int tic, piece *p)
{
    p->len = 0;
    for (size_t i = 0; i < t->len; i++) {
        if (t->s[i] == '\'')
            put(p, "'", 1);
        else if (enhanced && strchr("^_@&~{}\\", t->s[i]))
            put(p, "\\", 1);
        else if (tic && t->s[i] == '%')
            put(p, "%", 1);
        put(p, &t->s[i], 1);
    }
}

/* One byte of a file name inside a gnuplot double-quoted string: kept, or \ooo. */
static size_t gp_path_piece(const unsigned char *s, piece *p)
{
    p->len = 0;
    if (*s >= 0x20 && *s < 0x7f && !strchr("\"\\`@$", *s)) {
        put(p, (const char *)s, 1);
        return 1;
    }
    char e[4] = {'\\', (char)('0' + (*s >> 6)), (char)('0' + ((*s >> 3) & 7)), (char)('0' + (*s & 7))};
    put(p, e, 4);
    return 1;
}

/* The piece for the character at s (not the string's end) in sink; bytes of s used. */
static size_t next_piece(const unsigned char *s, int at_start, str_sink sink, piece *p)
{
    size_t used = sink == SINK_MD ? md_piece(s, at_start, p) : sink == SINK_HTML ? html_piece(s, p) : 0;
    if (used)
        return used;
    if (sink == SINK_MD_CODE && *s == '|') {
        p->len = 0;
        put(p, "\\|", 2);
        return 1;
    }
    if (sink == SINK_GP_PATH) /* exact bytes, not the text rule */
        return gp_path_piece(s, p);
    piece t;
    used = text_piece(s, &t);
    if (sink == SINK_GP || sink == SINK_GP_ENH || sink == SINK_GP_TIC)
        gp_piece(&t, sink != SINK_GP, sink == SINK_GP_TIC, p);
    else
        *p = t;
    return used;
}

char *str_escape(char *dst, size_t n, const char *src, str_sink sink)
{
    if (!dst || !n)
        return dst;
    const unsigned char *s = (const unsigned char *)(src ? src : "");
    size_t k = 0;
    for (size_t i = 0; s[i];) {
        piece p;
        i += next_piece(s + i, i == 0, sink, &p);
        if (k + p.len >= n)
            break;
        memcpy(dst + k, p.s, p.len);
        k += p.len;
    }
    dst[k] = 0;
    return dst;
}

char *str_escape_ctl(char *dst, size_t n, const char *src) { return str_escape(dst, n, src, SINK_TEXT); }

char *str_escape_md(char *dst, size_t n, const char *src) { return str_escape(dst, n, src, SINK_MD); }

int str_fputs(const char *str, str_sink sink, FILE *f)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    for (size_t i = 0; s[i];) {
        piece p;
        i += next_piece(s + i, i == 0, sink, &p);
        if (fwrite(p.s, 1, p.len, f) != p.len)
            return -1;
    }
    return ferror(f) ? -1 : 0;
}

int str_fputs_md_code(const char *s, FILE *f)
{
    if (s && strchr(s, '`'))
        return str_fputs(s, SINK_MD, f);
    fputc('`', f);
    str_fputs(s, SINK_MD_CODE, f);
    fputc('`', f);
    return ferror(f) ? -1 : 0;
}

int fprintf_text(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfprintf_text(f, fmt, ap);
    va_end(ap);
    return rc;
}

int vfprintf_text(FILE *f, const char *fmt, va_list ap)
{
    char small[512], *buf = small;
    va_list again;
    va_copy(again, ap);
    int len = vsnprintf(small, sizeof small, fmt, ap);
    if (len < 0) {
        va_end(again);
        return -1;
    }
    if ((size_t)len >= sizeof small) {
        char *big = malloc((size_t)len + 1);
        if (big) {
            vsnprintf(big, (size_t)len + 1, fmt, again);
            buf = big;
        } else {
            len = (int)strlen(small); /* out of memory: the part that fit, escaped all the same */
        }
    }
    va_end(again);
    int nl = len > 0 && buf[len - 1] == '\n';
    if (nl)
        buf[len - 1] = 0;
    int rc = str_fputs(buf, SINK_TEXT, f);
    if (nl && fputc('\n', f) == EOF)
        rc = -1;
    if (buf != small)
        free(buf);
    return rc;
}

char *str_file_part(char *dst, size_t n, const char *src)
{
    if (!dst || !n)
        return dst;
    if (n < 2) {
        dst[0] = 0;
        return dst;
    }
    size_t k = 0;
    for (const char *s = src ? src : ""; *s && k + 1 < n; s++) {
        char ch = *s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '.' || ch == '_' || ch == '-')
            dst[k++] = ch;
        else if (k && dst[k - 1] != '-')
            dst[k++] = '-';
    }
    while (k && dst[k - 1] == '-')
        k--;
    if (!k)
        dst[k++] = 'x';
    dst[k] = 0;
    return dst;
}
