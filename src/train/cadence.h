/*
 * cadence.h - which training steps get full tensor records, and why (the trace's /traced
 * table; docs/tracing-budget.md states the design and its numbers).
 *
 * Every step records its cheap evidence (loss, loss scale, skip, gradient norm, non-finite
 * counts, the first-NaN check: /steps and /events). Full tensor records (/tensors, /whatif,
 * /histograms) are taken:
 *   - on a cadence: fixed (--trace-every N), or chosen from the tracer's own measured cost so
 *     that tracing costs at most a budget, a share of the CPU time of untraced steps
 *     (--trace-budget PCT): a credit grows by the budget's share of each step's time and pays
 *     for what tracing is measured to take; a record is taken when the credit covers the
 *     measured cost of one (about every record / (budget * step) steps on average, whatever
 *     records on events, fixed costs and the trace writer's flushes take);
 *   - at the first and the last planned step;
 *   - on events, whatever the cadence: a step whose loss or gradients are not finite, whose
 *     update the loss scaler skipped, or whose loss or gradient norm spiked (monitor.h's rule)
 *     is recorded in full (train.c takes the step's tensors while they are still in memory:
 *     the event is known after the backward pass, before the update), and so are the
 *     --trace-after-event steps after it.
 *
 * The cost is measured, not assumed: every 16 steps the process's CPU time and the training
 * thread's are read; what the other threads (the tracer and the trace writer) used,
 * the tracer's jobs run inline on the training thread, and the extra training-thread time of
 * traced windows over untraced ones make the tracing cost; the training thread's time over
 * windows of untraced steps makes the step's. Both are smoothed over the last ~500 steps.
 */
#ifndef AMPDIAG_CADENCE_H
#define AMPDIAG_CADENCE_H

#include "ampdiag_trace.h"
#include "monitor/monitor.h"

#include <stdint.h>

/* The default budget, percent of the CPU time of untraced steps, and the steps traced after an
 * event. */
#define CADENCE_DEFAULT_BUDGET 5.0
#define CADENCE_DEFAULT_AFTER 3

typedef struct cadence_config {
    int every;      /* > 0: a fixed cadence; 0: no tensor records at all (no events either);
                       < 0: the budget chooses the cadence */
    double budget;  /* the budget as a share of the CPU time (0.05 = 5%); 0: full records only on
                       events and at the first and last step */
    int after;      /* steps after an event recorded in full too */
    long steps;     /* planned steps (the last one is recorded in full) */
} cadence_config;

typedef struct cadence {
    cadence_config c;
    /* measuring: CPU seconds at the last tick, and what the step since then was */
    int clocks;           /* 0 when the CPU clocks cannot be read (nothing is measured) */
    double p0, m0, i0;    /* process, training thread, the tracer's inline jobs */
    double excl, pause0;  /* training-thread time to leave out of this step (an evaluation) */
    long tick_step;       /* the step the last tick began; -1 before the first */
    int tick_traced;      /* whether that step was recorded in full */
    long wstart;          /* the first step of the window the clocks measure (-1: none yet) */
    long wsteps, wtraced; /* its steps done, and those recorded in full */
    long since;           /* steps done since the last one recorded in full */
    double u;             /* smoothed CPU seconds of an untraced step (0: none measured yet) */
    long nu;              /* untraced steps measured */
    double cost, recs;    /* decayed sums: tracing CPU seconds, full records */
    double credit;        /* the budget's share of the untraced time so far less what tracing
                             took (seconds; at most one record's cost, at least -10 records') */
    double reserved;      /* record costs taken from the credit since the last window */
    /* the plan */
    int period;           /* the budget's cadence now, in steps (0: not known yet) */
    long last_full;       /* the last step recorded in full (-1: none) */
    long after_until;     /* steps up to this one are after_event (-1: none) */
    long event_at;        /* the event they follow */
    mon_spike gnorm;      /* gradient-norm spikes */
} cadence;

void cadence_init(cadence *cd, const cadence_config *c);

/* At the start of step t, before anything else of the step: measure the step before it (inline_s:
 * the CPU seconds the tracer's jobs have run inline on the training thread so far). */
void cadence_tick(cadence *cd, long t, double inline_s);
/* The measuring of cadence_tick once the clocks are read: the window of the steps counted since
 * the last one (cd->wsteps, wtraced) took dp seconds of the process's CPU time, dm of the training
 * thread's and di of inline tracing jobs; starts the next window at the current step. (Tests
 * call it with made-up times.) */
void cadence_window(cadence *cd, double dp, double dm, double di);
/* Around work of the training thread that is neither training nor tracing (an evaluation):
 * left out of the step's time. */
void cadence_pause(cadence *cd);
void cadence_resume(cadence *cd);

/* Whether step t is planned for full records: its reason (ampdiag_record_reason), or -1. An
 * after_event step sets *event_step to its event's step, others to -1. */
int cadence_plan(cadence *cd, long t, int64_t *event_step);

/* What step t found before its update: its loss and gradient norm (unscaled), whether its loss
 * or gradients held non-finite values, whether the update is skipped, and whether the loss is a
 * spike (monitor.h's rule, against the run's own window). Feeds the gradient-norm detector.
 * Returns the event's reason (the steps after it are then planned as after_event), or -1. */
int cadence_event(cadence *cd, long t, double loss, double grad_norm, int nonfinite, int skipped,
                  int loss_spike);

/* Step t is recorded in full, for `reason`: the cadence counts from it. */
void cadence_taken(cadence *cd, long t, int reason);

/* The /traced row of step t (reason, event_step as planned or found). */
void cadence_row(const cadence *cd, long t, int reason, int64_t event_step, ampdiag_trace_traced *row);

#endif
