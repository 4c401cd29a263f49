/*
 * t_compare.c - the analysis (src/analysis/analyze.c) and the rules (src/analysis/recommend.c) on synthetic
 * traces whose contents are known (tests/compare_synth.h): gradient-norm percentiles and the
 * clip value, the loss scale at its exact boundary, unscaling of loss-scaled gradient records
 * and histograms, skip rates, divergence, loss spikes, the noise band from seeds, the learning
 * rate rules, FP32 islands, --fail-on, and JSON escaping.
 */
#include "analysis/compare.h"
#include "analysis/findings.h"
#include "analysis/hist.h"
#include "analysis/load.h"
#include "analysis/lrfind.h"
#include "analysis/recommend.h"
#include "messages/messages.h"
#include "report/report.h"
#include "util/sort.h"

#include "compare_synth.h"
#include "tap.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "t_compare.XXXXXX";
static char paths[32][256];
static int npaths;

/* Write the trace DIR/NAME.h5 (replacing one of that name), remembered for the clean-up. */
static const char *write_trace(const char *name, const cs_spec *s)
{
    char want[256];
    snprintf(want, sizeof want, "%s/%s.h5", dir, name);
    int k = 0;
    while (k < npaths && strcmp(paths[k], want) != 0)
        k++;
    if (k == (int)(sizeof paths / sizeof paths[0])) {
        printf("Bail out! more than %d traces: make paths[] larger\n", k);
        exit(1);
    }
    npaths += k == npaths;
    char *p = paths[k];
    snprintf(p, 256, "%s", want);
    int rc = cs_write(p, s);
    if (rc < 0) {
        printf("Bail out! cannot write %s: %s\n", p, ampdiag_trace_errmsg());
        exit(1);
    }
    return p;
}

static void load(const char *path, an_run *r)
{
    char err[512];
    if (an_load(path, NULL, r, err, sizeof err)) {
        printf("Bail out! an_load %s: %s\n", path, err);
        exit(1);
    }
}

/* The runs the words of the recommendation R name (set before a check reads R's words). */
static const an_run *cur_runs;
static size_t cur_n;

static msg_ctx ctx_of(const recommendation *R)
{
    msg_ctx m = {.runs = cur_runs, .nruns = cur_n, .baseline = 0, .R = R};
    return m;
}

/* The words (message table) of item i of R. */
static const char *words(const recommendation *R, size_t i)
{
    static char buf[4096];
    msg_ctx m = ctx_of(R);
    msg_item(buf, sizeof buf, &m, &R->items.v[i]);
    return buf;
}

/* An item of section sec (REC_NSECS: any) whose words hold a (and b when given). */
static int has_line(const recommendation *R, rec_sec sec, const char *a, const char *b)
{
    for (size_t i = 0; i < R->items.n; i++)
        if ((sec == REC_NSECS || R->items.v[i].sec == sec) && strstr(words(R, i), a) &&
            (!b || strstr(words(R, i), b)))
            return 1;
    return 0;
}

/* The words of the first item of a section ("" when it has none). */
static const char *first_line(const recommendation *R, rec_sec sec)
{
    for (size_t i = 0; i < R->items.n; i++)
        if (R->items.v[i].sec == sec)
            return words(R, i);
    return "";
}

static const char *verdict_of(const recommendation *R)
{
    static char buf[4096];
    msg_ctx m = ctx_of(R);
    msg_verdict(buf, sizeof buf, &m);
    return buf;
}

static const char *section_of(const recommendation *R, rec_sec sec)
{
    static char buf[4096];
    msg_ctx m = ctx_of(R);
    msg_section(buf, sizeof buf, &m, sec, " ");
    return buf;
}

static void dump(const recommendation *R, rec_sec sec)
{
    for (size_t i = 0; i < R->items.n; i++)
        if (R->items.v[i].sec == sec)
            diag("  %s", words(R, i));
}

/* Figure `name` of the finding f (NaN without it). */
static double fig(const an_finding *f, const char *name)
{
    int k = f ? an_finding_fig(f->id, name) : -1;
    return k >= 0 ? f->v[k] : NAN;
}

static void use_runs(const an_run *runs, size_t n)
{
    cur_runs = runs;
    cur_n = n;
}

/* ------------------------------------------------------------------------------------------ */

static void test_helpers(void)
{
    double v[] = {5, 1, 3, 2, 4};
    ok(median_doubles(v, 5) == 3, "median of 5 values");
    double w[] = {4, 1, 3, 2};
    ok(median_doubles(w, 4) == 2.5, "median of 4 values is the mean of the middle two");
    ok(isnan(median_doubles(w, 0)), "median of nothing is NaN");

    uint64_t h[AMPDIAG_HIST_BINS] = {0};
    h[AMPDIAG_HIST_BIN(-26)] = 10; /* |x| in [2^-26, 2^-25): flushed at scale 1 */
    h[AMPDIAG_HIST_BIN(-25)] = 20; /* [2^-25, 2^-24): rounds to 2^-24 (only 2^-25 itself ties to 0) */
    h[AMPDIAG_HIST_BIN(-15)] = 30; /* subnormal */
    h[AMPDIAG_HIST_BIN(-14)] = 40; /* normal */
    h[AMPDIAG_HIST_ZERO] = 1000;   /* zeros are not counted */
    double fl, sub;
    uint64_t nz;
    an_hist_fp16_at_scale(h, 0, &fl, &sub, &nz);
    ok(nz == 100 && fabs(fl - 0.10) < 1e-12 && fabs(sub - 0.50) < 1e-12,
       "fp16 at scale 1: 10%% flushed (exponent -26), 50%% subnormal (-25..-15), zeros left out "
       "(%g, %g, %llu)", fl, sub, (unsigned long long)nz);
    an_hist_fp16_at_scale(h, 1, &fl, &sub, &nz);
    ok(fl == 0 && fabs(sub - 0.30) < 1e-12, "at scale 2: nothing flushed, 30%% subnormal (%g, %g)", fl, sub);
    an_hist_fp16_at_scale(h, -1, &fl, &sub, &nz);
    ok(fabs(fl - 0.30) < 1e-12, "at scale 1/2: 30%% flushed (%g)", fl);
    ok(an_hist_quantile_log2(h, 0.05) == -26 && an_hist_quantile_log2(h, 0.5) == -15,
       "histogram quantiles (bin lower edges)");

    rec_fail_set m;
    char err[256];
    ok(rec_fail_parse("nan,skips", &m, err, sizeof err) == 0 && m == (REC_FAIL_NAN | REC_FAIL_SKIPS),
       "--fail-on nan,skips");
    ok(rec_fail_parse("all", &m, err, sizeof err) == 0 &&
           m == (REC_FAIL_NAN | REC_FAIL_SKIPS | REC_FAIL_DIVERGENCE | REC_FAIL_OVERFLOW), "--fail-on all");
    ok(rec_fail_parse("loss_nonfinite,diverged", &m, err, sizeof err) == 0 &&
           m == (REC_FAIL_BIT(F_LOSS_NONFINITE) | REC_FAIL_BIT(F_DIVERGED)),
       "--fail-on takes finding ids");
    ok(strcmp(rec_fail_name(F_EVAL_NONFINITE), "nan") == 0 && strcmp(rec_fail_name(F_DIVERGED), "divergence") == 0,
       "a finding in a group is named by its group");
    ok(rec_fail_parse("divergence,bogus", &m, err, sizeof err) == -1 && strstr(err, "'bogus'"),
       "--fail-on with an unknown word is refused, naming it: %s", err);
    rec_target t;
    ok(rec_target_parse("sm70", &t) == 0 && !rec_target_has_bf16(t) && rec_target_has_fp16(t),
       "sm70: fp16, no bf16");
    ok(rec_target_parse("sm80", &t) == 0 && rec_target_has_bf16(t), "sm80: bf16");
    ok(rec_target_parse("sm100x", &t) == -1, "unknown target refused");
}

/* The healthy FP32 trace: clip statistics, loss scale, ratios, spikes. */
static void test_fp32(void)
{
    cs_spec s;
    cs_spec_init(&s);
    s.grad_absmax[1] = 0.25; /* fc2's weight gradients are the largest: 0.25 */
    s.spike_at = 600;
    const char *p = write_trace("fp32", &s);
    an_run r;
    load(p, &r);
    ok(r.nsteps == 1000 && r.nlayers == 4 && strcmp(r.precision, "fp32") == 0, "read 1000 steps, 4 layers");
    ok(r.calib == 100 && r.gn.n == 900, "warm-up min(100, steps/5) = 100: 900 norms (%zu, %zu)", r.calib, r.gn.n);
    ok(fabs(r.gn.median - 1.495) < 1e-12, "median norm 1.495 (%.17g)", r.gn.median);
    ok(fabs(r.gn.p99 - 1.9801) < 1e-12, "P99 1.9801 (linear interpolation) (%.17g)", r.gn.p99);
    ok(fabs(r.gn.p10 - 1.099) < 1e-12, "P10 1.099 (%.17g)", r.gn.p10);
    ok(fabs(r.gn.mad - 0.25) < 1e-12, "MAD 0.25 (%.17g)", r.gn.mad);
    ok(fabs(r.gn.value - 2.60695) < 1e-12 && r.gn.n_over == 0,
       "clip = max(P99, median + 3 * 1.4826 * MAD) = 2.60695, clips nothing (%.17g, %zu)", r.gn.value,
       r.gn.n_over);
    ok(r.loss_spikes == 1 && r.spike_steps[0] == 600, "one loss spike, at step 600 (%zu, first %lld)",
       r.loss_spikes, (long long)(r.loss_spikes ? r.spike_steps[0] : -1));
    ok(fabs(r.ratio_median - 1e-3) < 1e-12 && r.layers[0].ratio_n == 101,
       "update/weight ratio 1e-3 from 101 paired records per layer (%g, %zu)", r.ratio_median,
       r.layers[0].ratio_n);
    ok(!r.scaled && r.skipped == 0 && !r.diverged && r.divergence_step == -1, "no scale, no skips, no divergence");
    ok(r.nevals == 4 && r.layers[1].cell[AMPDIAG_KIND_WEIGHT_GRAD].hist_records == 10,
       "4 evaluations, 10 histograms per layer");

    an_comparison c;
    recommendation R;
    ok(an_compare(&r, 1, 0, &c) == 0, "compare one trace");
    use_runs(&r, 1);
    ok(recommend(&r, 1, &c, TGT_ANY, REC_FAIL_NAN | REC_FAIL_SKIPS | REC_FAIL_DIVERGENCE | REC_FAIL_OVERFLOW,
                 &R) == 0,
       "recommend");
    ok(R.scale && fig(R.scale, "log2") == 16 && R.scale->s.layer == 1 &&
           R.scale->s.kind == AMPDIAG_KIND_WEIGHT_GRAD,
       "loss scale 2^16: 0.25 * 2^17 = 32768 > 65504/2 (got 2^%g from layer %d)", fig(R.scale, "log2"),
       R.scale ? R.scale->s.layer : -1);
    ok(!an_run_finding(&r, F_FLUSH_AT_SCALE) && fig(R.scale, "from_hist") == 1,
       "nothing flushes at 2^16 (gradients at 2^-10, 2^-12)");
    ok(R.precision == REC_BF16 && R.predicted, "one FP32 trace: bf16, predicted (%s)", verdict_of(&R));
    ok(R.lr == LR_KEEP && has_line(&R, SEC_LR, "0.001", "target ~1e-3"), "lr: keep (%s)",
       section_of(&R, SEC_LR_LINE));
    ok(!R.clip_have && has_line(&R, SEC_CLIP_LINE, "none offered", "no spike") &&
           has_line(&R, SEC_CLIP, "2.61", "P99"),
       "no clip offered without a spike it would catch; the statistics (clip 2.61) stay evidence (%s)",
       section_of(&R, SEC_CLIP_LINE));
    ok(has_line(&R, SEC_CLIP, "P99 1.98", "MAD 0.25"), "the clip line prints its numbers");
    ok((R.fail_held & R.fail_mask) == 0, "no --fail-on condition holds");
    const rec_decision *dp = NULL;
    for (size_t i = 0; i < R.decisions.n; i++)
        if (R.decisions.v[i].what == WHAT_PRECISION)
            dp = &R.decisions.v[i];
    ok(dp && strcmp(dp->to, "bf16") == 0 && dp->conf == CONF_HYPOTHESIS,
       "the precision decision: bf16, a hypothesis (predicted from the FP32 trace)");
    if (R.lr != LR_KEEP || !has_line(&R, SEC_LR, "0.001", "target ~1e-3"))
        dump(&R, SEC_LR);

    /* at sm75 (no BF16) the verdict is fp16 with the scale */
    recommendation R2;
    int rc2 = recommend(&r, 1, &c, TGT_SM75, 0, &R2);
    ok(rc2 == 0 && R2.precision == REC_FP16 && strstr(verdict_of(&R2), "initial scale 2^16"),
       "sm75: fp16 + dynamic loss scaling, initial 2^16 (%s)", verdict_of(&R2));
    rec_free(&R2);
    rec_free(&R);
    an_comparison_free(&c);
    an_free(&r);
}

/* A loss-scaled FP16 trace: unscaling, the scale boundary, skips after calibration. */
static void test_fp16(void)
{
    static const long skips[] = {50, 150, 400, 900};
    cs_spec s;
    cs_spec_init(&s);
    s.precision = "fp16";
    s.scale = 1024;
    s.grad_absmax[0] = 32752.0 / 1048576.0; /* exactly 65504/2 at 2^20 */
    for (int l = 1; l < 4; l++)
        s.grad_absmax[l] = 1e-3;
    s.hist_e2 = -45; /* at 2^20: exponent -25, kept as a subnormal */
    s.skips = skips;
    s.nskips = 4;
    s.norm_spike_at = 777;
    const char *p = write_trace("fp16", &s);
    an_run r;
    load(p, &r);
    const an_cell *g = &r.layers[0].cell[AMPDIAG_KIND_WEIGHT_GRAD];
    ok(r.scaled && r.scale_init == 1024, "loss scale 2^10 recorded");
    ok(fabs(g->absmax - 32752.0 / 1024) < 1e-9 && fabs(g->absmax_u - 32752.0 / 1048576.0) < 1e-12,
       "gradient records as held (x 2^10) are unscaled (%g -> %g)", g->absmax, g->absmax_u);
    ok(r.skipped == 4 && r.skipped_after == 3 && r.steps_after == 900 && r.first_skip_step == 50,
       "4 skips, 3 after the 100-step calibration window, first at 50");
    ok(strcmp(r.first_skip_reason, "inf in fc1 weight_grad") == 0, "skip reason kept");
    ok(r.gn.n == 897 && r.gn.n_over == 1 && r.gn.over_steps[0] == 777 && fabs(r.gn.p99 - 1.99) < 1e-12,
       "skipped steps leave the norm history; the norm spike at 777 is the one clipped step (%zu, %zu)",
       r.gn.n, r.gn.n_over);

    an_comparison c;
    recommendation R;
    use_runs(&r, 1);
    ok(an_compare(&r, 1, 0, &c) == 0 && recommend(&r, 1, &c, TGT_ANY, REC_FAIL_SKIPS, &R) == 0, "rules");
    ok(fig(R.scale, "log2") == 20, "the largest gradient 32752 * 2^-20 allows exactly 2^20 (got 2^%g)",
       fig(R.scale, "log2"));
    const an_finding *sub = an_run_finding(&r, F_SUBNORMAL_AT_SCALE);
    ok(!an_run_finding(&r, F_FLUSH_AT_SCALE) && fabs(fig(sub, "share") - 0.1) < 1e-12,
       "histograms unscaled: at 2^20, 2^-45 becomes 2^-25: a subnormal, not flushed (%g)", fig(sub, "share"));
    const rec_item *sk = rec_find_item(&R, SEC_FP16_AGAINST, R_FP16_SKIPS, F_SKIPS_ABOVE_LIMIT);
    ok(sk && fig(sk->f, "skipped_after") == 3 && fig(sk->f, "steps_after") == 900 && fig(sk->f, "first_step") == 50,
       "skip rate 3/900 > 1/500 rules fp16 out: its finding holds 3, 900, first at 50");
    ok(has_line(&R, SEC_FP16_AGAINST, "3 of 900 steps skipped", "first at step 50"),
       "... and its words print the numbers");
    ok(R.fp16.decisive && R.precision == REC_BF16, "-> bf16 (%s)", verdict_of(&R));
    ok((R.fail_held & REC_FAIL_BIT(F_SKIPS_ABOVE_LIMIT)) && has_line(&R, SEC_FAIL, "skipped 3 of 900", NULL) &&
           strcmp(rec_fail_name(F_SKIPS_ABOVE_LIMIT), "skips") == 0,
       "--fail-on skips holds: the finding skips_above_limit");
    if (!has_line(&R, SEC_FP16_AGAINST, "3 of 900 steps skipped", NULL))
        dump(&R, SEC_FP16_AGAINST);
    rec_free(&R);
    an_comparison_free(&c);
    an_free(&r);
}

static void test_divergence_and_lr(void)
{
    cs_spec s;
    cs_spec_init(&s);
    s.nan_from = 800;
    s.u_rms = 5e-3; /* ratio 0.05 */
    const char *p = write_trace("diverge", &s);
    an_run r;
    load(p, &r);
    ok(r.diverged && r.divergence_step == 800 && r.loss_nonfinite == 200 && r.first_nonfinite_loss_step == 800,
       "NaN loss from step 800 to the end: diverged at 800 (%lld)", (long long)r.divergence_step);
    ok(isinf(r.tail_mean), "the final window holds NaN: its mean is infinite");
    an_comparison c;
    recommendation R;
    use_runs(&r, 1);
    ok(an_compare(&r, 1, 0, &c) == 0 &&
           recommend(&r, 1, &c, TGT_ANY, REC_FAIL_DIVERGENCE | REC_FAIL_NAN, &R) == 0,
       "rules");
    ok(R.precision == REC_UNDECIDED, "the FP32 baseline diverges: no precision verdict (%s)", verdict_of(&R));
    /* below where the instability began, by as much as the ratio says (no 10x cap) */
    ok(R.lr == LR_LOWER && fabs(R.lr_factor - 0.02) < 1e-12 && fabs(R.lr_suggested - 2e-5) < 1e-15,
       "lr x min(0.5, 1e-3/0.05) = x0.02 (%s)", section_of(&R, SEC_LR_LINE));
    const rec_decision *dl = NULL;
    for (size_t i = 0; i < R.decisions.n; i++)
        if (R.decisions.v[i].what == WHAT_LR)
            dl = &R.decisions.v[i];
    ok(dl && fabs(dl->value - 2e-5) < 1e-15 && dl->nbecause > 0,
       "the lr decision: 2e-5, with the findings behind it (%zu)", dl ? dl->nbecause : 0);
    ok((R.fail_held & REC_FAIL_DIVERGENCE) && (R.fail_held & REC_FAIL_NAN), "--fail-on divergence and nan hold");
    rec_free(&R);
    an_comparison_free(&c);
    an_free(&r);

    cs_spec_init(&s);
    s.u_rms = 2e-6; /* ratio 2e-5 */
    p = write_trace("lowlr", &s);
    load(p, &r);
    ok(an_compare(&r, 1, 0, &c) == 0 && recommend(&r, 1, &c, TGT_ANY, 0, &R) == 0, "rules");
    ok(R.lr == LR_KEEP && !an_run_finding(&r, F_LR_TOO_LOW),
       "ratio 2e-5 in a run that learns: keep (a rule of thumb a run that learns outweighs) (%s)",
       section_of(&R, SEC_LR_LINE));
    rec_free(&R);
    an_comparison_free(&c);
    an_free(&r);
}

/* Several runs: seeds set the band; a BF16 run outside it is ruled out; islands at sm70. */
static void test_compare_runs(void)
{
    cs_spec s;
    an_run runs[5];
    const double evals[3] = {1.0, 1.1, 0.9};
    const char *p_seed1 = NULL, *p_bf16;
    for (int i = 0; i < 3; i++) {
        cs_spec_init(&s);
        s.seed = i + 1;
        s.final_eval = evals[i];
        char name[32];
        snprintf(name, sizeof name, "seed%d", i + 1);
        const char *p = write_trace(name, &s);
        p_seed1 = p_seed1 ? p_seed1 : p;
        load(p, &runs[i]);
    }
    cs_spec_init(&s);
    s.precision = "fp16";
    s.scale = 65536;
    s.final_eval = 1.15;
    load(write_trace("cmp-fp16", &s), &runs[3]);
    cs_spec_init(&s);
    s.precision = "bf16";
    s.final_eval = 1.5;
    load(p_bf16 = write_trace("cmp-bf16", &s), &runs[4]);
    an_comparison c;
    ok(an_compare(runs, 5, 0, &c) == 0, "compare 5 runs");
    ok(c.band_from_seeds && c.band_seeds == 3 && fabs(c.band - 0.2) < 1e-9,
       "3 FP32 seeds with eval 1.0, 1.1, 0.9: band 2 sigma = 20%% (%g)", c.band);
    ok(c.gap[3].have && c.gap[3].eval && fabs(c.gap[3].rel - 0.15) < 1e-9, "fp16 gap +15%% (%g)", c.gap[3].rel);
    ok(fabs(c.gap[4].rel - 0.5) < 1e-9, "bf16 gap +50%%");
    ok(strcmp(runs[0].label, "fp32 seed 1") == 0 && strcmp(runs[3].label, "fp16 seed 1") == 0,
       "labels name the seed when seeds differ (%s)", runs[3].label);
    const an_finding *seed = an_finding_find(&c.list, F_CMP_SEED, 1);
    ok(seed && seed->s.run2 == 0, "a finding says the seed of run 1 differs from the baseline's");
    recommendation R;
    use_runs(runs, 5);
    ok(recommend(runs, 5, &c, TGT_ANY, 0, &R) == 0, "rules");
    const rec_item *out = rec_find_item(&R, SEC_BF16_AGAINST, R_GAP_OUTSIDE, F_CMP_GAP);
    ok(out && out->f->s.run == 4 && fabs(fig(out->f, "rel") - 0.5) < 1e-9 && fig(out->f, "outside") == 1,
       "bf16 outside the band: its loss_gap finding (+50%%)");
    ok(has_line(&R, SEC_BF16_AGAINST, "outside the noise band", "+50%"), "... and the words print it");
    ok(has_line(&R, SEC_FP16_FOR, "within the noise band", "+15%"), "fp16 within the band");
    ok(R.precision == REC_FP16, "-> fp16 + loss scaling (%s)", verdict_of(&R));
    ok(R.claim == CLAIM_FIX && rec_find_item(&R, SEC_CLAIM, R_CLAIM_FIX, F_NONE) &&
           rec_find_item(&R, SEC_CLAIM, R_CLAIM_FIX, F_NONE)->run == 4,
       "claim: bf16 lost beyond the band and fp16 was seen within it: decided (%s)", rec_claim_key(R.claim));
    rec_free(&R);
    an_comparison_free(&c);
    /* the same bf16 run with the baseline alone: its loss has no mechanism the predicted fp16
     * removes (fp16 trades BF16's range for precision), so the claim is untested */
    an_run two[2];
    load(p_seed1, &two[0]);
    load(p_bf16, &two[1]);
    use_runs(two, 2);
    ok(an_compare(two, 2, 0, &c) == 0 && recommend(two, 2, &c, TGT_ANY, 0, &R) == 0, "rules (fp32, bf16)");
    ok(R.claim == CLAIM_UNTESTED && rec_find_item(&R, SEC_CLAIM, R_CLAIM_TRADE, F_NONE),
       "claim: bf16 lost beyond the band, nothing seen of %s: untested (%s)", verdict_of(&R),
       rec_claim_key(R.claim));
    rec_free(&R);
    an_comparison_free(&c);
    an_free(&two[0]);
    an_free(&two[1]);
    use_runs(runs, 5);

    /* JSON: escaped strings, valid structure markers */
    FILE *f = tmpfile();
    report_opts ro;
    memset(&ro, 0, sizeof ro);
    ok(an_compare(runs, 5, 0, &c) == 0 && recommend(runs, 5, &c, TGT_ANY, 0, &R) == 0 && f &&
           report_json(f, runs, 5, &c, &R, &ro) == 0,
       "JSON report written");
    rec_free(&R);
    an_comparison_free(&c);
    if (f)
        fclose(f);
    for (int i = 0; i < 5; i++)
        an_free(&runs[i]);

    /* forward overflow in fc1: islands fc1 + fc2 (half the parameters) rescue fp16 on sm70 */
    cs_spec_init(&s);
    s.act_absmax[0] = 1e5;
    an_run r;
    load(write_trace("overflow", &s), &r);
    use_runs(&r, 1);
    ok(an_compare(&r, 1, 0, &c) == 0 && recommend(&r, 1, &c, TGT_SM70, REC_FAIL_OVERFLOW, &R) == 0, "rules");
    const rec_item *ov = rec_find_item(&R, SEC_FP16_AGAINST, R_FP16_FWD_OVERFLOW, F_FWD_OVERFLOW);
    ok(ov && ov->f->s.layer == 0, "forward overflow: the finding names fc1");
    ok(has_line(&R, SEC_FP16_AGAINST, "forward overflow: fc1 activations reach 1e+05", "65520"),
       "forward overflow named with its value");
    ok(R.precision == REC_FP16 && strcmp(R.fp32_layers, "fc1,fc2") == 0,
       "sm70: fp16 with FP32 layers fc1,fc2 (%s)", verdict_of(&R));
    const rec_decision *di = NULL;
    for (size_t i = 0; i < R.decisions.n; i++)
        if (R.decisions.v[i].what == WHAT_FP32_LAYERS)
            di = &R.decisions.v[i];
    ok(di && strcmp(di->to, "fc1,fc2") == 0 && strcmp(di->option, "--fp32-layers") == 0 &&
           di->scope == REM_RECOMMENDED,
       "a decision: --fp32-layers fc1,fc2 for the recommended run");
    ok(R.fail_held & REC_FAIL_OVERFLOW, "--fail-on overflow holds (what-if)");
    rec_free(&R);
    int rc80 = recommend(&r, 1, &c, TGT_SM80, 0, &R);
    ok(rc80 == 0 && R.precision == REC_BF16, "sm80: bf16 (%s)",
       verdict_of(&R));
    rec_free(&R);
    an_comparison_free(&c);
    an_free(&r);
}

/* The JSON report of runs[0..n) (baseline 0) into a malloc'd string; NULL on failure. */
static char *json_of(an_run *runs, size_t n, size_t *len)
{
    an_comparison c;
    recommendation R;
    report_opts ro;
    memset(&ro, 0, sizeof ro);
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    int bad = !f || an_compare(runs, n, 0, &c) != 0;
    if (!bad) {
        bad = recommend(runs, n, &c, TGT_ANY, 0, &R) != 0;
        if (!bad) {
            bad = report_json(f, runs, n, &c, &R, &ro) != 0;
            rec_free(&R);
        }
        an_comparison_free(&c);
    }
    if (f && fclose(f) != 0)
        bad = 1;
    if (bad) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* DIR/NAME.h5 written by a writer killed before its first record (still marked as open). */
static const char *killed_trace(const char *name)
{
    static char p[2][256];
    static int k;
    char *path = p[k++ % 2];
    snprintf(path, 256, "%s/%s.h5", dir, name);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        ampdiag_trace_options o;
        ampdiag_trace_options_init(&o);
        o.overwrite = 1;
        ampdiag_trace_writer *w = NULL;
        if (ampdiag_trace_create(path, &o, &w) == 0)
            raise(SIGKILL);
        _exit(3);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFSIGNALED(st))
        return NULL;
    return path;
}

/* an_load_many (several traces at once, on threads taking turns in HDF5) gives what an_load
 * gives trace by trace; prints the notes of repaired traces in path order; reports the first
 * trace that fails. */
static void test_load_many(void)
{
    cs_spec s;
    const char *pp[3];
    const char *prec[3] = {"fp32", "fp16", "bf16"};
    for (int i = 0; i < 3; i++) {
        cs_spec_init(&s);
        s.precision = prec[i];
        s.scale = i == 1 ? 65536 : 1;
        s.nsteps = 3000;
        char name[32];
        snprintf(name, sizeof name, "many-%s", prec[i]);
        pp[i] = write_trace(name, &s);
    }
    an_run one[3], many[3];
    for (int i = 0; i < 3; i++)
        load(pp[i], &one[i]);
    int rc = -1;
    char err[512];
    an_options q = {.warmup = -1, .quiet = 1};
    size_t first = an_load_many(pp, 3, &q, many, &rc, err, sizeof err);
    size_t n1 = 0, n2 = 0;
    char *j1 = json_of(one, 3, &n1), *j2 = first == 3 ? json_of(many, 3, &n2) : NULL;
    ok(first == 3 && rc == 0 && j1 && j2 && n1 == n2 && memcmp(j1, j2, n1) == 0 &&
           many[1].nsteps == 3000 && many[2].nsteps == 3000,
       "three traces read at once: compare's JSON report the same as read one by one (%zu bytes)", n2);
    free(j1);
    free(j2);
    for (int i = 0; i < 3; i++) {
        an_free(&one[i]);
        an_free(&many[i]);
    }

    /* two repaired traces: their notes after the loads, in the order of the files */
    const char *k1 = killed_trace("killed-1"), *k2 = killed_trace("killed-2");
    const char *pk[3] = {k1, pp[0], k2};
    char log[300];
    snprintf(log, sizeof log, "%s/notes.txt", dir);
    an_options loud = {.warmup = -1, .quiet = 0};
    fflush(stderr);
    int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    first = 9;
    if (k1 && k2 && saved >= 0 && fd >= 0 && dup2(fd, 2) == 2) {
        first = an_load_many(pk, 3, &loud, many, &rc, err, sizeof err);
        fflush(stderr);
        dup2(saved, 2);
        for (int i = 0; i < 3; i++)
            an_free(&many[i]);
    }
    if (fd >= 0)
        close(fd);
    if (saved >= 0)
        close(saved);
    char text[2048] = "";
    FILE *f = fopen(log, "r");
    size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[got] = 0;
    if (f)
        fclose(f);
    const char *a = strstr(text, "killed-1.h5' was still marked as open");
    const char *b = strstr(text, "killed-2.h5' was still marked as open");
    int lines = 0;
    for (const char *c = text; *c; c++)
        lines += *c == '\n';
    ok(first == 3 && rc == 0 && a && b && a < b && lines == 2,
       "two repaired traces read at once: two notes, in the order of the files");
    remove(log);
    if (k1)
        remove(k1);
    if (k2)
        remove(k2);

    /* the first failure is reported; every run can be freed */
    char missing[300];
    snprintf(missing, sizeof missing, "%s/no-such-trace.h5", dir);
    const char *pm[3] = {pp[0], missing, pp[2]};
    first = an_load_many(pm, 3, &q, many, &rc, err, sizeof err);
    ok(first == 1 && rc == AMPDIAG_TRACE_ENOENT && strstr(err, "no-such-trace.h5"),
       "a missing second trace: index 1, ENOENT, the message names it (%s)", err);
    for (int i = 0; i < 3; i++)
        an_free(&many[i]);
}

static void test_json_escaping(void)
{
    cs_spec s;
    static const long skips[] = {500};
    cs_spec_init(&s);
    s.precision = "fp16";
    s.scale = 4;
    s.skips = skips;
    s.nskips = 1;
    s.skip_reason = "q\"b\\s\nn\x01 tab\t \xc3\xa9 bad\xff";
    an_run r;
    load(write_trace("escape", &s), &r);
    an_comparison c;
    recommendation R;
    char buf[1 << 16];
    FILE *f = tmpfile();
    report_opts ro;
    memset(&ro, 0, sizeof ro);
    int okw = f && an_compare(&r, 1, 0, &c) == 0 && recommend(&r, 1, &c, TGT_ANY, 0, &R) == 0 &&
              report_json(f, &r, 1, &c, &R, &ro) == 0;
    size_t n = 0;
    if (okw) {
        rewind(f);
        n = fread(buf, 1, sizeof buf - 1, f);
    }
    buf[n] = 0;
    ok(okw && n > 0, "JSON written (%zu bytes)", n);
    const char *p = strstr(buf, "\"first_skip_reason\":");
    ok(p != NULL, "first_skip_reason present");
    if (p) {
        const char *want = "\"first_skip_reason\":\"q\\\"b\\\\s\\nn\\u0001 tab\\t \xc3\xa9 bad";
        ok(strncmp(p, want, strlen(want)) == 0,
           "quotes, backslashes, newline, control bytes escaped; UTF-8 kept: %.70s", p);
        ok(strstr(p, "bad\\ufffd\"") != NULL || strstr(p, "bad\"") != NULL,
           "an invalid byte becomes U+FFFD (or was dropped by the writer)");
    }
    ok(strstr(buf, "nan") == NULL || strstr(buf, ":nan") == NULL, "no bare nan in the JSON");
    ok(strstr(buf, ":inf") == NULL && strstr(buf, ":-inf") == NULL, "no bare inf in the JSON");
    if (f)
        fclose(f);
    if (okw) {
        rec_free(&R);
        an_comparison_free(&c);
    }
    an_free(&r);
}

/* Baseline sanity first: a NaN eval loss is a --fail-on nan finding; a baseline that does not
 * learn and runs of another model are named first in the evidence and in the verdict. */
static void test_baseline_sanity(void)
{
    cs_spec s;
    cs_spec_init(&s);
    s.final_eval = NAN;
    const char *p = write_trace("evalnan-base", &s);
    an_run runs[2];
    load(p, &runs[0]);
    cs_spec_init(&s);
    s.precision = "bf16";
    s.final_eval = INFINITY; /* an eval that overflowed: no NaN anywhere else */
    p = write_trace("evalnan-bf16", &s);
    load(p, &runs[1]);
    an_comparison c;
    recommendation R;
    use_runs(runs, 2);
    ok(an_compare(runs, 2, 0, &c) == 0 && recommend(runs, 2, &c, TGT_ANY, REC_FAIL_NAN, &R) == 0, "rules");
    ok((R.fail_held & REC_FAIL_NAN) && has_line(&R, SEC_FAIL, "eval loss", "not finite") &&
           rec_find_item(&R, SEC_FAIL, R_FAIL_EVAL_ONLY, F_EVAL_ONLY_NONFINITE),
       "an eval loss that is not finite (and nothing else) holds --fail-on nan");
    rec_free(&R);
    an_comparison_free(&c);
    an_free(&runs[0]);
    an_free(&runs[1]);

    cs_spec_init(&s);
    s.loss0 = 0;
    s.loss_floor = 2.0; /* the loss never leaves its first value */
    load(write_trace("flat-base", &s), &runs[0]);
    cs_spec_init(&s);
    s.precision = "fp16";
    s.model = "transformer";
    load(write_trace("flat-fp16", &s), &runs[1]);
    ok(an_compare(runs, 2, 0, &c) == 0 && recommend(runs, 2, &c, TGT_ANY, 0, &R) == 0, "rules");
    ok(strstr(first_line(&R, SEC_WHY), "first:") && strstr(first_line(&R, SEC_WHY), "model 'transformer'") &&
           has_line(&R, SEC_WHY, "does not learn", "fix the training first"),
       "the model difference and a baseline that does not learn come first in the evidence");
    ok(rec_find_item(&R, SEC_WHY, R_FIRST_MODEL, F_CMP_MODEL) && rec_find_item(&R, SEC_WHY, R_FIRST_NOT_LEARNING, F_NONE),
       "... as items of their ids");
    ok(R.precision == REC_UNDECIDED && strstr(verdict_of(&R), "cannot be compared") != NULL,
       "the verdict is undecided: the runs cannot be compared (%s)", verdict_of(&R));
    rec_free(&R);
    an_comparison_free(&c);
    an_free(&runs[0]);
    an_free(&runs[1]);
}

/* The rules of two runs (the first the baseline) without --target and --fail-on. */
static int rules2(an_run runs[2], an_comparison *c, recommendation *R)
{
    use_runs(runs, 2);
    return an_compare(runs, 2, 0, c) == 0 && recommend(runs, 2, c, TGT_ANY, 0, R) == 0;
}

static void free2(an_run runs[2], an_comparison *c, recommendation *R)
{
    rec_free(R);
    an_comparison_free(c);
    an_free(&runs[0]);
    an_free(&runs[1]);
}

/* A 16-bit run whose evaluation alone is not finite (training finite) where FP32's is: that
 * format is ruled out and the cause is the first reason; a baseline whose eval fails too is no
 * such evidence. */
static void test_eval_only(void)
{
    cs_spec s;
    an_run runs[2];
    an_comparison c;
    recommendation R;
    cs_spec_init(&s);
    load(write_trace("evalonly-base", &s), &runs[0]);
    s.precision = "fp16";
    s.final_eval = INFINITY;
    load(write_trace("evalonly-fp16", &s), &runs[1]);
    ok(rules2(runs, &c, &R), "rules");
    ok(R.fp16.decisive && !R.fp16.viable && R.precision == REC_BF16,
       "fp16 whose eval alone overflows: ruled out, bf16 (%s)", verdict_of(&R));
    ok(strstr(first_line(&R, SEC_WHY), "first: fp16's evaluation overflows FP16") == first_line(&R, SEC_WHY),
       "the cause is the first reason (%s)", first_line(&R, SEC_WHY));
    const rec_item *why0 = NULL;
    for (size_t i = 0; i < R.items.n && !why0; i++)
        if (R.items.v[i].sec == SEC_WHY)
            why0 = &R.items.v[i];
    ok(why0 && why0->msg == R_EVAL_FIRST && why0->f && why0->f->id == F_EVAL_ONLY_NONFINITE,
       "... an item of its id, reading the finding eval_only_nonfinite");
    ok(strstr(verdict_of(&R), "first cause of fp16's NaN") != NULL, "the verdict names it");
    free2(runs, &c, &R);

    cs_spec_init(&s);
    s.final_eval = INFINITY;
    load(write_trace("evalboth-base", &s), &runs[0]);
    s.precision = "fp16";
    load(write_trace("evalboth-fp16", &s), &runs[1]);
    ok(rules2(runs, &c, &R), "rules");
    ok(!R.fp16.decisive && !has_line(&R, SEC_WHY, "evaluation overflows", ""),
       "an eval that fails in FP32 too is not the format's");
    free2(runs, &c, &R);
}

/* A baseline whose steps are too small: lr x 1e-3 / r, at most 1000x when it learns nothing
 * (its weights have not moved), at most 10x when it learns a little; never when it learns. */
static void test_lr_too_low(void)
{
    static const struct {
        double floor, u_rms, factor;
        rec_lr_verdict v;
        const char *what;
    } cases[] = {
        {2.0, 1e-9, 1000, LR_RAISE, "learns nothing, ratio 1e-8: x1000 (capped)"},
        {2.0, 1e-6, 100, LR_RAISE, "learns nothing, ratio 1e-5: x100 (1e-3 / r)"},
        {1.9, 2e-5, 5, LR_RAISE, "learns a little, ratio 2e-4: x5"},
        {1.9, 1e-7, 10, LR_RAISE, "learns a little, ratio 1e-6: x10 (capped)"},
        {0.5, 2e-5, 1, LR_KEEP, "learns, ratio 2e-4: keep"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cs_spec s;
        an_run runs[2];
        an_comparison c;
        recommendation R;
        cs_spec_init(&s);
        s.loss0 = cases[k].floor < 1 ? 2.0 : 0;
        s.loss_floor = cases[k].floor < 1 ? 0.5 : cases[k].floor;
        s.u_rms = cases[k].u_rms;
        if (cases[k].floor == 1.9) { /* from 2.0 down to 1.9: not below 90% */
            s.loss0 = 0.1;
            s.loss_floor = 1.9;
        }
        load(write_trace("toolow-base", &s), &runs[0]);
        s.precision = "bf16";
        load(write_trace("toolow-bf16", &s), &runs[1]);
        ok(rules2(runs, &c, &R), "rules");
        ok(R.lr == cases[k].v && fabs(R.lr_factor - cases[k].factor) < 1e-6 * cases[k].factor,
           "%s (%s x%g)", cases[k].what, rec_lr_name(R.lr), R.lr_factor);
        if (cases[k].floor == 2.0 && cases[k].u_rms < 1e-6)
            ok(has_line(&R, SEC_WHY, "does not learn", "the lr is too low") &&
                   strstr(verdict_of(&R), "lr is too low") && R.precision == REC_UNDECIDED,
               "the baseline that learns nothing: undecided, named first with its cause (%s)", verdict_of(&R));
        free2(runs, &c, &R);
    }
}

/* The LR range test's suggestions: fastai's valley on a known curve, and the smoothed ones. */
static void test_lrfind(void)
{
    /* strictly falling over points 0..6 (longest run: 7, fastai's max_start = 6 - 7 = -1), then
     * rising: sections = 7/3, idx = -1 + 2 + 1 = 2 */
    double lr[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    double l[10] = {3, 2.5, 2, 1.5, 1, 0.8, 0.6, 2, 3, 4};
    ok(lr_valley(lr, l, 10) == 3, "valley: two thirds down the longest descent, as fastai (lr %g)",
       lr_valley(lr, l, 10));
    double flat[4] = {1, 1, 1, 1};
    ok(isnan(lr_valley(lr, flat, 4)), "valley: none on a flat curve");
    /* 100 log-spaced lrs 1e-6..1e2, the loss falls fastest around 1e-3 (the EMA lags it a little
     * to the right, as in fastai), explodes past 1 */
    double lrs[100], loss[100];
    for (int i = 0; i < 100; i++) {
        lrs[i] = 1e-6 * pow(10, 8.0 * i / 99);
        double x = log10(lrs[i]) + 3; /* 0 at 1e-3 */
        loss[i] = lrs[i] > 1 ? 2 + 100 * (lrs[i] - 1) : 1.25 - tanh(2 * x);
    }
    lr_suggest s;
    lr_suggest_from(lrs, loss, 100, &s);
    ok(s.steepest > 3e-4 && s.steepest < 1e-2 && s.valley > 1e-5 && s.valley < 1e-1 &&
           isfinite(s.diverged_at) && s.diverged_at > 1 && s.minimum > 0 && s.minimum < s.diverged_at,
       "smoothed suggestions: steepest near the fastest fall (%g), valley %g, minimum/10 %g, diverged "
       "past lr 1 (%g)", s.steepest, s.valley, s.minimum, s.diverged_at);
}

/* The /layers compute column: a layer that a bf16 run ran in FP32 (autocast kept it there) is an
 * FP32 op in that run, and compare carries it to the FP32 baseline, whose forward overflow there
 * no longer rules FP16 out. */
static void test_compute_column(void)
{
    cs_spec s;
    cs_spec_init(&s);
    s.nsteps = 300;
    s.act_absmax[2] = 1e6; /* fc3's output: beyond FP16 */
    const char *base = write_trace("cmp-fp32", &s);
    s.precision = "bf16";
    s.compute[0] = s.compute[1] = s.compute[3] = "bf16";
    s.compute[2] = "fp32";
    const char *bf = write_trace("cmp-bf16", &s);
    s.precision = "fp32";
    const char *fp32c = write_trace("cmp-fp32c", &s); /* an FP32 run: everything is FP32 anyway */
    an_run runs[2], one, c32;
    load(base, &runs[0]);
    load(bf, &runs[1]);
    load(fp32c, &c32);
    ok(!runs[0].layers[2].fp32_op && runs[1].layers[2].fp32_op && !runs[1].layers[1].fp32_op &&
           strcmp(runs[1].layers[2].compute, "fp32") == 0 && strcmp(runs[1].layers[0].compute, "bf16") == 0 &&
           runs[0].layers[2].compute[0] == 0,
       "loaded: the bf16 run's fc3 (compute fp32) is an FP32 op, its fc2 (bf16) and the baseline's fc3 are not");
    ok(!c32.layers[2].fp32_op, "an fp32 run's compute fp32 marks nothing (every layer computes in FP32 there)");
    an_free(&c32);
    an_comparison c;
    recommendation R;
    load(base, &one);
    use_runs(&one, 1);
    ok(an_compare(&one, 1, 0, &c) == 0 && recommend(&one, 1, &c, TGT_ANY, 0, &R) == 0 &&
           R.precision == REC_BF16 && has_line(&R, SEC_FP16_AGAINST, "forward overflow", "fc3"),
       "the FP32 run alone: fc3's activations reach 1e6, FP16 ruled out by a forward overflow");
    rec_free(&R);
    an_comparison_free(&c);
    an_free(&one);
    ok(an_compare(runs, 2, 0, &c) == 0 && runs[0].layers[2].fp32_op && runs[1].layers[2].fp32_op &&
           !runs[0].layers[1].fp32_op,
       "compare carries fc3 = FP32 op to the baseline, by name");
    use_runs(runs, 2);
    ok(recommend(runs, 2, &c, TGT_ANY, 0, &R) == 0 && !has_line(&R, SEC_FP16_AGAINST, "forward overflow", NULL),
       "with the bf16 run: no forward overflow is predicted for FP16");
    if (has_line(&R, SEC_FP16_AGAINST, "forward overflow", NULL))
        dump(&R, SEC_FP16_AGAINST);
    rec_free(&R);
    an_comparison_free(&c);
    an_free(&runs[0]);
    an_free(&runs[1]);
}

/* An FP16 run without a loss scaler (the PyTorch tracer's no_loss_scaling event) that learns
 * much less than FP32: named in the FP16 section for what it is, unhealthy, not a reason to rule
 * FP16 out (with a scaler it may work), and never evidence that FP16 works. */
static void test_no_scaler(void)
{
    cs_spec s;
    cs_spec_init(&s);
    s.nsteps = 300;
    s.writer = "ampdiag.torch (torch 2.15)";
    const char *base = write_trace("cmp-fp32", &s);
    s.precision = "fp16";
    s.final_eval = 2.2; /* the baseline's ends near 0.5 */
    s.no_scaler_zero = 0.97;
    const char *nos = write_trace("cmp-fp16-noscaler", &s);
    an_run runs[2];
    load(base, &runs[0]);
    load(nos, &runs[1]);
    const an_finding *f = an_run_finding(&runs[1], F_NO_LOSS_SCALING);
    ok(f && fig(f, "zero") == 0.97 && fig(f, "step") == 0 && an_run_unhealthy(&runs[1]) == f &&
           !an_run_finding(&runs[0], F_NO_LOSS_SCALING),
       "the no_loss_scaling event is a finding (97%% zero gradients, step 0) that makes the run unhealthy");
    an_comparison c;
    recommendation R;
    use_runs(runs, 2);
    ok(an_compare(runs, 2, 0, &c) == 0 && recommend(runs, 2, &c, TGT_ANY, 0, &R) == 0, "rules");
    const rec_item *it = rec_find_item(&R, SEC_FP16_AGAINST, R_FP16_NO_SCALER, F_NO_LOSS_SCALING);
    ok(it && it->f->s.run == 1 && has_line(&R, SEC_FP16_AGAINST, "without a loss scaler", "(97% of its traced gradient") &&
           !R.fp16.decisive && !rec_find_item(&R, SEC_FP16_AGAINST, R_GAP_OUTSIDE, F_CMP_GAP) &&
           !rec_find_item(&R, SEC_FP16_FOR, R_FP16_CLEAN, F_NONE) &&
           !rec_find_item(&R, SEC_FP16_FOR, R_FP16_CLEAN_UNSCALED, F_NONE),
       "fp16 without a scaler: named in the fp16 section, not decisive, its loss gap not held against "
       "fp16, no 'clean fp16 run' evidence (%s)", verdict_of(&R));
    if (!it || R.fp16.decisive) {
        dump(&R, SEC_FP16_AGAINST);
        dump(&R, SEC_FP16_FOR);
    }
    rec_free(&R);
    an_comparison_free(&c);
    an_free(&runs[0]);
    an_free(&runs[1]);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp: cannot create a scratch directory\n");
        return 1;
    }
    test_helpers();
    test_fp32();
    test_fp16();
    test_divergence_and_lr();
    test_compare_runs();
    test_load_many();
    test_json_escaping();
    test_baseline_sanity();
    test_eval_only();
    test_lr_too_low();
    test_lrfind();
    test_compute_column();
    test_no_scaler();
    for (int i = 0; i < npaths; i++)
        remove(paths[i]);
    rmdir(dir);
    return done_testing();
}
