/*
 * lrfind.c - the LR range test's suggestions (lrfind.h).
 */
#include "analysis/lrfind.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* fastai's valley: the longest strictly decreasing subsequence of the smoothed loss, and the
 * point two thirds along it (start + section + section / 2, section = length / 3). */
double lr_valley(const double *lr, const double *l, size_t n)
{
    if (n < 2)
        return NAN;
    size_t *lds = malloc(n * sizeof *lds);
    if (!lds)
        return NAN;
    /* as fastai writes it: max_start may be -1 (one before a run that starts at 0) */
    long max_start = 0;
    size_t max_end = 0;
    for (size_t i = 0; i < n; i++)
        lds[i] = 1;
    for (size_t i = 1; i < n; i++) {
        for (size_t j = 0; j < i; j++)
            if (l[i] < l[j] && lds[i] < lds[j] + 1)
                lds[i] = lds[j] + 1;
        if (lds[max_end] < lds[i]) {
            max_end = i;
            max_start = (long)max_end - (long)lds[max_end];
        }
    }
    free(lds);
    if (max_end == 0)
        return NAN;
    double sections = (double)((long)max_end - max_start) / 3.0;
    long idx = max_start + (long)sections + (long)(sections / 2);
    if (idx < 0)
        idx = 0;
    return lr[(size_t)idx < n ? (size_t)idx : n - 1];
}

void lr_suggest_from(const double *lr, const double *loss, size_t n, lr_suggest *s)
{
    memset(s, 0, sizeof *s);
    s->valley = s->steepest = s->minimum = s->min_loss = s->diverged_at = NAN;
    double *sm = malloc((n ? n : 1) * sizeof *sm);
    if (!sm)
        return;
    double avg = 0, best = INFINITY;
    size_t k = 0, imin = 0;
    for (size_t i = 0; i < n; i++) {
        avg = LR_SMOOTH_BETA * avg + (1 - LR_SMOOTH_BETA) * loss[i];
        double v = avg / (1 - pow(LR_SMOOTH_BETA, (double)(i + 1)));
        if (k > 0 && v > LR_DIVERGE_FACTOR * best) {
            s->diverged_at = lr[i];
            break;
        }
        if (v < best) {
            best = v;
            imin = k;
        }
        sm[k++] = v;
    }
    s->n = k;
    if (k >= 3) {
        s->min_loss = best;
        s->minimum = lr[imin] / 10;
        double g_best = 0;
        for (size_t i = 1; i + 1 < k; i++) {
            double g = (sm[i + 1] - sm[i - 1]) / (log(lr[i + 1]) - log(lr[i - 1]));
            if (g < g_best) {
                g_best = g;
                s->steepest = lr[i];
            }
        }
        s->valley = lr_valley(lr, sm, k);
    }
    free(sm);
}

