/*
 * wrap.h - text that fits the width it is read at: $COLUMNS, else the width of the terminal
 * stdout is on (at most 100 columns when it is not a terminal), paragraphs wrapped with a hanging indent,
 * and tables whose widest cells wrap inside their column so that a row fits.
 */
#ifndef AMPDIAG_WRAP_H
#define AMPDIAG_WRAP_H

#include <stddef.h>
#include <stdio.h>

#include "util/vec.h"

#define WRAP_DEFAULT 100 /* the width when f is not a terminal */
#define WRAP_MIN 40
#define WRAP_MAX 1000

/* The columns $COLUMNS names when set (a number), else those of the terminal f writes to, else
 * WRAP_DEFAULT; never below WRAP_MIN. */
int wrap_width(FILE *f);

/* label (padded to indent), then text (escaped for the terminal, util/escape.h) wrapped at
 * width, continuation lines indented by indent; a word longer than a line stands alone. */
void wrap_para(FILE *f, const char *label, int indent, const char *text, int width);

/* A table: ncols columns, rows of cells (rows[r * ncols + c], NULL as ""), cells escaped
 * for the terminal. Columns are as wide as their widest cell, two spaces apart; while the table
 * is wider than width the widest column wraps its cells (down to min_col, never inside a word),
 * the first column (the rows' labels) only when no other can narrow. Row 0 is the header.
 * lead: columns indented by this many spaces. Returns 0 or -1 (out of memory). */
int wrap_table(FILE *f, const char *const *cells, size_t nrows, size_t ncols, int lead, int width,
               int min_col);

/* Cells gathered row by row for wrap_table: wrap_cell appends one (printf-style); the table is
 * printed and the cells freed by wrap_cells_print. An allocation that fails is remembered and
 * makes wrap_cells_print return -1. */
typedef struct wrap_cells {
    VEC(char *) c;
    int oom;
} wrap_cells;

void wrap_cell(wrap_cells *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int wrap_cells_print(FILE *f, wrap_cells *t, size_t ncols, int lead, int width, int min_col);

#endif
