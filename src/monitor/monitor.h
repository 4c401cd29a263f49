/*
 * monitor.h - the detectors that the live training loop (src/train/) and the offline analysis
 * of traces (src/analysis/) share, so that a run and the reading of its trace apply the same
 * rule with the same thresholds: loss spikes, divergence, and the rolling window of medians
 * they rest on. docs/recommendations.md ("Shared detectors") states each rule.
 *
 * May use: numerics, util. Used by: train, analysis.
 */
#ifndef AMPDIAG_MONITOR_H
#define AMPDIAG_MONITOR_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------------------------
 * Rolling window: the last MON_WINDOW values, kept sorted as well, for a median and a MAD in
 * O(MON_WINDOW) per value.
 * ------------------------------------------------------------------------------------------ */

#define MON_WINDOW 64

typedef struct mon_window {
    double ring[MON_WINDOW], sorted[MON_WINDOW];
    size_t n, pos;
} mon_window;

void mon_window_init(mon_window *w);
void mon_window_push(mon_window *w, double x);   /* x must not be NaN */
double mon_window_median(const mon_window *w);   /* w->n > 0 */
double mon_window_mad(const mon_window *w, double med); /* median of |x - med|; w->n > 0 */

/* ------------------------------------------------------------------------------------------
 * Loss spikes: a finite loss above median + MON_SPIKE_MADS * 1.4826 * MAD of the previous (up
 * to MON_WINDOW) finite losses, once MON_SPIKE_MIN_HISTORY are known and the MAD is positive.
 * (1.4826 * MAD estimates the standard deviation of normally distributed values.)
 * ------------------------------------------------------------------------------------------ */

#define MON_SPIKE_MADS 6.0
#define MON_SPIKE_MIN_HISTORY 20
#define MON_MAD_TO_SD 1.4826

typedef struct mon_spike {
    mon_window w;
    double med, mad; /* of the window before the last value fed (NaN until known) */
    int cached;      /* mon_spike_test found cmed, cmad of the window as it is now */
    double cmed, cmad;
} mon_spike;

void mon_spike_init(mon_spike *s);
/* Feed one loss (non-finite losses are ignored and never spikes). Returns 1 when it is a spike
 * against the losses before it; s->med and s->mad then hold that window's median and MAD. */
int mon_spike_push(mon_spike *s, double loss);
/* Whether feeding this loss would report a spike (the same rule as mon_spike_push), without
 * feeding it (the window's median and MAD are kept for the next push). */
int mon_spike_test(mon_spike *s, double loss);

/* ------------------------------------------------------------------------------------------
 * Divergence: a loss that is non-finite or above MON_DIVERGE_FACTOR times the first loss
 * (floored at MON_DIVERGE_FLOOR) has "exploded". A run diverges after `patience` updated steps
 * in a row whose loss exploded (default MON_DIVERGE_PATIENCE). A skipped step (the loss scaler
 * refused the update: the weights did not change) neither extends nor breaks that streak: a
 * format problem the scaler is handling is not divergence, as long as the scaler can still
 * handle it. It cannot once the scale is at its floor: a static scale, or a dynamic one at or
 * below max(its minimum, 1), where the gradients overflow even unscaled. So a run also diverges
 * after `patience` skipped steps in a row at the floor (any updated step breaks that streak):
 * a run that skips every step ends diverged instead of running on with a scale falling to 0.
 * ------------------------------------------------------------------------------------------ */

#define MON_DIVERGE_FACTOR 100.0
#define MON_DIVERGE_FLOOR 1e-3
#define MON_DIVERGE_PATIENCE 20

typedef struct mon_diverge {
    double first;   /* the first loss fed (NaN until then) */
    int have_first;
    long streak;    /* exploded updated steps in a row */
    int64_t since;  /* step the streak began; -1 when streak == 0 */
    long floor_streak;    /* skipped steps in a row at the scale's floor */
    int64_t floor_since;  /* step that streak began; -1 when 0 */
} mon_diverge;

void mon_diverge_init(mon_diverge *d);
/* 1 when this loss counts as exploded against the first loss. */
int mon_exploded(const mon_diverge *d, double loss);
/* 1 when a step that ran with this loss scale was at the floor of its scaler: static (any
 * scale), or dynamic at or below max(min_scale, 1). */
int mon_scale_at_floor(int dynamic, int is_static, double scale, double min_scale);
/* Feed one step (skipped: the scaler refused the update; at_floor: mon_scale_at_floor of the
 * step's scale). Returns the longer of the two streaks after it; *why (may be NULL) says which:
 * 0 exploded losses, 1 skipped steps at the floor. d->since / d->floor_since say where each began. */
long mon_diverge_push(mon_diverge *d, int64_t step, double loss, int skipped, int at_floor, int *why);

#endif
