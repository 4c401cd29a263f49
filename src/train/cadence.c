/*
 * cadence.c - which training steps get full tensor records, and why (cadence.h).
 */
#include "train/cadence.h"

#include <math.h>
#include <string.h>
#include <time.h>

/* Smoothing of the measured costs: each step weighs the sums by DECAY (a memory of ~500 steps:
 * the trace writer's compression comes in lumps, at each flush, every 100 steps by default). */
#define DECAY (1.0 - 1.0 / 512.0)
/* Untraced steps measured before the cadence is chosen (the first steps are slower: page
 * faults, cold caches), and the first step measured. */
#define MIN_UNTRACED 3
#define FIRST_MEASURED 2
/* The clocks are read every WINDOW steps: a read of a CPU-time clock is a system call (about
 * 2 us on the development VM, 1% of a 0.4 ms step if read twice a step). A window without a
 * traced step, that begins at least TAIL steps after one (whose jobs and records finish during
 * the next steps), measures the untraced step. */
#define WINDOW 16
#define TAIL 2
/* The most the credit may owe, in records (after many records on events). */
#define CREDIT_DEBT 10
/* The longest cadence the budget chooses. */
#define MAX_PERIOD 1000000

static int cpu_now(clockid_t clk, double *s)
{
    struct timespec ts;
    if (clock_gettime(clk, &ts) != 0)
        return -1;
    *s = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    return 0;
}

void cadence_init(cadence *cd, const cadence_config *c)
{
    memset(cd, 0, sizeof *cd);
    cd->c = *c;
    cd->tick_step = -1;
    cd->wstart = -1;
    cd->since = 1000000; /* (no traced step yet) */
    cd->last_full = -1;
    cd->after_until = -1;
    cd->event_at = -1;
    mon_spike_init(&cd->gnorm);
    cd->clocks = cpu_now(CLOCK_PROCESS_CPUTIME_ID, &cd->p0) == 0 && cpu_now(CLOCK_THREAD_CPUTIME_ID, &cd->m0) == 0;
}

/* The smoothed cost of a record (seconds; 0 while unknown). */
static double record_cost(const cadence *cd)
{
    return cd->recs > 0 && cd->cost > 0 ? cd->cost / cd->recs : 0;
}

/* The cadence the budget allows on average: every ceil(record / (budget * step)) steps. 0 while
 * either cost is unknown. (For the /traced rows; the plan spends the budget's credit.) */
static int choose_period(const cadence *cd)
{
    if (cd->c.budget <= 0 || cd->nu < MIN_UNTRACED || cd->recs <= 0 || cd->u <= 0)
        return 0;
    double rec = cd->cost / cd->recs;
    double p = ceil(rec / (cd->c.budget * cd->u) - 1e-9);
    return p < 1 ? 1 : p > MAX_PERIOD ? MAX_PERIOD : (int)p;
}

void cadence_window(cadence *cd, double dp, double dm, double di)
{
    if (cd->wstart >= 0 && cd->wsteps > 0) {
        double n = (double)cd->wsteps;
        double other = dp - dm > 0 ? dp - dm : 0; /* the tracer's and the writer's threads */
        double base = dm - di > 0 ? dm - di : 0;  /* the training thread, less inline tracing */
        double cost = other + di;
        if (cd->wtraced == 0 && cd->since >= cd->wsteps + TAIL && cd->wstart >= FIRST_MEASURED) {
            /* the mean of the untraced windows so far, then a moving average of ~500 steps */
            cd->nu += cd->wsteps;
            double w = cd->nu < 512 ? n / (double)cd->nu : 1.0 - pow(DECAY, n);
            cd->u += w * (base / n - cd->u);
        } else if (cd->nu > 0 && base > n * cd->u) {
            /* a window with traced steps or their tail: the update's copies, handing tensors
             * over, appending the records two steps later */
            cost += base - n * cd->u;
        }
        double d = pow(DECAY, n);
        cd->cost = d * cd->cost + cost;
        cd->recs = d * cd->recs + (double)cd->wtraced;
        /* the budget's credit: its share of the window's untraced time, less what tracing took
         * (the estimates reserved at the records of this window are given back: their cost is
         * in `cost`, now or in the next windows) */
        if (cd->nu > 0 && cd->c.budget > 0) {
            double rec = record_cost(cd);
            cd->credit += cd->c.budget * n * cd->u - cost + cd->reserved;
            if (cd->credit > rec) /* at most one record saved up: no burst after a quiet spell */
                cd->credit = rec;
            if (cd->credit < -CREDIT_DEBT * rec) /* after a storm of events, recover in time */
                cd->credit = -CREDIT_DEBT * rec;
        }
        cd->reserved = 0;
    }
    cd->wstart = cd->tick_step;
    cd->wsteps = 0;
    cd->wtraced = 0;
}

void cadence_tick(cadence *cd, long t, double inline_s)
{
    if (!cd->clocks)
        return;
    if (cd->tick_step >= 0) { /* the step before t is done: into the window */
        cd->wsteps++;
        cd->wtraced += cd->tick_traced;
        cd->since = cd->tick_traced ? 0 : cd->since + 1;
    }
    cd->tick_step = t;
    cd->tick_traced = 0;
    if (cd->wsteps < WINDOW && cd->wstart >= 0)
        return;
    double p, m;
    if (cpu_now(CLOCK_PROCESS_CPUTIME_ID, &p) != 0 || cpu_now(CLOCK_THREAD_CPUTIME_ID, &m) != 0) {
        cd->clocks = 0;
        return;
    }
    cadence_window(cd, p - cd->p0 - cd->excl, m - cd->m0 - cd->excl, inline_s - cd->i0);
    cd->p0 = p;
    cd->m0 = m;
    cd->i0 = inline_s;
    cd->excl = 0;
}

void cadence_pause(cadence *cd)
{
    if (cd->clocks && cpu_now(CLOCK_THREAD_CPUTIME_ID, &cd->pause0) != 0)
        cd->clocks = 0;
}

void cadence_resume(cadence *cd)
{
    double m;
    if (!cd->clocks)
        return;
    if (cpu_now(CLOCK_THREAD_CPUTIME_ID, &m) != 0) {
        cd->clocks = 0;
        return;
    }
    cd->excl += m - cd->pause0;
}

int cadence_plan(cadence *cd, long t, int64_t *event_step)
{
    const cadence_config *c = &cd->c;
    *event_step = -1;
    if (c->every == 0)
        return -1;
    if (c->every < 0)
        cd->period = choose_period(cd);
    if (t == 0)
        return AMPDIAG_REASON_FIRST;
    if (t == c->steps - 1)
        return AMPDIAG_REASON_LAST;
    if (t <= cd->after_until) {
        *event_step = cd->event_at;
        return AMPDIAG_REASON_AFTER_EVENT;
    }
    if (c->every > 0)
        return t % c->every == 0 ? AMPDIAG_REASON_EVERY : -1;
    /* the credit so far, with this window's share of the budget pro rata (its costs are charged
     * at its end) */
    double rec = record_cost(cd);
    double avail = cd->credit + (cd->wstart >= 0 ? c->budget * cd->u * (double)(t - cd->wstart) : 0);
    if (cd->period > 0 && rec > 0 && avail >= rec && t > cd->last_full)
        return AMPDIAG_REASON_CADENCE;
    return -1;
}

int cadence_event(cadence *cd, long t, double loss, double grad_norm, int nonfinite, int skipped,
                  int loss_spike)
{
    int grad_spike = mon_spike_push(&cd->gnorm, grad_norm); /* (non-finite norms are not fed) */
    if (cd->c.every == 0)
        return -1;
    int reason = skipped                  ? AMPDIAG_REASON_SKIPPED
                 : nonfinite || !isfinite(loss) ? AMPDIAG_REASON_NONFINITE
                 : loss_spike             ? AMPDIAG_REASON_LOSS_SPIKE
                 : grad_spike             ? AMPDIAG_REASON_GRAD_SPIKE
                                          : -1;
    if (reason >= 0 && cd->c.after > 0) {
        cd->after_until = t + cd->c.after;
        cd->event_at = t;
    }
    return reason;
}

void cadence_taken(cadence *cd, long t, int reason)
{
    (void)reason;
    double rec = record_cost(cd);
    cd->credit -= rec; /* reserved until the window's costs are measured */
    cd->reserved += rec;
    cd->last_full = t;
    if (cd->tick_step == t)
        cd->tick_traced = 1;
}

void cadence_row(const cadence *cd, long t, int reason, int64_t event_step, ampdiag_trace_traced *row)
{
    memset(row, 0, sizeof *row);
    row->step = t;
    row->reason = reason;
    row->event_step = event_step;
    row->cadence = cd->c.every > 0 ? cd->c.every : cd->period;
    row->record_ms = cd->recs > 0 && cd->cost > 0 ? 1e3 * cd->cost / cd->recs : NAN;
    row->step_ms = cd->nu > 0 ? 1e3 * cd->u : NAN;
}
