/*
 * wrap.c - text fitted to a width (wrap.h).
 */
#include "util/wrap.h"
#include "util/escape.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int wrap_width(FILE *f)
{
    const char *cols = getenv("COLUMNS");
    char *end;
    long c = cols && *cols ? strtol(cols, &end, 10) : 0;
    if (c > 0 && !*end)
        return c < WRAP_MIN ? WRAP_MIN : c > WRAP_MAX ? WRAP_MAX : (int)c;
    struct winsize ws;
    int fd = fileno(f);
    if (fd >= 0 && isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col < WRAP_MIN ? WRAP_MIN : ws.ws_col;
    return WRAP_DEFAULT;
}

/* The next line of at most avail bytes of p (words not broken unless one is longer than a
 * line): its length; *next where the line after it starts. */
static size_t line_of(const char *p, size_t avail, const char **next)
{
    size_t len = strlen(p);
    size_t take = len;
    if (len > avail) {
        take = avail;
        while (take > 0 && p[take] != ' ')
            take--;
        if (take == 0) { /* one long word */
            take = avail;
            while (p[take] && p[take] != ' ')
                take++;
        }
    }
    const char *q = p + take;
    while (*q == ' ')
        q++;
    *next = q;
    while (take > 0 && p[take - 1] == ' ')
        take--;
    return take;
}

static char *escaped(const char *text)
{
    size_t size = STR_ESCAPED_SIZE(strlen(text ? text : ""));
    char *esc = malloc(size);
    if (esc)
        str_escape_ctl(esc, size, text ? text : "");
    return esc;
}

void wrap_para(FILE *f, const char *label_, int indent, const char *text, int width)
{
    char *esc = escaped(text), *elabel = escaped(label_);
    const char *p = esc ? esc : "(out of memory)";
    const char *label = elabel ? elabel : "";
    int ll = (int)strlen(label ? label : "");
    if (width - indent < WRAP_MIN / 2 && indent > 4) { /* too narrow beside the label: under it */
        indent = 4;
        if (label && *label)
            ll = indent; /* on a line of its own */
    }
    int avail = width - indent;
    if (avail < WRAP_MIN / 2)
        avail = WRAP_MIN / 2;
    if (ll >= indent && label && *label) { /* a long label: on a line of its own */
        fprintf(f, "%s\n", label);
        label = "";
    }
    fprintf(f, "%-*s", indent, label ? label : "");
    while (*p == ' ')
        p++;
    int first = 1;
    while (*p || first) {
        const char *next;
        size_t take = line_of(p, (size_t)avail, &next);
        if (!first)
            fprintf(f, "\n%*s", indent, "");
        fprintf(f, "%.*s", (int)take, p);
        first = 0;
        p = next;
    }
    fputc('\n', f);
    free(esc);
    free(elabel);
}

/* ------------------------------------------------------------------------------------------
 * Tables
 * ------------------------------------------------------------------------------------------ */

/* The lines of a cell wrapped at w: how many. */
static int cell_lines(const char *s, int w)
{
    int n = 0;
    const char *p = s;
    do {
        const char *next;
        line_of(p, (size_t)w, &next);
        p = next;
        n++;
    } while (*p);
    return n;
}

/* Line k of a cell wrapped at w: its length, *start where it starts. */
static size_t cell_line(const char *s, int w, int k, const char **start)
{
    const char *p = s;
    size_t take = 0;
    for (int i = 0; i <= k; i++) {
        if (!*p && i > 0) {
            take = 0;
            break;
        }
        const char *next;
        take = line_of(p, (size_t)w, &next);
        if (i < k)
            p = next;
    }
    *start = p;
    return take;
}

/* Line k of a row: its cells' lines padded to their columns, none after the last one that has
 * words (no trailing blanks). */
static void row_line(FILE *f, char *const *cells, const int *w, size_t ncols, int lead, int k)
{
    const char *p;
    size_t last = 0;
    for (size_t c = 0; c < ncols; c++)
        if (cell_line(cells[c], w[c], k, &p) > 0)
            last = c + 1;
    fprintf(f, "%*s", lead, "");
    for (size_t c = 0; c < last; c++) {
        size_t take = cell_line(cells[c], w[c], k, &p);
        fprintf(f, "%.*s", (int)take, p);
        if (c + 1 < last)
            fprintf(f, "%*s  ", w[c] - (int)take > 0 ? w[c] - (int)take : 0, "");
    }
    fputc('\n', f);
}

static int total_width(const int *w, size_t ncols, int lead)
{
    int t = lead;
    for (size_t c = 0; c < ncols; c++)
        t += w[c] + (c + 1 < ncols ? 2 : 0);
    return t;
}

/* Column widths: the widest cell each, then the widest column narrowed while the table is too
 * wide (not below min_col, nor below its longest word). */
static void fit_widths(char **esc, size_t nrows, size_t ncols, int lead, int width, int min_col, int *w)
{
    int *floor_ = calloc(ncols, sizeof *floor_);
    for (size_t c = 0; c < ncols; c++)
        for (size_t r = 0; r < nrows; r++) {
            const char *s = esc[r * ncols + c];
            int len = (int)strlen(s);
            if (len > w[c])
                w[c] = len;
            for (const char *p = s; floor_ && *p;) { /* the longest word */
                int k = (int)strcspn(p, " ");
                if (k > floor_[c])
                    floor_[c] = k;
                p += k + (p[k] == ' ');
            }
        }
    /* the widest column that can still narrow; the first (the rows' labels) last */
    while (total_width(w, ncols, lead) > width) {
        size_t widest = ncols;
        for (size_t c = ncols > 1; c < ncols; c++) {
            int lo = min_col > (floor_ ? floor_[c] : 0) ? min_col : floor_[c];
            if (w[c] > lo && (widest == ncols || w[c] > w[widest]))
                widest = c;
        }
        for (size_t c = 0; c < 1 && widest == ncols; c++) {
            int lo = min_col > (floor_ ? floor_[c] : 0) ? min_col : floor_[c];
            if (w[c] > lo && (widest == ncols || w[c] > w[widest]))
                widest = c;
        }
        if (widest == ncols)
            break;
        w[widest]--;
    }
    free(floor_);
}

int wrap_table(FILE *f, const char *const *cells, size_t nrows, size_t ncols, int lead, int width,
               int min_col)
{
    char **esc = calloc(nrows * ncols > 0 ? nrows * ncols : 1, sizeof *esc);
    int *w = calloc(ncols ? ncols : 1, sizeof *w);
    int rc = esc && w ? 0 : -1;
    for (size_t i = 0; !rc && i < nrows * ncols; i++)
        if (!(esc[i] = escaped(cells[i])))
            rc = -1;
    if (!rc) {
        fit_widths(esc, nrows, ncols, lead, width, min_col, w);
        for (size_t r = 0; r < nrows; r++) {
            int lines = 1;
            for (size_t c = 0; c < ncols; c++) {
                int k = cell_lines(esc[r * ncols + c], w[c]);
                lines = k > lines ? k : lines;
            }
            for (int k = 0; k < lines; k++)
                row_line(f, esc + r * ncols, w, ncols, lead, k);
        }
    }
    for (size_t i = 0; esc && i < nrows * ncols; i++)
        free(esc[i]);
    free(esc);
    free(w);
    return rc;
}

void wrap_cell(wrap_cells *t, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *s = strdup(buf);
    if (!s || vec_push(&t->c, s)) {
        free(s);
        t->oom = 1;
    }
}

int wrap_cells_print(FILE *f, wrap_cells *t, size_t ncols, int lead, int width, int min_col)
{
    int rc = t->oom || ncols == 0 ? -1 : 0;
    if (!rc && t->c.n)
        rc = wrap_table(f, (const char *const *)t->c.v, t->c.n / ncols, ncols, lead, width, min_col);
    for (size_t i = 0; i < t->c.n; i++)
        free(t->c.v[i]);
    vec_free(&t->c);
    t->oom = 0;
    return rc;
}
