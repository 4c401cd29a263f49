/*
 * t_run.c - `ampdiag run` end to end: runs the program, reads each trace back through the
 * reader API and checks what it must show: convergence, determinism, every scenario's
 * failure signature, signals, weights files, and refusals of bad input.
 */
#include "ampdiag_trace.h"
#include "tap.h"

#include <hdf5.h>
#include <stdarg.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[128];

static const char *p(const char *name)
{
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Run ampdiag with arguments; returns its exit status (-1 if it did not exit normally). */
__attribute__((format(printf, 1, 2)))
static int run(const char *fmt, ...)
{
    char args[2048], cmd[2600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "./ampdiag %s > %s/out.txt 2> %s/err.txt", args, dir, dir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int file_has(const char *name, const char *needle)
{
    FILE *f = fopen(p(name), "r");
    if (!f) return 0;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return strstr(buf, needle) != NULL;
}

typedef struct tr {
    ampdiag_trace_reader *r;
    ampdiag_trace_layer *layers;
    ampdiag_trace_step *steps;
    ampdiag_trace_event *events;
    ampdiag_trace_eval *evals;
    ampdiag_trace_tensor *tensors;
    size_t nl, ns, ne, nv, nt;
} tr;

static int load(tr *t, const char *path)
{
    memset(t, 0, sizeof *t);
    if (ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET, &t->r) < 0) {
        diag("open %s: %s", path, ampdiag_trace_errmsg());
        return -1;
    }
    if (ampdiag_trace_read_layers(t->r, &t->layers, &t->nl) < 0 || ampdiag_trace_read_steps(t->r, &t->steps, &t->ns) < 0 ||
        ampdiag_trace_read_events(t->r, &t->events, &t->ne) < 0 || ampdiag_trace_read_evals(t->r, &t->evals, &t->nv) < 0 ||
        ampdiag_trace_read_tensors(t->r, 0, SIZE_MAX, &t->tensors, &t->nt) < 0) {
        diag("read %s: %s", path, ampdiag_trace_errmsg());
        return -1;
    }
    return 0;
}

static void unload(tr *t)
{
    free(t->layers); free(t->steps); free(t->events); free(t->evals); free(t->tensors);
    ampdiag_trace_reader_close(t->r);
    memset(t, 0, sizeof *t);
}

static int layer_index(const tr *t, const char *name)
{
    for (size_t i = 0; i < t->nl; i++)
        if (strcmp(t->layers[i].name, name) == 0) return (int)i;
    return -1;
}

static const ampdiag_trace_tensor *find_tensor(const tr *t, long step, const char *layer, int kind)
{
    int li = layer_index(t, layer);
    for (size_t i = 0; i < t->nt; i++)
        if (t->tensors[i].step == step && t->tensors[i].layer == li && t->tensors[i].kind == kind)
            return &t->tensors[i];
    return NULL;
}

static size_t count_events(const tr *t, int code)
{
    size_t n = 0;
    for (size_t i = 0; i < t->ne; i++) n += t->events[i].code == code;
    return n;
}

/* Sum over all traced steps of a counter for one layer and kind. */
static void sum_kind(const tr *t, const char *layer, int kind, uint64_t *count, uint64_t *zero, uint64_t *lost)
{
    int li = layer_index(t, layer);
    *count = *zero = *lost = 0;
    for (size_t i = 0; i < t->nt; i++)
        if (t->tensors[i].layer == li && t->tensors[i].kind == kind) {
            *count += t->tensors[i].count;
            *zero += t->tensors[i].n_zero;
            *lost += t->tensors[i].lost_updates;
        }
}

static void test_healthy(void)
{
    ok(run("run --steps 80 --progress none --eval-every 40 --trace-every 1 -o %s", p("a.h5")) == 0,
       "fp32 mlp run of 80 steps traced every step exits 0");
    ok(file_has("out.txt", "run complete: 80 steps") && file_has("out.txt", "next: ampdiag info"),
       "the summary says complete and what to do next");
    tr t;
    if (load(&t, p("a.h5"))) { ok(0, "trace a.h5 readable"); return; }
    ok(ampdiag_trace_status_of(t.r) == AMPDIAG_STATUS_COMPLETE && t.ns == 80, "trace: status complete, 80 step records");
    ok(fabs(t.steps[0].loss - log(10.0)) < 0.1, "first loss %.4f is about ln 10 (10 balanced classes)", t.steps[0].loss);
    double tail = 0;
    for (size_t i = 70; i < 80; i++) tail += t.steps[i].loss / 10;
    ok(tail < 0.6 * t.steps[0].loss, "the loss falls: mean of the last 10 steps %.3f < 0.6 x %.3f", tail, t.steps[0].loss);
    ok(t.nv == 3 && t.evals[0].step == -1 && t.evals[2].step == 79 && t.evals[2].metric > 0.6 &&
           fabs(t.evals[0].loss - log(10.0)) < 0.1,
       "3 evaluations: the initial one (step -1, loss about ln 10), every 50 steps, the last; final accuracy "
       "%.3f > 0.6", t.nv ? t.evals[t.nv - 1].metric : -1);
    {
        /* the initial and the last evaluation, example by example: their means are the eval losses */
        ampdiag_trace_eval_example *X = NULL;
        size_t nx = 0;
        double m[2] = {0, 0}, acc = 0;
        int rows_ok = ampdiag_trace_read_eval_examples(t.r, 0, SIZE_MAX, &X, &nx) == 0 && nx == 2 * 512;
        for (size_t i = 0; rows_ok && i < nx; i++) {
            int k = i >= 512;
            rows_ok &= X[i].step == (k ? 79 : -1) && X[i].example == (int64_t)(i % 512) &&
                       (X[i].metric == 0 || X[i].metric == 1);
            m[k] += X[i].loss / 512;
            acc += k ? X[i].metric / 512 : 0;
        }
        ok(rows_ok && t.nv == 3 && fabs(m[0] - t.evals[0].loss) < 1e-4 && fabs(m[1] - t.evals[2].loss) < 1e-4 &&
               fabs(acc - t.evals[2].metric) < 1e-9,
           "per-example losses of the initial and the last evaluation (512 rows each) average to their eval "
           "losses (%.5f, %.5f) and accuracy", m[0], m[1]);
        free(X);
        ok(ampdiag_trace_attr_int(t.r, AMPDIAG_ATTR_DATA_VAL_ROWS, 0) == 512 &&
               ampdiag_trace_attr_int(t.r, AMPDIAG_ATTR_DATA_VAL_TARGETS, 0) == 512 &&
               ampdiag_trace_attr_int(t.r, AMPDIAG_ATTR_DATA_CLASSES, 0) == 10 &&
               ampdiag_trace_attr_int(t.r, AMPDIAG_ATTR_DATA_VAL_CLASSES, 0) == 10 &&
               ampdiag_trace_attr_double(t.r, AMPDIAG_ATTR_DATA_VAL_CHANCE, NAN) < 0.2 &&
               fabs(ampdiag_trace_attr_double(t.r, AMPDIAG_ATTR_INPUT_RMS, NAN) - 1.166) < 0.1 &&
               strcmp(ampdiag_trace_attr_str(t.r, AMPDIAG_ATTR_STANDARDIZE), "off") == 0,
           "the data's facts: 512 validation rows of 10 classes, inputs of rms %.3f, not standardised",
           ampdiag_trace_attr_double(t.r, AMPDIAG_ATTR_INPUT_RMS, NAN));
    }
    ok(layer_index(&t, "fc1") == 0 && layer_index(&t, "fc4") >= 0, "layers named fc1..fc4");
    const ampdiag_trace_tensor *w = find_tensor(&t, 0, "fc1", AMPDIAG_KIND_WEIGHT);
    const ampdiag_trace_tensor *u = find_tensor(&t, 79, "fc1", AMPDIAG_KIND_UPDATE);
    const ampdiag_trace_tensor *a = find_tensor(&t, 5, "relu1", AMPDIAG_KIND_ACTIVATION);
    const ampdiag_trace_tensor *ag = find_tensor(&t, 5, "fc2", AMPDIAG_KIND_ACTIVATION_GRAD);
    ok(w && w->count == 32 * 256 + 256 && w->n_nan == 0, "fc1 weight record at step 0: 8448 values (weight + bias)");
    ok(u && u->count == 8448 && u->absmax > 0 && u->absmax < 0.01, "fc1 update at the last step: |dw| <= lr-ish (%g)",
       u ? u->absmax : -1);
    ok(a && a->count == 64 * 256 && a->n_neg == 0 && a->min == 0.0f, "relu1 activation: 64 x 256 values, none negative");
    ok(ag && ag->count == 64 * 256, "fc2 activation-gradient record present");
    int bad_norm = 0;
    for (size_t i = 0; i < t.ns; i++)
        bad_norm += !(t.steps[i].grad_norm > 0 && isfinite(t.steps[i].grad_norm)) || t.steps[i].skipped ||
                    t.steps[i].loss_scale != 1.0 || t.steps[i].clip_coef != 1.0 || !(t.steps[i].update_ratio > 0);
    ok(bad_norm == 0, "every step: finite norm, not skipped, scale 1, no clipping, update ratio > 0");
    const char *gs = ampdiag_trace_attr_str(t.r, "grad_stats");
    ok(gs && strcmp(gs, "scaled") == 0, "root attribute grad_stats = \"scaled\" (%s)", gs ? gs : "absent");
    unload(&t);

    /* the same seed gives the same numbers */
    ok(run("run --steps 20 --trace-every 1 --progress none -o %s", p("b1.h5")) == 0 &&
           run("run --steps 20 --trace-every 1 --progress none -o %s", p("b2.h5")) == 0,
       "two runs with the same seed");
    tr t1, t2;
    if (load(&t1, p("b1.h5")) || load(&t2, p("b2.h5"))) { ok(0, "determinism traces readable"); return; }
    int same = t1.ns == t2.ns && t1.nt == t2.nt;
    for (size_t i = 0; same && i < t1.ns; i++)
        same = t1.steps[i].loss == t2.steps[i].loss && t1.steps[i].grad_norm == t2.steps[i].grad_norm;
    for (size_t i = 0; same && i < t1.nt; i++) {
        const ampdiag_trace_tensor *x = &t1.tensors[i], *y = &t2.tensors[i];
        same = x->step == y->step && x->layer == y->layer && x->kind == y->kind && x->count == y->count &&
               x->n_zero == y->n_zero && x->n_neg == y->n_neg && same_bits(x->min, y->min) &&
               same_bits(x->max, y->max) && same_bits(x->absmin_nz, y->absmin_nz) &&
               memcmp(&x->mean, &y->mean, sizeof x->mean) == 0 && memcmp(&x->rms, &y->rms, sizeof x->rms) == 0 &&
               x->fp16_underflow == y->fp16_underflow && x->lost_updates == y->lost_updates;
    }
    ok(same, "same seed: identical losses, norms and tensor records");
    unload(&t1); unload(&t2);
    /* under the budget, which steps are recorded depends on measured times: the training does
     * not, and a step recorded by both runs has the same records */
    ok(run("run --steps 120 --progress none -o %s --overwrite", p("b1.h5")) == 0 &&
           run("run --steps 120 --trace-budget 20 --progress none -o %s --overwrite", p("b2.h5")) == 0,
       "two runs with the same seed, budgets 5%% and 20%%");
    if (load(&t1, p("b1.h5")) || load(&t2, p("b2.h5"))) { ok(0, "budget traces readable"); return; }
    same = t1.ns == t2.ns && t1.ns == 120;
    for (size_t i = 0; same && i < t1.ns; i++)
        same = memcmp(&t1.steps[i].loss, &t2.steps[i].loss, sizeof(double)) == 0 &&
               memcmp(&t1.steps[i].grad_norm, &t2.steps[i].grad_norm, sizeof(double)) == 0;
    size_t common = 0;
    for (size_t i = 0; same && i < t1.nt; i++)
        for (size_t j = 0; j < t2.nt; j++)
            if (t2.tensors[j].step == t1.tensors[i].step && t2.tensors[j].layer == t1.tensors[i].layer &&
                t2.tensors[j].kind == t1.tensors[i].kind) {
                same = memcmp(&t1.tensors[i], &t2.tensors[j], sizeof t1.tensors[i]) == 0;
                common++;
                break;
            }
    ok(same && common > 0, "budget: identical losses and norms; the %zu records of steps both recorded identical", common);
    unload(&t1); unload(&t2);

    /* statistics taken on the tracer thread are the ones taken inline: every record, including
     * skipped steps, evaluations mid-run and sparse tracing */
    static const char *const cfgs[] = {
        "--precision fp16 --steps 23 --trace-every 3 --hist-every 6 --eval-every 7",
        "--scenario fp16-forward-overflow --steps 12 --hist-every 4 --trace-every 1",
        "--scenario bf16-pure-lost-updates --steps 15 --hist-every 5 --eval-every 4 --trace-every 1",
        "--model transformer --precision bf16 --steps 6 --batch 4 --hist-every 2 --trace-every 1",
    };
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
        int rc0 = run("run %s --trace-threads 0 --progress none --overwrite -o %s", cfgs[k], p("i0.h5"));
        int rc1 = run("run %s --trace-threads 1 --progress none --overwrite -o %s", cfgs[k], p("i1.h5"));
        if (rc0 || rc1 || load(&t1, p("i0.h5")) || load(&t2, p("i1.h5"))) {
            ok(0, "%s: runs with and without the tracer thread (exit %d, %d)", cfgs[k], rc0, rc1);
            continue;
        }
        same = t1.ns == t2.ns && t1.nt == t2.nt && t1.ne == t2.ne && t1.nv == t2.nv && t1.nt > 0;
        for (size_t i = 0; same && i < t1.ns; i++) {
            const ampdiag_trace_step *x = &t1.steps[i], *y = &t2.steps[i];
            same = x->step == y->step && memcmp(&x->loss, &y->loss, sizeof x->loss) == 0 &&
                   memcmp(&x->grad_norm, &y->grad_norm, sizeof x->grad_norm) == 0 &&
                   memcmp(&x->update_ratio, &y->update_ratio, sizeof x->update_ratio) == 0 &&
                   x->skipped == y->skipped && x->loss_scale == y->loss_scale &&
                   strcmp(x->skip_reason, y->skip_reason) == 0;
        }
        for (size_t i = 0; same && i < t1.nt; i++) {
            const ampdiag_trace_tensor *x = &t1.tensors[i], *y = &t2.tensors[i];
            same = x->step == y->step && x->layer == y->layer && x->kind == y->kind && x->count == y->count &&
                   x->n_nan == y->n_nan && x->n_posinf == y->n_posinf && x->n_zero == y->n_zero &&
                   x->n_neg == y->n_neg && same_bits(x->min, y->min) && same_bits(x->max, y->max) &&
                   same_bits(x->absmin_nz, y->absmin_nz) && memcmp(&x->mean, &y->mean, sizeof x->mean) == 0 &&
                   memcmp(&x->rms, &y->rms, sizeof x->rms) == 0 && x->fp16_underflow == y->fp16_underflow &&
                   x->fp16_overflow == y->fp16_overflow && x->bf16_underflow == y->bf16_underflow &&
                   x->lost_updates == y->lost_updates && x->lost_if_fp16 == y->lost_if_fp16 &&
                   x->lost_if_bf16 == y->lost_if_bf16;
        }
        for (size_t i = 0; same && i < t1.ne; i++)
            same = t1.events[i].step == t2.events[i].step && t1.events[i].code == t2.events[i].code;
        for (size_t i = 0; same && i < t1.nv; i++)
            same = memcmp(&t1.evals[i].loss, &t2.evals[i].loss, sizeof t1.evals[i].loss) == 0;
        ok(same, "%s: the tracer thread gives the records of inline tracing (%zu steps, %zu tensor records)",
           cfgs[k], t1.ns, t1.nt);
        /* records are held back while a traced step's statistics are taken: they still come
         * out in step order (FORMAT.md) */
        int ordered = 1;
        for (size_t i = 1; i < t2.ns; i++)
            ordered &= t1.steps[i].step > t1.steps[i - 1].step && t2.steps[i].step > t2.steps[i - 1].step;
        for (size_t i = 1; i < t2.nt; i++)
            ordered &= t1.tensors[i].step >= t1.tensors[i - 1].step && t2.tensors[i].step >= t2.tensors[i - 1].step;
        ok(ordered && t2.ns > 0 && t2.steps[t2.ns - 1].step == (int64_t)t2.ns - 1,
           "%s: /steps and /tensors in step order, every step recorded", cfgs[k]);
        unload(&t1); unload(&t2);
    }

    /* the default: full records at a cadence chosen from the measured cost, within 5% */
    ok(run("run --steps 200 --progress none --overwrite -o %s", p("bud.h5")) == 0 && load(&t1, p("bud.h5")) == 0,
       "a default run of 200 steps (budget 5%%)");
    ampdiag_trace_traced *tr = NULL;
    size_t ntr = 0;
    int rd = t1.r ? ampdiag_trace_read_traced(t1.r, &tr, &ntr) : -1;
    const char *cad = t1.r ? ampdiag_trace_attr_str(t1.r, AMPDIAG_ATTR_TRACE_CADENCE) : NULL;
    ok(rd == 0 && ntr >= 3 && tr[0].step == 0 && tr[0].reason == AMPDIAG_REASON_FIRST &&
           tr[ntr - 1].step == 199 && tr[ntr - 1].reason == AMPDIAG_REASON_LAST && cad &&
           strcmp(cad, "budget") == 0 && ampdiag_trace_attr_double(t1.r, AMPDIAG_ATTR_TRACE_BUDGET, 0) == 5.0,
       "/traced: the first step, the last, %zu rows in all; trace_cadence budget, trace_budget 5", ntr);
    int ncad = 0, chosen = 1, match = 1;
    for (size_t i = 1; i < ntr; i++) {
        if (tr[i].reason != AMPDIAG_REASON_CADENCE)
            continue;
        ncad++;
        double want = ceil(tr[i].record_ms / (0.05 * tr[i].step_ms));
        chosen &= tr[i].cadence > 0 && tr[i].record_ms > 0 && tr[i].step_ms > 0 && fabs(want - tr[i].cadence) <= 1;
    }
    for (size_t i = 0, k = 0; i < t1.nt; i++) { /* every tensor record's step has a row, in order */
        while (k < ntr && tr[k].step < t1.tensors[i].step) k++;
        match &= k < ntr && tr[k].step == t1.tensors[i].step;
    }
    ok(ncad > 0 && chosen && match,
       "%d cadence rows, each with the cadence ceil(record / (5%% step)) of its measured costs; tensor records only "
       "at /traced steps", ncad);
    free(tr);
    unload(&t1);

    /* the summary's minimum loss scale includes the scale the last backoff left: 10 backoffs
     * from 2^16 end at 2^6 */
    ok(run("run --scenario fp16-forward-overflow --steps 10 --progress none --overwrite -o %s", p("i0.h5")) == 0 &&
       file_has("out.txt", "loss scale 2^16 -> 2^6 (min 2^6 at step 9), 10 backoffs"),
       "summary: loss scale 2^16 -> 2^6 (min 2^6) after 10 backoffs");
}

/* fp16-eval-overflow: training finite, the evaluation not, one "eval:" event naming fc1 (FP32
 * evaluates the same row finitely, no event); lr-too-low: the loss stays at its first value,
 * updates ~1e-8 of the weights. */
/* A token set's accuracy counts every target of every validation row (its binomial band is over
 * those, not over the rows): 256 rows of context 32 are 8192 targets. */
static void test_token_targets(void)
{
    tr t;
    if (run("run --model transformer --steps 2 --progress none -o %s", p("tok.h5")) != 0 || load(&t, p("tok.h5"))) {
        ok(0, "a transformer run of 2 steps and its trace");
        return;
    }
    ok(ampdiag_trace_attr_int(t.r, AMPDIAG_ATTR_DATA_VAL_ROWS, 0) == 256 &&
           ampdiag_trace_attr_int(t.r, AMPDIAG_ATTR_DATA_VAL_TARGETS, 0) == 256 * 32,
       "a token set: 256 validation rows, 8192 targets the accuracy counts (%lld)",
       (long long)ampdiag_trace_attr_int(t.r, AMPDIAG_ATTR_DATA_VAL_TARGETS, 0));
    unload(&t);
}

static void test_eval_and_low_lr(void)
{
    tr t;
    ok(run("run --scenario fp16-eval-overflow --steps 20 --progress none -o %s", p("ev.h5")) == 0 &&
       run("run --scenario fp16-eval-overflow --precision fp32 --steps 20 --progress none -o %s", p("ev32.h5")) == 0,
       "scenario fp16-eval-overflow, and the same in fp32");
    if (load(&t, p("ev.h5")) == 0) {
        int finite = 1, skipped = 0, ev = 0, other = 0;
        for (size_t i = 0; i < t.ns; i++) {
            finite &= isfinite(t.steps[i].loss);
            skipped += t.steps[i].skipped;
        }
        for (size_t i = 0; i < t.ne; i++) {
            int fwd = t.events[i].code == AMPDIAG_EV_NAN_FORWARD || t.events[i].code == AMPDIAG_EV_INF_FORWARD;
            ev += fwd && t.events[i].step == 19 && t.events[i].layer == layer_index(&t, "fc1") &&
                  strncmp(t.events[i].message, "eval: validation rows 0-63: ", 28) == 0;
            other += fwd && strncmp(t.events[i].message, "eval:", 5) != 0;
        }
        ok(finite && !skipped && t.nv == 2 && t.evals[0].step == -1 && !isfinite(t.evals[1].loss),
           "training losses finite, no step skipped, the last eval loss not finite (%g)",
           t.nv ? t.evals[t.nv - 1].loss : 0.0);
        ok(ev == 1 && !other, "one eval: event at step 19 naming fc1 and the rows; no training forward event");
        unload(&t);
    } else ok(0, "ev.h5 readable");
    if (load(&t, p("ev32.h5")) == 0) {
        ok(t.nv == 2 && isfinite(t.evals[1].loss) && t.evals[1].loss < 2.5 && t.ne == 0,
           "fp32 evaluates the raw row finitely (eval loss %g), no event", t.nv ? t.evals[t.nv - 1].loss : 0.0);
        unload(&t);
    } else ok(0, "ev32.h5 readable");

    ok(run("run --scenario lr-too-low --steps 30 --progress none -o %s", p("lt.h5")) == 0, "scenario lr-too-low runs");
    if (load(&t, p("lt.h5")) == 0) {
        ok(t.ns == 30 && fabs(t.steps[29].loss - t.steps[0].loss) < 0.02 * t.steps[0].loss &&
           t.steps[29].update_ratio > 0 && t.steps[29].update_ratio < 1e-6,
           "the loss stays at its first value (%g -> %g), updates %g of the weights", t.steps[0].loss,
           t.ns ? t.steps[t.ns - 1].loss : 0.0, t.ns ? t.steps[t.ns - 1].update_ratio : 0.0);
        unload(&t);
    } else ok(0, "lt.h5 readable");
}

static void test_scenarios(void)
{
    tr t;
    uint64_t c, z, l;

    /* forward overflow: inputs x 1e5 overflow FP16 when rounded as GEMM operands */
    ok(run("run --scenario fp16-forward-overflow --steps 30 --progress none -o %s", p("fo.h5")) == 0,
       "scenario fp16-forward-overflow runs");
    if (load(&t, p("fo.h5")) == 0) {
        const ampdiag_trace_tensor *a = find_tensor(&t, 0, "fc1", AMPDIAG_KIND_ACTIVATION);
        int all_skipped = 1;
        for (size_t i = 0; i < t.ns; i++) all_skipped &= t.steps[i].skipped;
        ok(a && a->n_nan + a->n_posinf + a->n_neginf > 0, "fc1's output holds NaN/inf at step 0 (%llu non-finite)",
           a ? (unsigned long long)(a->n_nan + a->n_posinf + a->n_neginf) : 0ull);
        ok(all_skipped && strstr(t.steps[0].skip_reason, "fc1"), "every step skipped; the reason names fc1: '%s'",
           t.steps[0].skip_reason);
        ok(t.steps[0].loss_scale == 65536 && t.steps[10].loss_scale == 64, "the scale halves every step: 2^16 -> 2^6 at step 10");
        ok(count_events(&t, AMPDIAG_EV_SCALE_BACKOFF) == 30 && count_events(&t, AMPDIAG_EV_SKIPPED) == 30,
           "30 backoff and 30 skipped-step events");
        unload(&t);
    } else ok(0, "fo.h5 readable");

    /* gradient underflow without loss scaling: compare the same data in fp32 */
    ok(run("run --scenario fp16-grad-underflow --steps 20 --progress none -o %s", p("gu16.h5")) == 0 &&
       run("run --data synthetic:blobs-tiny --steps 20 --progress none -o %s", p("gu32.h5")) == 0,
       "scenario fp16-grad-underflow and the same run in fp32");
    if (load(&t, p("gu16.h5")) == 0) {
        sum_kind(&t, "fc1", AMPDIAG_KIND_WEIGHT_GRAD, &c, &z, &l);
        double zf16 = (double)z / (double)c;
        unload(&t);
        if (load(&t, p("gu32.h5")) == 0) {
            sum_kind(&t, "fc1", AMPDIAG_KIND_WEIGHT_GRAD, &c, &z, &l);
            double zf32 = (double)z / (double)c;
            const ampdiag_trace_tensor *g = find_tensor(&t, 0, "fc1", AMPDIAG_KIND_WEIGHT_GRAD);
            /* about half of fc1's units are dead in both (tiny inputs: their output is the bias) */
            ok(zf16 > 0.9 && zf16 - zf32 > 0.3, "fc1 weight gradients exactly zero: %.1f%% in fp16 vs %.1f%% in fp32",
               100 * zf16, 100 * zf32);
            uint64_t nz = g ? g->count - g->n_zero : 0;
            ok(g && g->fp16_underflow > 0.9 * (double)nz,
               "the fp32 run predicts it: %llu of its %llu non-zero fc1 gradients would flush in FP16",
               g ? (unsigned long long)g->fp16_underflow : 0ull, (unsigned long long)nz);
            unload(&t);
        } else ok(0, "gu32.h5 readable");
    } else ok(0, "gu16.h5 readable");

    /* scale collapse to a DeepSpeed-style minimum */
    ok(run("run --scenario fp16-scale-collapse --steps 25 --progress none -o %s", p("sc.h5")) == 0, "scenario fp16-scale-collapse runs");
    if (load(&t, p("sc.h5")) == 0) {
        int at_min = 0;
        for (size_t i = 0; i < t.ne; i++)
            at_min += t.events[i].code == AMPDIAG_EV_SCALE_BACKOFF && strstr(t.events[i].message, "minimum") != NULL;
        ok(t.steps[24].loss_scale == 1.0 && t.steps[16].loss_scale == 1.0 && t.steps[15].loss_scale == 2.0,
           "the scale reaches its minimum 1 at step 16 and stays");
        ok(at_min >= 8, "overflow at the minimum scale is recorded (%d events)", at_min);
        unload(&t);
    } else ok(0, "sc.h5 readable");
    /* ... and, with every step skipped there, the run diverges after --patience skipped steps at
     * the floor (16 backoffs to 1, then 20 steps: steps 16..35) instead of running on */
    ok(run("run --scenario fp16-scale-collapse --steps 200 --progress none -o %s", p("sc2.h5")) == 0,
       "scenario fp16-scale-collapse, 200 steps asked");
    if (load(&t, p("sc2.h5")) == 0) {
        const ampdiag_trace_event *dv = NULL;
        for (size_t i = 0; i < t.ne; i++)
            if (t.events[i].code == AMPDIAG_EV_DIVERGENCE)
                dv = &t.events[i];
        ok(ampdiag_trace_status_of(t.r) == AMPDIAG_STATUS_DIVERGED && t.ns == 36 && dv && dv->step == 16 &&
               strstr(dv->message, "floor") != NULL,
           "every step skipped at the scale's floor: diverged after 36 steps, the divergence from step 16 (%zu "
           "steps, %s)", t.ns, dv ? dv->message : "no divergence event");
        unload(&t);
    } else ok(0, "sc2.h5 readable");

    /* bf16-pure: updates round away; bf16 with FP32 master weights keeps them */
    ok(run("run --scenario bf16-pure-lost-updates --steps 20 --progress none -o %s", p("lp.h5")) == 0 &&
       run("run --scenario bf16-pure-lost-updates --precision bf16 --steps 20 --progress none -o %s", p("lm.h5")) == 0,
       "scenario bf16-pure-lost-updates, and the same with --precision bf16");
    if (load(&t, p("lp.h5")) == 0) {
        sum_kind(&t, "fc2", AMPDIAG_KIND_UPDATE, &c, &z, &l);
        double lost_pure = (double)l / (double)(c - z);
        unload(&t);
        if (load(&t, p("lm.h5")) == 0) {
            sum_kind(&t, "fc2", AMPDIAG_KIND_UPDATE, &c, &z, &l);
            double lost_master = (double)l / (double)(c - z);
            ok(lost_pure > 0.5 && lost_master < 0.01, "fc2 lost updates: %.1f%% in bf16-pure vs %.2f%% with FP32 master weights",
               100 * lost_pure, 100 * lost_master);
            /* the what-if: the run with master weights says what BF16 weights would have lost */
            int li = layer_index(&t, "fc2");
            uint64_t if16 = 0, ifb16 = 0, other = 0;
            for (size_t i = 0; i < t.nt; i++) {
                const ampdiag_trace_tensor *x = &t.tensors[i];
                if (x->kind != AMPDIAG_KIND_UPDATE)
                    other += x->lost_if_fp16 + x->lost_if_bf16;
                else if (x->layer == li) {
                    if16 += x->lost_if_fp16;
                    ifb16 += x->lost_if_bf16;
                }
            }
            double wb = (double)ifb16 / (double)(c - z), wf = (double)if16 / (double)(c - z);
            ok(ampdiag_trace_has_field(t.r, "/tensors", "lost_if_bf16") && wb > 0.5 && wf < wb && other == 0,
               "fc2 what-if in the run with master weights: %.1f%% would be lost with BF16 weights, %.2f%% with FP16; "
               "0 in other kinds", 100 * wb, 100 * wf);
            unload(&t);
        } else ok(0, "lm.h5 readable");
    } else ok(0, "lp.h5 readable");

    /* divergence in any precision */
    ok(run("run --scenario lr-diverge --precision bf16 --progress none -o %s", p("dv.h5")) == 0,
       "scenario lr-diverge exits 0 (a diverged run is data)");
    if (load(&t, p("dv.h5")) == 0) {
        ok(ampdiag_trace_status_of(t.r) == AMPDIAG_STATUS_DIVERGED && count_events(&t, AMPDIAG_EV_DIVERGENCE) == 1 &&
           count_events(&t, AMPDIAG_EV_STOP) == 1 && t.ns < 100, "status diverged, one divergence and one stop event, stopped early at %zu steps", t.ns);
        unload(&t);
    } else ok(0, "dv.h5 readable");
    ok(file_has("out.txt", "run diverged"), "the summary says diverged");

    /* Adam eps in FP16 state */
    ok(run("run --scenario fp16-adam-eps --steps 5 --progress none -o %s", p("ae.h5")) == 0, "scenario fp16-adam-eps runs");
    if (load(&t, p("ae.h5")) == 0) {
        const ampdiag_trace_tensor *u = find_tensor(&t, 0, "fc1", AMPDIAG_KIND_UPDATE);
        int ev = 0;
        for (size_t i = 0; i < t.ne; i++)
            ev += t.events[i].step == 0 && t.events[i].code == AMPDIAG_EV_NAN_BACKWARD && strstr(t.events[i].message, "weights non-finite");
        ok(u && u->n_nan > 0, "step 0: fc1's update holds NaN (%llu)", u ? (unsigned long long)u->n_nan : 0ull);
        ok(ev >= 1, "an event at step 0 says the update made weights non-finite");
        unload(&t);
    } else ok(0, "ae.h5 readable");

    test_eval_and_low_lr();
    test_token_targets();
    ok(run("run --scenario nosuch -o %s", p("x.h5")) == 2 && file_has("err.txt", "fp16-forward-overflow"),
       "an unknown scenario exits 2 and lists the scenarios");
}

static void test_signal(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "exec ./ampdiag run --steps 100000 --progress none -o %s > /dev/null 2>&1", p("sig.h5"));
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    sleep(2);
    /* exec: the shell became ampdiag */
    kill(pid, SIGTERM);
    int st = 0;
    waitpid(pid, &st, 0);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGTERM, "SIGTERM: exit 143 (128 + SIGTERM) once the trace is closed (%s %d)",
       WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? WTERMSIG(st) : -1);
    tr t;
    if (load(&t, p("sig.h5")) == 0) {
        ok(ampdiag_trace_status_of(t.r) == AMPDIAG_STATUS_INTERRUPTED && t.ns > 5 && count_events(&t, AMPDIAG_EV_STOP) == 1,
           "SIGTERM: the run finishes its step, marks the trace interrupted (%zu steps kept)", t.ns);
        unload(&t);
    } else ok(0, "interrupted trace readable");
}

static void test_weights(void)
{
    ok(run("run --steps 10 --progress none -o %s --save-weights %s", p("w.h5"), p("w1.h5")) == 0, "--save-weights writes the final weights");
    ok(run("run --steps 1 --lr 0 --progress none -o %s --init-from %s --save-weights %s", p("w2.h5"), p("w1.h5"), p("w2w.h5")) == 0,
       "--init-from reads them back (1 step at lr 0, saved again)");
    hid_t f1 = H5Fopen(p("w1.h5"), H5F_ACC_RDONLY, H5P_DEFAULT), f2 = H5Fopen(p("w2w.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    float a[256 * 32], b[256 * 32];
    hid_t d1 = H5Dopen2(f1, "/fc1/weight", H5P_DEFAULT), d2 = H5Dopen2(f2, "/fc1/weight", H5P_DEFAULT);
    hid_t sp = H5Dget_space(d1);
    hsize_t dims[2] = {0, 0};
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    int rd = H5Dread(d1, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, a) >= 0 &&
             H5Dread(d2, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, b) >= 0;
    ok(rd && dims[0] == 256 && dims[1] == 32 && memcmp(a, b, sizeof a) == 0,
       "/fc1/weight is [256, 32] (PyTorch [out, in]) and survives the round trip bit for bit");
    H5Dclose(d1); H5Dclose(d2); H5Fclose(f1); H5Fclose(f2);
    ok(run("run --steps 1 --progress none -o %s --init-from %s --model transformer", p("w3.h5"), p("w1.h5")) == 2 &&
       file_has("err.txt", "missing /"), "weights of another model are refused, naming the missing tensor");
    ok(run("run --steps 1 --progress none -o %s --save-weights %s", p("w4.h5"), p("w1.h5")) == 2 && file_has("err.txt", "exists"),
       "an existing weights file is not replaced without --overwrite");
}

static void test_refusals(void)
{
    ok(run("run --precision fp8 -o %s", p("r.h5")) == 2 && file_has("err.txt", "--precision 'fp8'"), "--precision fp8: exit 2 naming the option");
    ok(run("run --steps 0 -o %s", p("r.h5")) == 2 && file_has("err.txt", "--steps"), "--steps 0: exit 2");
    ok(run("run --lr abc -o %s", p("r.h5")) == 2 && file_has("err.txt", "--lr 'abc'"), "--lr abc: exit 2");
    ok(run("run --data %s -o %s", p("nothere.h5"), p("r.h5")) == 2 && file_has("err.txt", "nothere.h5"), "a missing data file: exit 2 naming it");
    ok(run("run --model transformer --data synthetic:blobs -o %s", p("r.h5")) == 2 && file_has("err.txt", "does not fit"),
       "classification data for a transformer: exit 2");
    ok(run("run --steps 2 --progress none -o %s", p("a.h5")) == 2 && file_has("err.txt", "a.h5"),
       "an existing trace is not overwritten without --overwrite");
    /* a path under a regular file: unwritable even as root, whatever exists outside the test's folder */
    ok(run("run --steps 2 --progress none -o %s/x.h5", p("a.h5")) == 2 && file_has("err.txt", "cannot create files in"),
       "a trace path under a file: exit 2 before any work, naming the path");
    ok(run("run --fp32-layers nosuch --steps 2 --progress none -o %s", p("r2.h5")) == 2 && file_has("err.txt", "nosuch"),
       "an unknown --fp32-layers name: exit 2 naming it");
    ok(run("run --help") == 0 && file_has("out.txt", "--scenario NAME") && file_has("out.txt", "synthetic:blobs-tiny"),
       "run --help lists options, data sets and scenarios");
    ok(run("run extra -o %s", p("r3.h5")) == 2 && file_has("err.txt", "unexpected argument 'extra'"), "a stray argument: exit 2");
}

/* --standardize on: the inputs the model sees have unit scale (recorded), blobs-raw (x 1e5) learns
 * in FP16; a token set has no features to standardise (refused, exit 2). */
static void test_standardize(void)
{
    tr t;
    ok(run("run --data synthetic:blobs-raw --standardize on --precision fp16 --steps 60 --progress none -o %s",
           p("std.h5")) == 0, "--standardize on runs blobs-raw in fp16");
    if (load(&t, p("std.h5")) == 0) {
        double rms = ampdiag_trace_attr_double(t.r, AMPDIAG_ATTR_INPUT_RMS, NAN);
        double sd = ampdiag_trace_attr_double(t.r, AMPDIAG_ATTR_INPUT_STD_MAX, NAN);
        ok(fabs(rms - 1) < 1e-3 && fabs(sd - 1) < 1e-3 &&
               strcmp(ampdiag_trace_attr_str(t.r, AMPDIAG_ATTR_STANDARDIZE), "on") == 0,
           "recorded: standardize on, inputs of rms %g and largest feature std %g", rms, sd);
        ok(t.nv == 2 && t.evals[1].loss < 0.5 * t.evals[0].loss && t.ns == 60,
           "it learns in fp16 (eval loss %g from %g)", t.nv ? t.evals[t.nv - 1].loss : NAN,
           t.nv ? t.evals[0].loss : NAN);
        unload(&t);
    } else ok(0, "std.h5 readable");
    ok(run("run --model transformer --standardize on --steps 2 --progress none -o %s", p("stdt.h5")) == 2 &&
           file_has("err.txt", "nothing to standardise") && access(p("stdt.h5"), F_OK) != 0,
       "--standardize on a token set is refused (exit 2), nothing written");
    ok(run("run --standardize maybe --steps 2 --progress none -o %s", p("stdx.h5")) == 2 &&
           file_has("err.txt", "--standardize 'maybe': expected on or off"),
       "--standardize maybe is refused");
}

int main(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    snprintf(dir, sizeof dir, "t_run.tmp.%d", (int)getpid());
    if (mkdir(dir, 0755) != 0) {
        ok(0, "create %s", dir);
        return done_testing();
    }
    if (access("./ampdiag", X_OK) != 0)
        skip_all("./ampdiag not built");
    test_healthy();
    test_scenarios();
    test_signal();
    test_weights();
    test_refusals();
    test_standardize();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (exit_status() == 0 && system(cmd) != 0)
        diag("could not remove %s", dir);
    H5close();
    return done_testing();
}
