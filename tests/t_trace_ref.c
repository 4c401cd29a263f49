/*
 * t_trace_ref.c - the reference traces in traces/ (formats v1 and v2) still read, with exactly
 * the content tests/trace_synth.h defines, plus hand-checked values; and the current writer, run
 * on the same definitions, produces traces that read back the same (version 2, with /whatif).
 *
 *   t_trace_ref               check the traces in $srcdir/traces and freshly written copies
 *   t_trace_ref --write DIR   (re)write the reference traces of the writer's version into DIR
 *                             (make reference-traces); older ones are kept as they are
 */
#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "tap.h"
#include "trace_synth.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int same_double(double a, double b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

/* Equal within the sums' documented bound (ampdiag.h, AMPDIAG_TSTATS_SUM_RTOL, twice: the
 * reference traces keep the mean and rms that the statistics kernel of their day summed, in
 * double; a kernel may add 16 values a lane in float first): the mean to within that share of
 * the mean |x| (scale), the rms relative to itself. */
static int near_double(double a, double b, double scale)
{
    double tol = 2 * AMPDIAG_TSTATS_SUM_RTOL * scale + 1e-300;
    return same_double(a, b) || fabs(a - b) <= tol;
}

/* The mean |x| of the finite values of x[0..n) (0 when none). */
static double mean_abs(const float *x, size_t n)
{
    double s = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i])) {
            s += fabs((double)x[i]);
            k++;
        }
    return k ? s / (double)k : 0;
}

static int same_float(float a, float b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

/* Write spec sp to path; a cut-off spec is written by a child that exits without closing. */
static int write_spec(const synth_spec *sp, const char *path)
{
    if (sp->status != AMPDIAG_STATUS_RUNNING)
        return synth_write(sp, path, NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        ampdiag_trace_writer *w = NULL;
        int rc = synth_write(sp, path, &w);
        _exit(rc == 0 ? 0 : 1); /* as if killed: no close, unflushed records lost */
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    return 0;
}

static size_t expected_steps(const synth_spec *sp)
{
    if (sp->status == AMPDIAG_STATUS_RUNNING)
        return (size_t)(sp->nsteps / (int)sp->flush_every) * sp->flush_every;
    return (size_t)sp->nsteps;
}

/* The format version a trace of spec sp holds: a reference file its own, a rewritten one this
 * writer's. */
static int version_of(const synth_spec *sp, const char *tag)
{
    if (strcmp(tag, "reference") != 0)
        return AMPDIAG_TRACE_FORMAT_VERSION;
    return sp->version;
}

/* /whatif of a version 2 trace: after each tensor record, its unscaled E4M3 and E5M2 rows (from
 * the statistics), then for a spec with delayed scaling the delayed rows of every kind but
 * update, as synth_fp8_step defines them. */
static void check_whatif(const synth_spec *sp, ampdiag_trace_reader *r, const char *tag, size_t nsteps)
{
    ampdiag_trace_format *fm = NULL;
    size_t nf = 0;
    int good = ampdiag_trace_read_formats(r, &fm, &nf) == 0 && nf >= AMPDIAG_NFORMATS && nf <= AMPDIAG_NFORMATS_ALL;
    for (size_t i = 0; good && i < nf; i++)
        good = fm[i].index == (int32_t)i && strcmp(fm[i].name, ampdiag_format_get((ampdiag_format)i)->name) == 0;
    good = good && fm[AMPDIAG_E4M3].max_finite == 448.0 && fm[AMPDIAG_E4M3].min_subnormal == 0x1p-9 &&
           !fm[AMPDIAG_E4M3].has_inf && fm[AMPDIAG_E5M2].has_inf && fm[AMPDIAG_E5M2].mant_bits == 2;
    ok(good, "%s %s: /formats lists the format table (e4m3 max 448, min subnormal 2^-9, no inf)", tag, sp->file);
    free(fm);
    ampdiag_trace_whatif *w = NULL;
    size_t n = 0, at = 0, ndelayed = 0;
    good = ampdiag_trace_read_whatif(r, 0, SIZE_MAX, &w, &n) == 0;
    synth_fp8 d8;
    synth_fp8_init(&d8);
    for (size_t s = 0; good && s < nsteps; s++)
        for (int l = 0; good && l < sp->nlayers; l++)
            for (int k = 0; good && k < AMPDIAG_NKINDS; k++) {
                float x[SYNTH_N], sc[2] = {1.0f, 1.0f};
                ampdiag_tstats st;
                uint64_t c8[2][AMPDIAG_WHATIF_NCLASSES];
                synth_tensor(sp, (int64_t)s, l, k, x);
                ampdiag_tstats_compute(x, SYNTH_N, &st, NULL);
                int delayed = sp->fp8_history > 0 && k != AMPDIAG_KIND_UPDATE;
                if (delayed)
                    synth_fp8_step(&d8, sp->fp8_history, l, k, x, &st, sc, c8);
                for (int sca = 0; good && sca <= delayed; sca++)
                    for (int f = 0; good && f < 2; f++, at++) {
                        ampdiag_format fmt = f ? AMPDIAG_E5M2 : AMPDIAG_E4M3;
                        const uint64_t *want = sca ? c8[f] : st.whatif[fmt];
                        good = at < n && w[at].step == (int64_t)s && w[at].layer == l && w[at].kind == k &&
                               w[at].format == (int32_t)fmt && w[at].scaling == sca &&
                               w[at].scale == (sca ? sc[f] : 1.0f) && w[at].count == SYNTH_N &&
                               w[at].overflow == want[AMPDIAG_WHATIF_OVERFLOW] &&
                               w[at].underflow == want[AMPDIAG_WHATIF_UNDERFLOW] &&
                               w[at].subnormal == want[AMPDIAG_WHATIF_SUBNORMAL];
                        if (!good)
                            diag("/whatif row %zu (step %zu layer %d kind %d %s %s) differs", at, s, l, k,
                                 ampdiag_format_get(fmt)->name, sca ? "delayed" : "none");
                        ndelayed += (size_t)sca;
                    }
            }
    ok(good && at == n, "%s %s: every /whatif row (%zu, %zu of them delayed)", tag, sp->file, n, ndelayed);
    if (sp->fp8_history > 0) {
        /* hand-checked: fc1 activations hold +70000 and -1e5 from step 40 on: unscaled E4M3 and
         * E5M2 overflow both; under delayed scaling step 40's scale still comes from the amax
         * of steps 24-39 (< 2^5), so they overflow too, and from step 41 the scale follows 1e5 */
        const ampdiag_trace_whatif *a = NULL, *b = NULL;
        for (size_t i = 0; i < n; i++) {
            const ampdiag_trace_whatif *x = &w[i];
            if (x->layer != 0 || x->kind != AMPDIAG_KIND_ACTIVATION || x->format != AMPDIAG_E4M3 ||
                x->scaling != AMPDIAG_SCALING_DELAYED)
                continue;
            if (x->step == 40)
                a = x;
            else if (x->step == 41)
                b = x;
        }
        ok(a && b && a->overflow == 2 && a->scale > 448.0f / 32.0f && b->overflow == 0 &&
               b->scale == 448.0f / 100000.0f,
           "%s %s: fc1 activation E4M3 delayed: 2 overflows at step 40 (scale %g), none at 41 (scale 448/1e5)",
           tag, sp->file, a ? (double)a->scale : 0.0);
    }
    free(w);
}

/* Compare everything in the trace at path with the definition; tag names the copy. */
static void check_trace(const synth_spec *sp, const char *path, const char *tag)
{
    int exact_sums = strcmp(tag, "reference") != 0;
    ampdiag_trace_reader *r;
    int rc = ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET | AMPDIAG_TRACE_READ_NO_REPAIR, &r);
    if (!ok(rc == 0, "%s %s opens", tag, sp->file)) {
        diag("%s", ampdiag_trace_errmsg());
        return;
    }
    ok(ampdiag_trace_status_of(r) == sp->status, "%s %s: status %s", tag, sp->file,
       ampdiag_trace_status_text(r));
    ok(ampdiag_trace_cut_off(r) == (sp->status == AMPDIAG_STATUS_RUNNING), "%s %s: cut_off flag",
       tag, sp->file);
    int version = version_of(sp, tag);
    ok(ampdiag_trace_format_version(r) == version, "%s %s: format_version %d", tag, sp->file, version);
    const char *prec = ampdiag_trace_attr_str(r, AMPDIAG_ATTR_PRECISION);
    ok(prec && strcmp(prec, sp->precision) == 0, "%s %s: precision %s", tag, sp->file,
       prec ? prec : "(none)");
    ok(ampdiag_trace_attr_int(r, AMPDIAG_ATTR_SEED, -1) == 1234, "%s %s: seed", tag, sp->file);
    ok(ampdiag_trace_attr_double(r, AMPDIAG_ATTR_LR, 0) == 1e-3, "%s %s: lr", tag, sp->file);

    size_t nsteps = expected_steps(sp);
    size_t nhist_steps = 0, nevents = 0, nevals = 0;
    for (size_t s = 0; s < nsteps; s++) {
        ampdiag_trace_event ev[4];
        nevents += (size_t)synth_events(sp, (int64_t)s, ev);
        if (sp->hist_every && s % (size_t)sp->hist_every == 0)
            nhist_steps++;
        if (sp->eval_every && (s + 1) % (size_t)sp->eval_every == 0)
            nevals++;
    }
    size_t per_step = (size_t)sp->nlayers * AMPDIAG_NKINDS;
    ampdiag_trace_counts c;
    ampdiag_trace_get_counts(r, &c);
    ok(c.layers == (size_t)sp->nlayers && c.steps == nsteps && c.tensors == nsteps * per_step &&
           c.hists == nhist_steps * per_step && c.events == nevents && c.evals == nevals,
       "%s %s: counts layers %zu steps %zu tensors %zu hists %zu events %zu evals %zu", tag,
       sp->file, c.layers, c.steps, c.tensors, c.hists, c.events, c.evals);

    ampdiag_trace_layer *layers = NULL;
    size_t n = 0;
    int good = ampdiag_trace_read_layers(r, &layers, &n) == 0 && n == (size_t)sp->nlayers;
    for (size_t i = 0; good && i < n; i++)
        good = layers[i].index == (int32_t)i && strcmp(layers[i].name, synth_layer_names[i]) == 0 &&
               strcmp(layers[i].op, "linear") == 0 &&
               strcmp(layers[i].shape, synth_layer_shapes[i]) == 0 &&
               layers[i].params == synth_layer_params[i];
    ok(good, "%s %s: layers", tag, sp->file);
    free(layers);

    ampdiag_trace_step *steps = NULL;
    good = ampdiag_trace_read_steps(r, &steps, &n) == 0 && n == nsteps;
    for (size_t i = 0; good && i < n; i++) {
        ampdiag_trace_step e;
        synth_step(sp, (int64_t)i, &e);
        good = steps[i].step == e.step && same_double(steps[i].loss, e.loss) &&
               same_double(steps[i].loss_scale, e.loss_scale) &&
               same_double(steps[i].grad_norm, e.grad_norm) &&
               same_double(steps[i].clip_coef, e.clip_coef) && steps[i].skipped == e.skipped &&
               strcmp(steps[i].skip_reason, e.skip_reason) == 0 && same_double(steps[i].lr, e.lr) &&
               same_double(steps[i].update_ratio, e.update_ratio) &&
               steps[i].nonfinite_grads == e.nonfinite_grads &&
               same_double(steps[i].wall_ms, e.wall_ms);
        if (!good)
            diag("step row %zu differs", i);
    }
    ok(good, "%s %s: every step record", tag, sp->file);

    ampdiag_trace_tensor *t = NULL;
    good = ampdiag_trace_read_tensors(r, 0, SIZE_MAX, &t, &n) == 0 && n == nsteps * per_step;
    for (size_t i = 0; good && i < n; i++) {
        int64_t s = (int64_t)(i / per_step);
        int l = (int)(i % per_step) / AMPDIAG_NKINDS, k = (int)(i % AMPDIAG_NKINDS);
        float x[SYNTH_N];
        ampdiag_tstats st;
        ampdiag_trace_tensor e;
        memset(&e, 0, sizeof e);
        synth_tensor(sp, s, l, k, x);
        ampdiag_tstats_compute(x, SYNTH_N, &st, NULL);
        ampdiag_trace_tensor_from_tstats(&e, &st);
        const ampdiag_trace_tensor *g = &t[i];
        good = g->step == s && g->layer == l && g->kind == k && g->count == e.count &&
               g->n_nan == e.n_nan && g->n_posinf == e.n_posinf && g->n_neginf == e.n_neginf &&
               g->n_zero == e.n_zero && g->n_neg == e.n_neg && g->n_pos == e.n_pos &&
               same_float(g->min, e.min) && same_float(g->max, e.max) &&
               same_float(g->absmax, e.absmax) && same_float(g->absmin_nz, e.absmin_nz) &&
               (exact_sums ? same_double(g->mean, e.mean) && same_double(g->rms, e.rms)
                           : near_double(g->mean, e.mean, mean_abs(x, SYNTH_N)) &&
                                 near_double(g->rms, e.rms, fabs(e.rms))) &&
               g->fp16_overflow == e.fp16_overflow && g->fp16_underflow == e.fp16_underflow &&
               g->fp16_subnormal == e.fp16_subnormal && g->bf16_overflow == e.bf16_overflow &&
               g->bf16_underflow == e.bf16_underflow && g->bf16_subnormal == e.bf16_subnormal &&
               g->lost_updates == synth_lost_updates(s, l, k) && g->lost_if_fp16 == 0 &&
               g->lost_if_bf16 == 0;
        if (!good)
            diag("tensor row %zu (step %lld layer %d kind %d) differs", i, (long long)s, l, k);
    }
    ok(good, "%s %s: every tensor record (%s)", tag, sp->file,
       exact_sums ? "bitwise" : "bitwise; mean and rms within 2^-19 (ampdiag.h)");
    /* the v1 reference traces predate the optional lost_if_* fields; this writer adds them (as 0
     * through ampdiag_trace_append_tensor) */
    int want = version >= 2;
    ok(ampdiag_trace_has_field(r, "/tensors", "lost_if_fp16") == want &&
           ampdiag_trace_has_field(r, "/tensors", "lost_if_bf16") == want,
       "%s %s: lost_if_fp16 / lost_if_bf16 %s", tag, sp->file, want ? "present" : "absent, read as 0");

    /* hand-checked values */
    if (sp->inject & SYNTH_OVERFLOW_FC1) {
        const ampdiag_trace_tensor *g = &t[45 * per_step + 0 * AMPDIAG_NKINDS + AMPDIAG_KIND_ACTIVATION];
        ok(g->step == 45 && g->count == SYNTH_N && g->absmax == 100000.0f && g->max == 70000.0f &&
               g->min == -100000.0f && g->fp16_overflow == 2 && g->bf16_overflow == 0,
           "%s %s: fc1 activation at step 45 holds the injected +70000 / -1e5 (2 fp16 overflows)",
           tag, sp->file);
        const ampdiag_trace_tensor *h = &t[39 * per_step + AMPDIAG_KIND_ACTIVATION];
        ok(h->fp16_overflow == 0 && h->absmax < 64.0f, "%s %s: ... and not at step 39", tag, sp->file);
    }
    if (sp->inject & SYNTH_INF_SKIPS) {
        const ampdiag_trace_tensor *g = &t[12 * per_step + 1 * AMPDIAG_NKINDS + AMPDIAG_KIND_WEIGHT_GRAD];
        ok(g->n_posinf == 1 && g->count == SYNTH_N && g->absmax < 1.0f,
           "%s %s: fc2 weight_grad at step 12 holds one +inf", tag, sp->file);
        ok(steps[12].skipped == 1 && strcmp(steps[12].skip_reason, "inf in fc2 weight_grad") == 0 &&
               steps[11].loss_scale == 65536.0 && steps[13].loss_scale == 32768.0 &&
               steps[26].loss_scale == 16384.0 && steps[31].loss_scale == 32768.0,
           "%s %s: skips and loss scale 2^16 -> 2^15 -> 2^14 -> 2^15", tag, sp->file);
    }
    if (sp->inject & SYNTH_NAN_DIVERGE) {
        const ampdiag_trace_tensor *g = &t[39 * per_step + AMPDIAG_KIND_ACTIVATION];
        ok(g->n_nan == 1 && isnan(steps[39].loss) && steps[0].loss == 2.5,
           "%s %s: NaN activation and NaN loss at the last step", tag, sp->file);
    }
    if (sp->status == AMPDIAG_STATUS_RUNNING)
        ok(nsteps == 24 && c.tensors == 240, "%s %s: cut off after the flush at step 23 (24 steps)",
           tag, sp->file);
    free(t);
    free(steps);

    ok((version >= 2) == (c.formats > 0) && (version >= 2) == (c.whatifs > 0) &&
           ampdiag_trace_has_field(r, "/tensors", "e4m3_overflow") == 0,
       "%s %s: %s", tag, sp->file, version >= 2 ? "/formats and /whatif, no FP8 fields in /tensors"
                                                : "no /formats, /whatif or FP8 fields (read as empty)");
    if (version >= 2)
        check_whatif(sp, r, tag, nsteps);

    ampdiag_trace_hist *hh = NULL;
    good = ampdiag_trace_read_hists(r, 0, SIZE_MAX, &hh, &n) == 0 && n == nhist_steps * per_step;
    for (size_t i = 0; good && i < n; i++) {
        int64_t s = (int64_t)(i / per_step) * sp->hist_every;
        int l = (int)(i % per_step) / AMPDIAG_NKINDS, k = (int)(i % AMPDIAG_NKINDS);
        float x[SYNTH_N];
        ampdiag_tstats st;
        ampdiag_hist h;
        synth_tensor(sp, s, l, k, x);
        ampdiag_tstats_compute(x, SYNTH_N, &st, &h);
        good = hh[i].step == s && hh[i].layer == l && hh[i].kind == k &&
               memcmp(hh[i].bin, h.bin, sizeof h.bin) == 0;
        uint64_t total = 0;
        for (int b = 0; b < AMPDIAG_HIST_BINS; b++)
            total += hh[i].bin[b];
        good = good && total == SYNTH_N;
    }
    ok(good, "%s %s: every histogram", tag, sp->file);
    free(hh);

    ampdiag_trace_event *ev = NULL;
    good = ampdiag_trace_read_events(r, &ev, &n) == 0 && n == nevents;
    size_t at = 0;
    for (size_t s = 0; good && s < nsteps; s++) {
        ampdiag_trace_event e[4];
        int ne = synth_events(sp, (int64_t)s, e);
        for (int j = 0; good && j < ne; j++, at++)
            good = ev[at].step == e[j].step && ev[at].layer == e[j].layer &&
                   ev[at].code == e[j].code && same_double(ev[at].value, e[j].value) &&
                   strcmp(ev[at].message, e[j].message) == 0;
    }
    ok(good, "%s %s: every event", tag, sp->file);
    free(ev);

    ampdiag_trace_eval *evs = NULL;
    good = ampdiag_trace_read_evals(r, &evs, &n) == 0 && n == nevals;
    for (size_t i = 0; good && i < n; i++) {
        ampdiag_trace_eval e;
        synth_eval((int64_t)((i + 1) * (size_t)sp->eval_every - 1), &e);
        good = evs[i].step == e.step && same_double(evs[i].loss, e.loss) &&
               same_double(evs[i].metric, e.metric);
    }
    if (sp->eval_every)
        good = good && n == 3 && evs[2].step == 59 && fabs(evs[2].metric - 0.795) < 1e-12;
    ok(good, "%s %s: every eval", tag, sp->file);
    free(evs);
    ampdiag_trace_reader_close(r);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write") == 0) {
        for (int i = 0; i < SYNTH_NSPECS; i++) {
            char path[4096];
            if (version_of(&synth_specs[i], "reference") != AMPDIAG_TRACE_FORMAT_VERSION)
                continue; /* an older version's: this writer cannot make it */
            snprintf(path, sizeof path, "%s/%s", argv[2], synth_specs[i].file);
            if (write_spec(&synth_specs[i], path) != 0) {
                fprintf(stderr, "t_trace_ref: cannot write %s: %s\n", path, ampdiag_trace_errmsg());
                return 1;
            }
            printf("wrote %s\n", path);
        }
        return 0;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: t_trace_ref [--write DIR]\n");
        return 2;
    }
    const char *srcdir = getenv("srcdir");
    if (!srcdir)
        srcdir = ".";
    for (int i = 0; i < SYNTH_NSPECS; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/traces/%s", srcdir, synth_specs[i].file);
        check_trace(&synth_specs[i], path, "reference");
    }

    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/t_trace_ref.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        ok(0, "mkdtemp %s", dir);
        return done_testing();
    }
    for (int i = 0; i < SYNTH_NSPECS; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, synth_specs[i].file);
        if (ok(write_spec(&synth_specs[i], path) == 0, "rewrite %s with this writer", synth_specs[i].file))
            check_trace(&synth_specs[i], path, "rewritten");
        unlink(path);
    }
    rmdir(dir);
    return done_testing();
}
