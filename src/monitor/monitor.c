/*
 * monitor.c - loss spikes, divergence and the rolling median/MAD window they use (monitor.h).
 */
#include "monitor/monitor.h"

#include <math.h>
#include <string.h>

void mon_window_init(mon_window *w) { memset(w, 0, sizeof *w); }

/* First index in sorted a[0..n) whose value is not below x. */
static size_t lower_bound_d(const double *a, size_t n, double x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void mon_window_push(mon_window *w, double x)
{
    if (w->n == MON_WINDOW) { /* remove one copy of the oldest value */
        size_t lo = lower_bound_d(w->sorted, w->n, w->ring[w->pos]);
        memmove(&w->sorted[lo], &w->sorted[lo + 1], (w->n - lo - 1) * sizeof(double));
        w->n--;
    }
    w->ring[w->pos] = x;
    w->pos = (w->pos + 1) % MON_WINDOW;
    size_t lo = lower_bound_d(w->sorted, w->n, x);
    memmove(&w->sorted[lo + 1], &w->sorted[lo], (w->n - lo) * sizeof(double));
    w->sorted[lo] = x;
    w->n++;
}

double mon_window_median(const mon_window *w)
{
    size_t n = w->n;
    return n % 2 ? w->sorted[n / 2] : 0.5 * (w->sorted[n / 2 - 1] + w->sorted[n / 2]);
}

/* Median of |x - med| over the sorted window in O(n): the deviations to the left of the median
 * grow leftwards and those to the right grow rightwards, so merging the two runs visits them in
 * increasing order. */
double mon_window_mad(const mon_window *w, double med)
{
    size_t n = w->n;
    size_t r = 0;
    while (r < n && w->sorted[r] < med)
        r++;
    size_t l = r; /* left run: indices l-1, l-2, ..., 0 */
    size_t want_lo = (n - 1) / 2, want_hi = n / 2;
    double lo = NAN, hi = NAN;
    for (size_t k = 0; k <= want_hi; k++) {
        double d;
        if (l > 0 && (r >= n || med - w->sorted[l - 1] <= w->sorted[r] - med))
            d = med - w->sorted[--l];
        else
            d = w->sorted[r++] - med;
        if (k == want_lo)
            lo = d;
        if (k == want_hi)
            hi = d;
    }
    return 0.5 * (lo + hi);
}

void mon_spike_init(mon_spike *s)
{
    mon_window_init(&s->w);
    s->med = s->mad = NAN;
    s->cached = 0;
}

/* The window's median and MAD into s->cmed, s->cmad (once per window: a test and the push
 * after it share them). */
static void window_stats(mon_spike *s)
{
    if (!s->cached) {
        s->cmed = mon_window_median(&s->w);
        s->cmad = mon_window_mad(&s->w, s->cmed);
        s->cached = 1;
    }
}

/* The rule against a window's median and MAD. */
static int is_spike(double loss, double med, double mad)
{
    /* the 1e-12 relative slack keeps a loss equal to the median within rounding from counting
     * when the MAD is a rounding error itself */
    return mad > 0 && loss > med + MON_SPIKE_MADS * MON_MAD_TO_SD * mad + 1e-12 * fabs(med);
}

int mon_spike_push(mon_spike *s, double loss)
{
    if (!isfinite(loss))
        return 0;
    int spike = 0;
    if (s->w.n >= MON_SPIKE_MIN_HISTORY) {
        window_stats(s);
        s->med = s->cmed;
        s->mad = s->cmad;
        spike = is_spike(loss, s->med, s->mad);
    }
    mon_window_push(&s->w, loss);
    s->cached = 0;
    return spike;
}

int mon_spike_test(mon_spike *s, double loss)
{
    if (!isfinite(loss) || s->w.n < MON_SPIKE_MIN_HISTORY)
        return 0;
    window_stats(s);
    return is_spike(loss, s->cmed, s->cmad);
}

void mon_diverge_init(mon_diverge *d)
{
    d->first = NAN;
    d->have_first = 0;
    d->streak = d->floor_streak = 0;
    d->since = d->floor_since = -1;
}

int mon_exploded(const mon_diverge *d, double loss)
{
    if (!isfinite(loss))
        return 1;
    return d->have_first && isfinite(d->first) &&
           loss > MON_DIVERGE_FACTOR * fmax(d->first, MON_DIVERGE_FLOOR);
}

int mon_scale_at_floor(int dynamic, int is_static, double scale, double min_scale)
{
    if (is_static)
        return 1;
    return dynamic && scale <= fmax(min_scale, 1.0);
}

long mon_diverge_push(mon_diverge *d, int64_t step, double loss, int skipped, int at_floor, int *why)
{
    if (!d->have_first) {
        d->first = loss;
        d->have_first = 1;
    }
    int bad = mon_exploded(d, loss);
    if (bad && skipped) {
        /* weights unchanged: the scaler is handling it */
    } else if (bad) {
        if (d->streak++ == 0)
            d->since = step;
    } else {
        d->streak = 0;
        d->since = -1;
    }
    if (!skipped) {
        d->floor_streak = 0;
        d->floor_since = -1;
    } else if (at_floor) {
        if (d->floor_streak++ == 0)
            d->floor_since = step;
    }
    if (why)
        *why = d->floor_streak > d->streak;
    return d->floor_streak > d->streak ? d->floor_streak : d->streak;
}
