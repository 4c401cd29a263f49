/*
 * lost.c - lost-update counts over arrays (ampdiag_update_lost_counts, include/ampdiag.h): the
 * weights before an optimizer step, the change it made and the gradients, in blocks, with the
 * vectorised roundings of ampdiag_round_array and branch-free counting loops (the outcomes are
 * data-dependent: branches on them mispredict).
 */
#include "ampdiag.h"

#include <float.h>
#include <math.h>

#define LOST_BLOCK 512

/* m[i] = 1 where element i was meant to change: it changed, or its gradient is finite and
 * non-zero (|g| <= FLT_MAX is false for inf and NaN). */
static void meant_block(const float *d, const float *g, size_t n, unsigned char *m)
{
    if (!g) {
        for (size_t i = 0; i < n; i++)
            m[i] = d[i] != 0.0f;
        return;
    }
    for (size_t i = 0; i < n; i++)
        m[i] = (unsigned char)((d[i] != 0.0f) | ((g[i] != 0.0f) & (fabsf(g[i]) <= FLT_MAX)));
}

/* Meant to change but unchanged as stored, over one block. */
static unsigned lost_stored(const float *d, const unsigned char *m, size_t n)
{
    unsigned c = 0; /* n <= LOST_BLOCK */
    for (size_t i = 0; i < n; i++)
        c += (unsigned)((d[i] == 0.0f) & m[i]);
    return c;
}

/* Adds to *c the updates meant to change but with fl(fl(w) + d) == fl(w) in fmt, over one block.
 * 0, or -1 when fmt has no rounding. */
static int lost_in(ampdiag_format fmt, const float *w, const float *d, const unsigned char *m, size_t n,
                   uint64_t *c)
{
    float wr[LOST_BLOCK], s[LOST_BLOCK];
    if (ampdiag_round_array(fmt, 0, w, wr, n))
        return -1;
    for (size_t i = 0; i < n; i++)
        s[i] = wr[i] + d[i];
    if (ampdiag_round_array(fmt, 0, s, s, n))
        return -1;
    unsigned k = 0; /* n <= LOST_BLOCK */
    for (size_t i = 0; i < n; i++)
        k += (unsigned)((s[i] == wr[i]) & m[i]);
    *c += k;
    return 0;
}

int ampdiag_update_lost_counts(const float *w, const float *d, const float *g, size_t n, uint64_t counts[3])
{
    unsigned char m[LOST_BLOCK];
    counts[0] = counts[1] = counts[2] = 0;
    for (size_t i = 0; i < n; i += LOST_BLOCK) {
        size_t k = n - i < LOST_BLOCK ? n - i : LOST_BLOCK;
        meant_block(d + i, g ? g + i : NULL, k, m);
        counts[0] += lost_stored(d + i, m, k);
        if (lost_in(AMPDIAG_FP16, w + i, d + i, m, k, &counts[1]) ||
            lost_in(AMPDIAG_BF16, w + i, d + i, m, k, &counts[2]))
            return -1;
    }
    return 0;
}
