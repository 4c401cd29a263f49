/*
 * lrfind.h - the suggestions of the learning-rate range test (ampdiag lrfind), as fastai and
 * PyTorch Lightning make them from the (lr, loss) points of a run whose lr grows exponentially.
 */
#ifndef AMPDIAG_LRFIND_H
#define AMPDIAG_LRFIND_H

#include <stddef.h>

#define LR_SMOOTH_BETA 0.98   /* fastai's Recorder smoothing: EMA, debiased */
#define LR_DIVERGE_FACTOR 4.0 /* points stop counting where the smoothed loss exceeds 4x its min */

/* The suggestions from n (lr, smoothed loss) points, lr ascending. */
typedef struct lr_suggest {
    size_t n;                  /* points used (up to the divergence) */
    double valley, steepest, minimum; /* NaN when there is none */
    double min_loss, diverged_at;     /* the smallest smoothed loss; the lr where it passed 4x */
} lr_suggest;

/* Smooth the n (lr ascending, loss) points (EMA LR_SMOOTH_BETA, debiased), cut them where the
 * smoothed loss passes LR_DIVERGE_FACTOR x its minimum, and suggest: valley (lr_valley),
 * steepest (the most negative slope of the smoothed loss against log lr, central differences),
 * minimum (a tenth of the lr of the lowest smoothed loss). NaN where none. */
void lr_suggest_from(const double *lr, const double *loss, size_t n, lr_suggest *s);

/* fastai's valley on n points: the longest strictly decreasing subsequence of l, and lr at two
 * thirds along it (start + section + section / 2, section = length / 3); NaN if none. */
double lr_valley(const double *lr, const double *l, size_t n);

#endif
