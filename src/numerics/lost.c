/*
 * lost.c - lost-update counts over arrays (ampdiag_update_lost_counts, include/ampdiag.h): the
 * weights before an optimizer step, the change it made and the gradients, in one pass of blocks,
 * with the vectorised roundings of ampdiag_round_array.
 */
#include "ampdiag.h"

#include <math.h>

#define LOST_BLOCK 512

/* Whether element i was meant to change: it changed, or its gradient is finite and non-zero. */
static int meant(const float *d, const float *g, size_t i)
{
    return d[i] != 0.0f || (g && g[i] != 0.0f && isfinite(g[i]));
}

/* counts[0] over one block: meant to change but unchanged as stored. */
static uint64_t lost_stored(const float *d, const float *g, size_t n)
{
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += d[i] == 0.0f && meant(d, g, i);
    return c;
}

/* Meant to change, but fl(fl(w) + d) == fl(w) in fmt, over one block. */
static uint64_t lost_in(ampdiag_format fmt, const float *w, const float *d, const float *g, size_t n)
{
    float wr[LOST_BLOCK], s[LOST_BLOCK];
    ampdiag_round_array(fmt, 0, w, wr, n);
    for (size_t i = 0; i < n; i++)
        s[i] = wr[i] + d[i];
    ampdiag_round_array(fmt, 0, s, s, n);
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += s[i] == wr[i] && meant(d, g, i);
    return c;
}

void ampdiag_update_lost_counts(const float *w, const float *d, const float *g, size_t n, uint64_t counts[3])
{
    counts[0] = counts[1] = counts[2] = 0;
    for (size_t i = 0; i < n; i += LOST_BLOCK) {
        size_t k = n - i < LOST_BLOCK ? n - i : LOST_BLOCK;
        const float *gi = g ? g + i : NULL;
        counts[0] += lost_stored(d + i, gi, k);
        counts[1] += lost_in(AMPDIAG_FP16, w + i, d + i, gi, k);
        counts[2] += lost_in(AMPDIAG_BF16, w + i, d + i, gi, k);
    }
}
