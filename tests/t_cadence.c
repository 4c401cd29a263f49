/*
 * t_cadence.c - which steps get full tensor records, and why (src/train/cadence.h): the plan of
 * a fixed cadence and of a budget's, the events and the steps after them, and, end to end, a
 * NaN injected into an activation at a step the cadence skips: that step's full records and
 * the provenance of the NaN are in the trace, equal to those of a run traced every step.
 */
#include "ampdiag_trace.h"
#include "backend/backend.h"
#include "tap.h"
#include "train/cadence.h"
#include "train/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ the plan */

static void test_fixed(void)
{
    cadence cd;
    cadence_config c = {5, 0, 2, 23};
    cadence_init(&cd, &c);
    int64_t ev;
    char got[64] = "", want[] = "0F 5E 10E 15E 20E 22L";
    for (long t = 0; t < 23; t++) {
        int r = cadence_plan(&cd, t, &ev);
        if (r >= 0)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%ld%c", *got ? " " : "", t,
                     r == AMPDIAG_REASON_FIRST ? 'F' : r == AMPDIAG_REASON_EVERY ? 'E' : r == AMPDIAG_REASON_LAST ? 'L' : '?');
    }
    ok(strcmp(got, want) == 0, "every 5 of 23 steps: %s (want %s)", got, want);

    /* an event at step 7: 7 itself is the caller's (it takes the slot), 8 and 9 after it */
    cadence_init(&cd, &c);
    int r7 = cadence_event(&cd, 7, 1.0, 1.0, 1, 0, 0);
    int r8 = cadence_plan(&cd, 8, &ev);
    int64_t ev8 = ev;
    int r9 = cadence_plan(&cd, 9, &ev);
    int r10 = cadence_plan(&cd, 10, &ev);
    int r11 = cadence_plan(&cd, 11, &ev);
    ok(r7 == AMPDIAG_REASON_NONFINITE && r8 == AMPDIAG_REASON_AFTER_EVENT && ev8 == 7 && r9 == AMPDIAG_REASON_AFTER_EVENT &&
           r10 == AMPDIAG_REASON_EVERY && r11 == -1,
       "a non-finite step 7: 8, 9 after it (event_step %lld), 10 on the cadence, 11 not", (long long)ev8);
    ok(cadence_event(&cd, 12, 1.0, 1.0, 1, 1, 1) == AMPDIAG_REASON_SKIPPED &&
           cadence_event(&cd, 13, NAN, 1.0, 0, 0, 0) == AMPDIAG_REASON_NONFINITE &&
           cadence_event(&cd, 14, 1.0, 1.0, 0, 0, 1) == AMPDIAG_REASON_LOSS_SPIKE &&
           cadence_event(&cd, 15, 1.0, 1.0, 0, 0, 0) == -1,
       "event reasons in order: skipped over non-finite over loss spike; nothing is no event");
    ok(ampdiag_reason_is_event(AMPDIAG_REASON_GRAD_SPIKE) && !ampdiag_reason_is_event(AMPDIAG_REASON_AFTER_EVENT) &&
           strcmp(ampdiag_reason_name(AMPDIAG_REASON_GRAD_SPIKE), "grad_norm_spike") == 0 &&
           ampdiag_reason_parse("after_event") == AMPDIAG_REASON_AFTER_EVENT && ampdiag_reason_parse("x") == -1 &&
           !ampdiag_reason_name(AMPDIAG_NREASONS),
       "reason names and kinds");

    /* gradient-norm spikes: 30 steady norms, then one 100x */
    cadence_init(&cd, &c);
    int spikes = 0, at = -1;
    for (long t = 0; t < 40; t++) {
        double norm = t == 35 ? 100.0 : 1.0 + 0.01 * (double)(t % 7);
        if (cadence_event(&cd, t, 1.0, norm, 0, 0, 0) == AMPDIAG_REASON_GRAD_SPIKE) {
            spikes++;
            at = (int)t;
        }
    }
    ok(spikes == 1 && at == 35, "one gradient-norm spike, at step 35 (%d found, last at %d)", spikes, at);

    cadence_config none = {0, 0, 3, 10};
    cadence_init(&cd, &none);
    ok(cadence_plan(&cd, 0, &ev) == -1 && cadence_event(&cd, 3, NAN, NAN, 1, 1, 0) == -1 && cadence_plan(&cd, 4, &ev) == -1,
       "tracing off (every 0): nothing is planned, not even on events");
}

/* A made-up run under the budget's plan: untraced steps take step_s of the training thread's
 * CPU time, a full record rec_s of another thread's (in the window of its step), every step
 * fixed_s more (a writer, say); events at steps [ev0, ev1). The clocks of cadence_tick are
 * replaced by these times (cadence_window). Returns the share of the tracing cost in the
 * untraced time, and the records on the cadence in *ncad. */
static double simulate(cadence *cd, long steps, double step_s, double rec_s, double fixed_s, long ev0, long ev1,
                       long *ncad)
{
    double main_s = 0, other_s = 0, win_main = 0, win_other = 0;
    int prev = 0;
    *ncad = 0;
    for (long t = 0; t < steps; t++) {
        /* what cadence_tick does at the start of step t, its clocks replaced by these times */
        if (t > 0) {
            cd->wsteps++;
            cd->wtraced += prev;
            cd->since = prev ? 0 : cd->since + 1;
        }
        cd->tick_step = t;
        if (cd->wsteps >= 16 || cd->wstart < 0) {
            cadence_window(cd, win_main + win_other, win_main, 0);
            main_s += win_main;
            other_s += win_other;
            win_main = win_other = 0;
        }
        int64_t ev;
        int r = cadence_plan(cd, t, &ev);
        if (t >= ev0 && t < ev1) {
            int e = cadence_event(cd, t, 1.0, 1.0, 1, 0, 0);
            r = e >= 0 ? e : r;
        }
        if (r >= 0)
            cadence_taken(cd, t, r);
        *ncad += r == AMPDIAG_REASON_CADENCE;
        prev = r >= 0;
        win_main += step_s;
        win_other += fixed_s + (r >= 0 ? rec_s : 0);
    }
    return other_s / main_s;
}

static void test_budget(void)
{
    cadence cd;
    cadence_config c = {-1, 0.05, 3, 1000000};
    cadence_init(&cd, &c);
    int64_t ev;
    ok(cadence_plan(&cd, 0, &ev) == AMPDIAG_REASON_FIRST && cadence_plan(&cd, 1, &ev) == -1 && cd.period == 0,
       "budget: the first step, then nothing until the costs are measured");

    /* 1 ms steps, 0.5 ms records, 5%: about a record every 10 steps, the cost 5% */
    long ncad;
    cadence_init(&cd, &c);
    double share = simulate(&cd, 20000, 1e-3, 0.5e-3, 0, -1, -1, &ncad);
    long ncad_plain = ncad;
    ok(fabs(share - 0.05) < 0.003 && ncad > 1800 && ncad < 2100 && cd.period == 10,
       "record 0.5 ms, step 1 ms, budget 5%%: %ld cadence records in 20000 steps, cost %.2f%%, cadence %d", ncad,
       100 * share, cd.period);
    ampdiag_trace_traced row;
    cadence_row(&cd, 20000, AMPDIAG_REASON_CADENCE, -1, &row);
    ok(row.cadence == 10 && fabs(row.record_ms - 0.5) < 0.01 && fabs(row.step_ms - 1.0) < 1e-9 && row.event_step == -1,
       "the row says the cadence and the costs behind it (%d, %.3f ms, %.3f ms)", row.cadence, row.record_ms,
       row.step_ms);

    /* a fixed 2% a step (writer, tracer's thread) is paid from the budget too: fewer records */
    cadence_init(&cd, &c);
    share = simulate(&cd, 20000, 1e-3, 0.5e-3, 0.02e-3, -1, -1, &ncad);
    ok(fabs(share - 0.05) < 0.003 && ncad > 1000 && ncad < 1300,
       "and a fixed 2%% a step: %ld cadence records, cost %.2f%%", ncad, 100 * share);

    /* 300 steps of events (each recorded in full, 0.5 ms each: 50%% while they last) cost what
     * they cost; the cadence waits until the debt (at most 10 records) is paid */
    cadence_init(&cd, &c);
    long ncad_ev;
    share = simulate(&cd, 20000, 1e-3, 0.5e-3, 0, 5000, 5300, &ncad_ev);
    ok(ncad_ev < ncad_plain && share > 0.05 && share < 0.05 + 0.5 * 300 / 20000.0,
       "events at 300 steps: cadence records %ld, cost %.2f%% (their 0.75%% on top of the budget at most)", ncad_ev,
       100 * share);

    /* the cadence counts the credit: right after a record there is none for the next */
    cadence_init(&cd, &c);
    cd.u = 1e-3;
    cd.nu = 100;
    cd.cost = 2 * 0.5e-3;
    cd.recs = 2;
    cd.credit = 0.4e-3;
    int r9 = cadence_plan(&cd, 9, &ev);
    cd.credit = 0.5e-3;
    int r10 = cadence_plan(&cd, 10, &ev);
    cadence_taken(&cd, 10, r10);
    int r11 = cadence_plan(&cd, 11, &ev);
    ok(r9 == -1 && r10 == AMPDIAG_REASON_CADENCE && r11 == -1 && fabs(cd.credit) < 1e-12 && cd.period == 10,
       "a record when the credit covers one (0.4 ms: no, 0.5 ms: yes), then none until it grows again");
    ok(cadence_plan(&cd, 999999, &ev) == AMPDIAG_REASON_LAST, "the last planned step");
    cd.cost = 2 * 40e-3; /* a record 40x a step: every 800 steps */
    cadence_plan(&cd, 100, &ev);
    ok(cd.period == 800, "record 40 ms: cadence %d", cd.period);
    cadence_config zero = {-1, 0, 3, 1000};
    cadence_init(&cd, &zero);
    share = simulate(&cd, 5000, 1e-3, 0.5e-3, 0, -1, -1, &ncad);
    ok(ncad == 0 && cd.period == 0, "budget 0: no cadence at all (%ld records)", ncad);
}

/* ------------------------------------------------------------------ a NaN at a skipped step */

/* The CPU backend, with a NaN written into the first ReLU output of the forward pass number
 * nan_forward (0-based; forwards are counted by the loss op, one per forward). */
static long forwards, nan_forward;
static int injected;

static void xent_counting(const backend *bk, float *losses, float *probs, const float *logits, const int32_t *targets,
                          int N, int C)
{
    const backend *cpu = backend_cpu();
    (void)bk;
    cpu->xent_fwd(cpu, losses, probs, logits, targets, N, C);
    forwards++;
}

static void relu_nan(const backend *bk, float *out, const float *inp, size_t n, bk_rnd r)
{
    const backend *cpu = backend_cpu();
    (void)bk;
    cpu->relu_fwd(cpu, out, inp, n, r);
    if (forwards == nan_forward && !injected && n > 3) {
        out[3] = NAN;
        injected = 1;
    }
}

typedef struct trace_read {
    ampdiag_trace_reader *r;
    ampdiag_trace_layer *layers;
    ampdiag_trace_step *steps;
    ampdiag_trace_event *events;
    ampdiag_trace_tensor *tensors;
    ampdiag_trace_traced *traced;
    size_t nl, ns, ne, nt, ntr;
} trace_read;

static int load(trace_read *t, const char *path)
{
    memset(t, 0, sizeof *t);
    if (ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET, &t->r) < 0 ||
        ampdiag_trace_read_layers(t->r, &t->layers, &t->nl) < 0 || ampdiag_trace_read_steps(t->r, &t->steps, &t->ns) < 0 ||
        ampdiag_trace_read_events(t->r, &t->events, &t->ne) < 0 ||
        ampdiag_trace_read_tensors(t->r, 0, SIZE_MAX, &t->tensors, &t->nt) < 0 ||
        ampdiag_trace_read_traced(t->r, &t->traced, &t->ntr) < 0) {
        diag("%s: %s", path, ampdiag_trace_errmsg());
        return -1;
    }
    return 0;
}

static void unload(trace_read *t)
{
    free(t->layers);
    free(t->steps);
    free(t->events);
    free(t->tensors);
    free(t->traced);
    ampdiag_trace_reader_close(t->r);
}

static const ampdiag_trace_traced *traced_row(const trace_read *t, long step)
{
    for (size_t i = 0; i < t->ntr; i++)
        if (t->traced[i].step == step)
            return &t->traced[i];
    return NULL;
}

static size_t tensors_at(const trace_read *t, long step)
{
    size_t n = 0;
    for (size_t i = 0; i < t->nt; i++)
        n += t->tensors[i].step == step;
    return n;
}

/* Do the two traces hold the same /tensors rows (every field) at step? */
static int same_tensors(const trace_read *a, const trace_read *b, long step)
{
    size_t ia = 0, ib = 0, n = 0;
    for (;;) {
        while (ia < a->nt && a->tensors[ia].step != step) ia++;
        while (ib < b->nt && b->tensors[ib].step != step) ib++;
        if (ia == a->nt || ib == b->nt)
            return ia == a->nt && ib == b->nt && n > 0;
        if (memcmp(&a->tensors[ia], &b->tensors[ib], sizeof a->tensors[ia]) != 0) {
            diag("step %ld: tensor row %zu differs (layer %d kind %d)", step, n, a->tensors[ia].layer,
                 a->tensors[ia].kind);
            return 0;
        }
        ia++, ib++, n++;
    }
}

/* A 40-step FP16 mlp run (static loss scale 1: nothing overflows by scaling) with a NaN in
 * relu1's output at step 17, traced as `every` says (0: by the budget, at `budget` percent). */
static int run_nan(const char *out, int every, double budget, int threads)
{
    backend bk = *backend_cpu();
    bk.relu_fwd = relu_nan;
    bk.xent_fwd = xent_counting;
    forwards = 0;
    nan_forward = 17;
    injected = 0;
    train_config c;
    train_config_default(&c);
    c.bk = &bk;
    c.mo.precision = PREC_FP16;
    scaler_config_default(&c.scaler, SCALER_STATIC);
    c.scaler.init = 1;
    c.loss_scale = "static:1";
    c.steps = 40;
    c.trace_every = every;
    c.trace_budget = budget;
    c.trace_threads = threads;
    c.hist_every = 0;
    c.eval_every = 0;
    c.out = out;
    c.overwrite = 1;
    train_result r;
    char err[512] = "";
    int rc = train_run(&c, &r, err, sizeof err);
    if (rc)
        diag("train_run: %s", err);
    return rc == 0 && injected ? 0 : -1;
}

static void test_nan_at_a_skipped_step(const char *dir)
{
    char p_all[256], p_fix[256], p_bud[256];
    snprintf(p_all, sizeof p_all, "%s/all.h5", dir);
    snprintf(p_fix, sizeof p_fix, "%s/every7.h5", dir);
    snprintf(p_bud, sizeof p_bud, "%s/budget.h5", dir);
    ok(run_nan(p_all, 1, 5, 1) == 0 && run_nan(p_fix, 7, 5, 1) == 0 && run_nan(p_bud, -1, 0.001, 0) == 0,
       "three runs with a NaN in relu1 at step 17: traced every step, every 7 steps, by a budget of 0.001%%");
    trace_read all, fix, bud;
    if (load(&all, p_all) || load(&fix, p_fix) || load(&bud, p_bud)) {
        ok(0, "the traces read");
        return;
    }
    ok(ampdiag_trace_has_traced(all.r) && all.ntr == 40, "every step traced: /traced has 40 rows (%zu)", all.ntr);

    const trace_read *runs[2] = {&fix, &bud};
    const char *names[2] = {"every 7", "budget"};
    for (int k = 0; k < 2; k++) {
        const trace_read *t = runs[k];
        const ampdiag_trace_traced *r16 = traced_row(t, 16), *r17 = traced_row(t, 17);
        ok(!r16 && tensors_at(t, 16) == 0, "%s: step 16 is off the cadence: no row, no tensor records", names[k]);
        ok(r17 && r17->reason == AMPDIAG_REASON_SKIPPED && r17->event_step == 17,
           "%s: step 17 is traced in full for its skipped update (reason %s)", names[k],
           r17 ? ampdiag_reason_name(r17->reason) : "none");
        ok(tensors_at(t, 17) > 0 && tensors_at(t, 17) == tensors_at(&all, 17) && same_tensors(t, &all, 17),
           "%s: step 17's %zu tensor records equal those of the run traced every step", names[k], tensors_at(t, 17));
        int after = 1;
        for (long s = 18; s <= 20; s++) {
            const ampdiag_trace_traced *rr = traced_row(t, s);
            after &= rr && rr->reason == AMPDIAG_REASON_AFTER_EVENT && rr->event_step == 17 && same_tensors(t, &all, s);
        }
        ok(after, "%s: steps 18-20 traced after the event, their records equal too", names[k]);
        /* provenance: the NaN's first layer in forward order, as event and skip reason */
        int li = -1;
        for (size_t i = 0; i < t->nl; i++)
            if (strcmp(t->layers[i].name, "relu1") == 0) li = (int)i;
        int ev = 0;
        for (size_t i = 0; i < t->ne; i++)
            ev |= t->events[i].step == 17 && t->events[i].code == AMPDIAG_EV_NAN_FORWARD && t->events[i].layer == li;
        const ampdiag_trace_tensor *a = NULL;
        for (size_t i = 0; i < t->nt; i++)
            if (t->tensors[i].step == 17 && t->tensors[i].layer == li && t->tensors[i].kind == AMPDIAG_KIND_ACTIVATION)
                a = &t->tensors[i];
        ok(li >= 0 && ev && t->ns == 40 && t->steps[17].skipped &&
               strcmp(t->steps[17].skip_reason, "nan in relu1 activation (forward)") == 0 && a && a->n_nan == 1,
           "%s: provenance: a nan_forward event in relu1 at step 17, the skip reason '%s', relu1's record holds the NaN",
           names[k], t->ns > 17 ? t->steps[17].skip_reason : "?");
    }
    /* the budget run: nothing else but its first and last step */
    int only = 1;
    for (size_t i = 0; i < bud.ntr; i++) {
        long s = (long)bud.traced[i].step;
        only &= s == 0 || s == 39 || (s >= 17 && s <= 20);
    }
    ok(only && bud.ntr == 6 && traced_row(&bud, 0)->reason == AMPDIAG_REASON_FIRST &&
           traced_row(&bud, 39)->reason == AMPDIAG_REASON_LAST,
       "budget 0.001%%: only the first and last step and the event's 4 (%zu rows)", bud.ntr);
    /* /traced lists exactly the steps that have tensor records */
    int match = 1;
    for (long s = 0; s < 40; s++)
        match &= (traced_row(&fix, s) != NULL) == (tensors_at(&fix, s) > 0);
    ok(match, "every 7: /traced rows are exactly the steps with tensor records");
    const char *cad = ampdiag_trace_attr_str(bud.r, AMPDIAG_ATTR_TRACE_CADENCE);
    ok(cad && strcmp(cad, "budget") == 0 && ampdiag_trace_attr_double(bud.r, AMPDIAG_ATTR_TRACE_BUDGET, -1) == 0.001 &&
           ampdiag_trace_attr_int(fix.r, AMPDIAG_ATTR_TRACE_EVERY, -1) == 7 &&
           ampdiag_trace_attr_int(fix.r, AMPDIAG_ATTR_TRACE_AFTER_EVENT, -1) == 3,
       "root attributes: trace_cadence, trace_budget, trace_every, trace_after_event");
    unload(&all);
    unload(&fix);
    unload(&bud);
    unlink(p_all);
    unlink(p_fix);
    unlink(p_bud);
}

int main(void)
{
    test_fixed();
    test_budget();
    char dir[] = "/tmp/t_cadence.XXXXXX";
    if (!mkdtemp(dir)) {
        diag("mkdtemp failed");
        return 1;
    }
    test_nan_at_a_skipped_step(dir);
    rmdir(dir);
    return done_testing();
}
