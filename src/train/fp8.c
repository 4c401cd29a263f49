/*
 * fp8.c - delayed-scaling FP8 what-if counts (fp8.h).
 */
#include "train/fp8.h"

#include <math.h>
#include <stdlib.h>

const ampdiag_format fp8_formats[FP8_NFORMATS] = {AMPDIAG_E4M3, AMPDIAG_E5M2};

/* The amax history of one (layer, kind): a ring of the last `len` amax values, and the scale
 * each format used last. */
typedef struct fp8_ring {
    float *amax;  /* [history] */
    int n, head;  /* values held; where the next one goes */
    float scale[FP8_NFORMATS];
} fp8_ring;

struct fp8_delayed {
    int nlayers, history, margin;
    fp8_ring *rings; /* [nlayers * FP8_NKINDS] */
    float *store;    /* the rings' values */
};

fp8_delayed *fp8_delayed_create(int nlayers, int history, int margin)
{
    if (nlayers < 0 || history < 1)
        return NULL;
    fp8_delayed *d = calloc(1, sizeof *d);
    size_t nr = (size_t)(nlayers ? nlayers : 1) * FP8_NKINDS;
    if (!d || !(d->rings = calloc(nr, sizeof *d->rings)) ||
        !(d->store = calloc(nr * (size_t)history, sizeof *d->store))) {
        fp8_delayed_free(d);
        return NULL;
    }
    d->nlayers = nlayers;
    d->history = history;
    d->margin = margin;
    for (size_t i = 0; i < nr; i++) {
        d->rings[i].amax = d->store + i * (size_t)history;
        for (int f = 0; f < FP8_NFORMATS; f++)
            d->rings[i].scale[f] = 1.0f; /* TE's initial scale */
    }
    return d;
}

void fp8_delayed_free(fp8_delayed *d)
{
    if (!d)
        return;
    free(d->store);
    free(d->rings);
    free(d);
}

/* The amax TE would record for a tensor: NaN if it holds a NaN, inf if an inf, else the largest
 * finite |x| (0 for an empty or all-zero tensor). */
static float amax_of(const ampdiag_tstats *s)
{
    if (s->n_nan)
        return NAN;
    if (s->n_posinf || s->n_neginf)
        return INFINITY;
    return s->n_neg + s->n_pos ? s->absmax : 0.0f;
}

void fp8_delayed_count(fp8_delayed *d, const backend *bk, int layer, ampdiag_tensor_kind kind,
                       const float *x, size_t n, const ampdiag_tstats *s, fp8_counts *out)
{
    out->have = 0;
    if (!d || !bk->whatif_scaled || layer < 0 || layer >= d->nlayers || (int)kind < 0 ||
        (int)kind >= FP8_NKINDS)
        return;
    fp8_ring *r = &d->rings[(size_t)layer * FP8_NKINDS + (size_t)kind];
    /* the order of the values does not matter to their maximum: the ring is read whole */
    for (int f = 0; f < FP8_NFORMATS; f++)
        out->scale[f] = r->scale[f] = ampdiag_delayed_scale(fp8_formats[f], r->amax, (size_t)r->n, d->margin,
                                                            r->scale[f]);
    if (bk->whatif_scaled(bk, FP8_NFORMATS, fp8_formats, out->scale, x, n, out->c) != 0)
        return;
    r->amax[r->head] = amax_of(s);
    r->head = (r->head + 1) % d->history;
    if (r->n < d->history)
        r->n++;
    out->have = 1;
}
