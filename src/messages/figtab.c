/*
 * figtab.c - the words of the headline figures (one name, one definition each), of the
 * comparison's figures, of the glossary, and of what a what-if format would do to a tensor
 * (messages.h).
 */
#include "analysis/recipe.h"
#include "messages/messages_internal.h"
#include "util/util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct fig_words {
    const char *name, *definition;
} fig_words;

#define WINDOW "the last {K.FINAL_WINDOW_SHARE} of the steps, at least {K.FINAL_WINDOW_MIN}"

static const fig_words figs[AN_NFIGS] = {
    [FIG_STEPS] = {"steps recorded", "the trace's step records: optimizer steps run, skipped ones included"},
    [FIG_LOSS_FIRST] = {"first training loss", "the training loss of the first recorded step"},
    [FIG_LOSS_LAST] = {"final training loss (last step)", "the training loss of the last recorded step"},
    [FIG_LOSS_MIN] = {"lowest training loss", "the smallest finite training loss of any step"},
    [FIG_LOSS_WINDOW] = {"final-window training loss",
                         "the mean training loss over the final window (" WINDOW "); infinite when a loss in "
                         "it is not finite"},
    [FIG_EVAL_LOSS] = {"final eval loss", "the loss of the last evaluation on the validation rows"},
    [FIG_EVAL_SE] = {"final eval loss's standard error",
                     "the standard error of the final eval loss, the mean over the validation examples"},
    [FIG_EVAL_METRIC] = {"final eval accuracy",
                         "the metric of the last evaluation (an accuracy for classification)"},
    [FIG_SCALE_INIT] = {"initial loss scale", "the loss scale of the first step"},
    [FIG_SCALE_MIN] = {"lowest loss scale",
                       "the smallest loss scale a step ran with or the scaler's last backoff left"},
    [FIG_SCALE_FINAL] = {"final loss scale", "the loss scale after the last step"},
    [FIG_BACKOFFS] = {"loss-scale backoffs",
                      "times the dynamic scaler halved the scale on non-finite gradients"},
    [FIG_GROWTHS] = {"loss-scale growths", "times the dynamic scaler doubled the scale"},
    [FIG_OVERFLOWS_AT_MIN] = {"overflows at the minimum loss scale",
                              "non-finite steps the scaler could not answer: it was at its minimum"},
    [FIG_SKIPPED] = {"skipped steps", "steps whose update was skipped (non-finite gradients)"},
    [FIG_SKIP_SHARE] = {"skipped-step share", "skipped steps over steps recorded"},
    [FIG_SKIPPED_AFTER] = {"skipped steps after calibration",
                           "skipped steps after the calibration window (the first min({K.WARMUP_MAX}, "
                           "{K.WARMUP_SHARE} of the) steps, while a dynamic scaler finds its level)"},
    [FIG_NONFINITE_EVENTS] = {"NaN/inf events",
                              "nan_forward, inf_forward, nan_backward and inf_backward events (first NaN/inf "
                              "of a pass, with its layer)"},
    [FIG_LOSS_SPIKES] = {"loss spikes",
                         "steps whose loss jumps above the rolling median by 6 robust sigmas (src/monitor/)"},
    [FIG_DIVERGENCE] = {"divergence step", "the step training diverged from (the divergence rule of src/monitor/)"},
    [FIG_NONFINITE_ACT] = {"first NaN/inf activations",
                           "the first step, and the first layer in forward order, whose activation record "
                           "holds NaN/inf, and that layer's NaN/inf values over the traced steps"},
    [FIG_NONFINITE_WEIGHTS] = {"first NaN/inf weights", "the first layer whose weight record holds NaN/inf"},
    [FIG_FP16_HEADROOM] = {"FP16 headroom",
                           "the least headroom of the activations and weights of the layers run in 16 bits "
                           "below FP16's largest value, in binades: log2({K.FP16_MAX} / largest |x|); "
                           "'overflowed' where an FP16 run held inf"},
    [FIG_FP16_ACT_HEADROOM] = {"FP16 activation headroom",
                               "the FP16 headroom of the activations alone (binades below {K.FP16_MAX})"},
    [FIG_FP16_FLUSH] = {"FP16 flush share without loss scaling",
                        "the largest share of a layer's non-zero gradient values (activation and weight "
                        "gradients of the layers run in 16 bits) that FP16 would flush to zero (|x| <= "
                        "{K.FP16_UNDERFLOW_AT}) without loss scaling: from the what-if counts of a run that "
                        "had no loss scale; not applicable to an FP16 run, whose values were FP16 already"},
    [FIG_FP16_FLUSH_AT_SCALE] = {"FP16 flush share at the run's loss scale",
                                 "the same share of a run (not FP16) that had a loss scale, as it held the "
                                 "values: multiplied by its scale"},
    [FIG_FP16_WGRAD_FLUSH] = {"FP16 weight-gradient flush share",
                              "the largest share of a layer's non-zero weight-gradient values, every layer, "
                              "that FP16 would flush to zero as the run held them"},
    [FIG_ZERO_GRAD] = {"zero weight-gradient share",
                       "the largest share of a layer's finite weight-gradient values that are exactly 0"},
    [FIG_LOST] = {"lost-update share",
                  "the share of the non-zero updates rounded away in the run's own weight storage: "
                  "fl(w + dw) == w"},
    [FIG_LOST_IF_FP16] = {"lost-update share with FP16 weights",
                          "the share of the non-zero updates FP16 weights without FP32 master copies would lose"},
    [FIG_LOST_IF_BF16] = {"lost-update share with BF16 weights",
                          "the share of the non-zero updates BF16 weights without FP32 master copies would lose"},
    [FIG_UPDATE_RATIO] = {"update/weight ratio",
                          "the median over layers of each layer's median ||dw|| / ||w|| over the traced steps "
                          "(norm layers left out); without update records, the median of the steps' own ratio; "
                          "healthy near {K.RATIO_TARGET}"},
    [FIG_STEP_TIME] = {"median step time",
                       "the median over the steps of each step's wall-clock time as the writer measured it "
                       "(/steps wall_ms: ampdiag run from the step's start to its record, ampdiag.torch "
                       "between its step() calls), on the machine that ran it; traced steps, slower, are "
                       "among them (a few in ten with the default cadence)"},
    [FIG_PEAK_MEMORY] = {"peak memory",
                         "the run's peak memory as its writer measured it, with what it measured (the trace's "
                         "peak_memory_source): on a CUDA device torch.cuda.max_memory_allocated, the tensors "
                         "PyTorch allocated since the tracer started (not its cache nor other processes'); on "
                         "a CPU the process's peak resident set size since it started (getrusage ru_maxrss: "
                         "the interpreter, the libraries and the data included), which says little about the "
                         "precision; compared only between runs that measured the same"},
};

static const fig_words cfigs[MSG_NCFIGS] = {
    [MSG_LOSS_GAP] = {"loss gap",
                      "(run - baseline) / |baseline| of the final eval loss at the last evaluation both runs "
                      "have in the final window, else of the final-window training loss of the steps both have"},
    [MSG_CURVE_GAP] = {"loss-curve gap",
                       "the largest relative gap of the training loss's means over {K.CURVE_SEGMENTS} equal "
                       "segments of the steps both runs have"},
    [MSG_NOISE_BAND] = {"noise band",
                        "how far a loss gap may be from 0 by chance, relative to the baseline's loss: "
                        "{K.NOISE_SE} sigma over runs of the baseline's configuration with other seeds when "
                        "given; else the larger of {K.NOISE_BAND_MIN} and {K.NOISE_SE} standard errors of the "
                        "baseline's final eval loss over its validation examples; else of its final-window "
                        "training loss"},
};

static void expand_plain(char *buf, size_t n, const char *t)
{
    msg_src x;
    memset(&x, 0, sizeof x);
    x.run = -1;
    msg_expand(buf, n, t, &x);
}

const char *msg_fig_name(an_figid id) { return (int)id >= 0 && id < AN_NFIGS ? figs[id].name : "?"; }
void msg_fig_definition(char *buf, size_t n, an_figid id)
{
    expand_plain(buf, n, (int)id >= 0 && id < AN_NFIGS ? figs[id].definition : "?");
}
const char *msg_cfig_name(msg_cfig id) { return (int)id >= 0 && id < MSG_NCFIGS ? cfigs[id].name : "?"; }
void msg_cfig_definition(char *buf, size_t n, msg_cfig id)
{
    expand_plain(buf, n, (int)id >= 0 && id < MSG_NCFIGS ? cfigs[id].definition : "?");
}

void msg_noise_band(char *buf, size_t n, const an_comparison *c)
{
    char band[48], t[400];
    msg_pct(band, sizeof band, c->band);
    if (c->band_from_seeds)
        snprintf(t, sizeof t, "{K.NOISE_SE} sigma of the baseline's configuration over %zu seeds", c->band_seeds);
    else if (c->band_from_eval)
        snprintf(t, sizeof t, "the larger of {K.NOISE_BAND_MIN} and {K.NOISE_SE} standard errors of the "
                 "baseline's final eval loss over its validation examples");
    else
        snprintf(t, sizeof t, "the larger of {K.NOISE_BAND_MIN} and {K.NOISE_SE} standard errors of the "
                 "baseline's final-window training loss");
    char src[400];
    expand_plain(src, sizeof src, t);
    size_t np = 0, ex = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; c->gap && i < c->nruns; i++)
        if (c->gap[i].paired) {
            np++;
            ex = c->gap[i].examples;
            lo = fmin(lo, c->gap[i].band);
            hi = fmax(hi, c->gap[i].band);
        }
    if (!np) {
        snprintf(buf, n, "+-%s (%s)", band, src);
        return;
    }
    char a[48], b[48], pt[400], pe[480];
    msg_pct(a, sizeof a, lo);
    msg_pct(b, sizeof b, hi);
    snprintf(pt, sizeof pt, "paired: the larger of {K.NOISE_BAND_MIN} and {K.NOISE_SE} standard errors of the "
             "differences of each run's %zu validation examples from the baseline's%s", ex,
             c->band_from_seeds ? ", and at least the band over seeds" : "");
    expand_plain(pe, sizeof pe, pt);
    if (lo == hi)
        snprintf(buf, n, "+-%s (%s); unpaired +-%s (%s)", a, pe, band, src);
    else
        snprintf(buf, n, "+-%s..%s by run (%s); unpaired +-%s (%s)", a, b, pe, band, src);
}

/* "fc1.act" */
static void where(char *buf, size_t n, const an_run *r, const an_figval *v)
{
    snprintf(buf, n, "%s.%s", an_layer_name(r, v->layer), msg_kind_abbrev(v->kind));
}

void msg_fig_value(char *buf, size_t n, const an_run *r, an_figid id)
{
    an_figval v = an_fig(r, id);
    const an_fig_row *row = an_fig_row_get(id);
    char w[160], a[48];
    if (v.na) {
        snprintf(buf, n, "n/a (held in FP16)");
        return;
    }
    if (isnan(v.v)) {
        snprintf(buf, n, "-");
        return;
    }
    switch (id) {
    case FIG_FP16_HEADROOM:
    case FIG_FP16_ACT_HEADROOM:
        where(w, sizeof w, r, &v);
        if (isinf(v.v))
            snprintf(buf, n, "%s overflowed (inf)", w);
        else
            snprintf(buf, n, "%s %+.1f", w, v.v);
        return;
    case FIG_FP16_FLUSH:
    case FIG_FP16_FLUSH_AT_SCALE:
        where(w, sizeof w, r, &v);
        msg_pct(a, sizeof a, v.v);
        snprintf(buf, n, "%s %s", w, a);
        return;
    case FIG_UPDATE_RATIO:
        snprintf(buf, n, "%.2g%s", v.v, v.kind < 0 ? " (steps)" : "");
        return;
    default:
        break;
    }
    switch (row ? row->unit : U_NONE) {
    case U_SHARE: msg_pct(buf, n, v.v); break;
    case U_SCALE: msg_scale(buf, n, v.v); break;
    case U_COUNT:
    case U_STEP: snprintf(buf, n, "%.0f", v.v); break;
    case U_MS: msg_duration(buf, n, v.v); break;
    case U_BYTES: msg_bytes(buf, n, v.v); break;
    default: fmt_num(buf, n, v.v, 4); break;
    }
}

/* ------------------------------------------------------------------------------------------
 * The glossary
 * ------------------------------------------------------------------------------------------ */

static const msg_term terms[] = {
    {"act, agrad, weight, wgrad, update",
     "the five tensor kinds a trace records per layer: activations (the layer's output), activation "
     "gradients (the gradient flowing back into them), weights, weight gradients, and the optimizer's "
     "update of the weights"},
    {"binade", "a factor of 2: the values between 2^k and 2^(k+1); headroom and ranges count binades"},
    {"headroom", "how many binades a tensor's largest value lies below a format's largest value (overflow "
                 "headroom), or its smallest non-zero value above the format's smallest normal (underflow "
                 "headroom); negative means beyond the format"},
    {"overflow", "a finite value too large for a format: it becomes inf (NaN in E4M3)"},
    {"flush to zero, underflow", "a non-zero value too small for a format: it rounds to zero (FP16: |x| <= "
                                 "{K.FP16_UNDERFLOW_AT})"},
    {"subnormal", "a value below a format's smallest normal, kept with fewer significant bits"},
    {"what-if counts", "what rounding the traced values to another format would do (overflow, flush to "
                       "zero, subnormal), counted on the values as the run held them: one FP32 run predicts "
                       "FP16, BF16, FP8 and every other format of the table"},
    {"loss scale", "the factor the loss is multiplied by before the backward pass, so that small FP16 "
                   "gradients do not flush to zero; the gradients are divided by it before the update"},
    {"backoff, growth", "a dynamic loss scaler halves its scale when gradients overflow (the step is "
                        "skipped) and doubles it after a run of finite steps"},
    {"skipped step", "a step whose update was not applied because its gradients held inf or NaN"},
    {"calibration window", "the first steps (min({K.WARMUP_MAX}, {K.WARMUP_SHARE} of the steps)) while a "
                           "dynamic scaler finds its level from 2^{K.SCALE_INIT_LOG2}; skips there are expected"},
    {"final window", "the last {K.FINAL_WINDOW_SHARE} of the steps (at least {K.FINAL_WINDOW_MIN}): its mean "
                     "training loss is the run's final-window training loss"},
    {"lost update", "an update dw that changes nothing: fl(w + dw) == w in the format the weights are stored "
                    "in; FP32 master weights keep small updates a 16-bit copy would lose"},
    {"master weights", "an FP32 copy of the weights the optimizer updates, rounded to 16 bits for the "
                       "forward and backward passes (autocast)"},
    {"autocast", "mixed precision as PyTorch runs it: GEMMs and most elementwise ops in 16 bits, the loss, "
                 "softmax and norms' statistics in FP32"},
    {"FP32 island", "a layer kept in FP32 inside a 16-bit run (--fp32-layers), the remedy for one that "
                    "overflows FP16"},
    {"update/weight ratio", "||dw|| / ||w|| of a step's update: about {K.RATIO_TARGET} is healthy; much "
                            "below, the lr is too low (or updates are lost); much above, too high"},
    {"MAD", "the median absolute deviation from the median; {K.MAD_SIGMA} x MAD estimates a standard "
            "deviation robustly (outliers do not move it)"},
    {"loss spike", "a loss far above its recent median (6 robust sigmas over the last 64 losses)"},
    {"divergence", "20 updated steps in a row whose loss is non-finite or exploded (100 x the first), or "
                   "skipped in a row with the loss scale at its floor"},
    {"noise band", "how far a loss gap may be from 0 by chance (see the figure of that name)"},
    {"delayed scaling", "Transformer Engine's FP8 recipe: each tensor is multiplied by a scale from the "
                        "largest |x| of earlier steps (its amax history) before it is cast to FP8"},
    {"E4M3, E5M2", "the OCP FP8 formats: E4M3 (max 448, no inf) for activations and weights, E5M2 (max "
                   "57344) for gradients"},
    {"block scaling", "a low-precision format whose values share a scale per block (MX: 32 values, a "
                      "power-of-two scale; NVFP4: 16 values, an E4M3 scale; FP8 blockwise: 1x128 or 128x128): "
                      "the /quant rows count what it would do to each traced tensor"},
    {"recipe", "a low-precision training recipe (mxfp8, mxfp8:rceil, nvfp4, fp8-block, fp8-current, "
               "fp8-delayed): a scheme, its element formats and the blocks of each GEMM operand; --recipe "
               "shows the tensors it would hurt and which layers should stay BF16"},
    {"SQNR", "signal to quantisation noise ratio, 10 log10(sum x^2 / sum (x - q(x))^2) in dB, q(x) the "
             "value after a round trip through the format: about 6 dB per bit of precision"},
    {"normal values", "the reference a recipe's effect on a tensor is judged against: what the same scheme "
                      "does to a 256 x 256 matrix of N(0, 1) values; a tensor that flushes or saturates more "
                      "than {K.RECIPE_REF_FACTOR} times as many and {K.RECIPE_FLUSH_EXCESS} more of its values, "
                      "or whose SQNR is more than {K.RECIPE_SQNR_MARGIN} dB lower, is hurt"},
    {"finding", "what the analysis found in a trace or a comparison: an id, its subject (run, layer, tensor "
                "kind, steps), figures with units, and the constants it was judged against (ampdiag help "
                "rules lists them)"},
    {"decision", "what the rules advise changing (precision, FP32 layers, loss scale, lr, clip, optimizer "
                 "state, master weights, warm-up), with a confidence: observed in a run, measured by a "
                 "re-run, or a hypothesis from a heuristic, and the findings behind it"},
};

const msg_term *msg_glossary(size_t *n)
{
    *n = sizeof terms / sizeof terms[0];
    return terms;
}

void msg_term_definition(char *buf, size_t n, const msg_term *t) { expand_plain(buf, n, t->definition); }

/* ------------------------------------------------------------------------------------------
 * What a what-if format would do to a tensor (F_WHATIF_HURT)
 * ------------------------------------------------------------------------------------------ */

static void pow2(char *buf, size_t n, double x) { snprintf(buf, n, "2^%d", (int)floor(log2(x))); }

static double fv(const an_finding *f, const char *name)
{
    int i = an_finding_fig(f->id, name);
    return i >= 0 ? f->v[i] : NAN;
}

/* The clause after the share: why the format hurts the tensor. */
static void hurt_reason(char *buf, size_t n, const an_finding *f, const an_whatif_col *c, const char *fmt)
{
    char lo[24], hi[24], sub[24];
    double absmax = fv(f, "absmax"), absmin = fv(f, "absmin_nz");
    double span = log2(c->max_finite / c->min_subnormal);
    pow2(lo, sizeof lo, absmin);
    pow2(hi, sizeof hi, absmax);
    pow2(sub, sizeof sub, c->min_subnormal);
    switch ((an_hurt_reason)fv(f, "reason")) {
    case AN_HURT_RANGE:
        snprintf(buf, n, "its dynamic range %s..%s (%.1f binades) is wider than %s's %s..%g (%.1f)", lo, hi,
                 log2(absmax / absmin), fmt, sub, c->max_finite, span);
        break;
    case AN_HURT_ABOVE:
        snprintf(buf, n, "its values reach %s, above %s's largest %g", hi, fmt, c->max_finite);
        break;
    case AN_HURT_BELOW:
        snprintf(buf, n, "its values reach down to %s, below %s's smallest subnormal %s", lo, fmt, sub);
        break;
    case AN_HURT_AMAX:
        snprintf(buf, n, "its amax grew past the largest of the history (the scale is set from earlier "
                 "steps), up to %s", hi);
        break;
    case AN_HURT_MARGIN:
        snprintf(buf, n, "the negative margin scales the history's largest amax beyond %s's largest %g", fmt,
                 c->max_finite);
        break;
    default:
        snprintf(buf, n, "its values (%s..%s) lie more than %.1f binades below the history's largest amax, "
                 "which sets the scale", lo, hi, span);
        break;
    }
}

void msg_hurt_why(char *buf, size_t n, const an_run *r, const an_finding *f)
{
    if (!r || f->s.col < 0 || f->s.col >= r->nwcol) {
        snprintf(buf, n, "?");
        return;
    }
    const an_whatif_col *c = &r->wcol[f->s.col];
    char fmt[AMPDIAG_TRACE_FORMAT_NAME_LEN], why[320];
    size_t k = 0;
    for (; c->format[k] && k + 1 < sizeof fmt; k++)
        fmt[k] = (char)(c->format[k] >= 'a' && c->format[k] <= 'z' ? c->format[k] - 'a' + 'A' : c->format[k]);
    fmt[k] = 0;
    an_hurt_reason reason = (an_hurt_reason)fv(f, "reason");
    int over = reason == AN_HURT_ABOVE || reason == AN_HURT_AMAX || reason == AN_HURT_MARGIN;
    const char *scaling = c->key.scaling == AMPDIAG_SCALING_NONE      ? "unscaled"
                          : c->key.scaling == AMPDIAG_SCALING_DELAYED ? "even with delayed scaling"
                                                                      : "even scaled";
    hurt_reason(why, sizeof why, f, c, fmt);
    snprintf(buf, n, "%.3g%% of values would %s in %s %s: %s",
             100.0 * (over ? fv(f, "overflow_share") : fv(f, "underflow_share")),
             over ? "overflow" : "flush to zero", fmt, scaling, why);
}

/* ------------------------------------------------------------------------------------------
 * What-if sections
 * ------------------------------------------------------------------------------------------ */

void msg_whatif_header(char *buf, size_t n, const an_run *r, int col, int recipe, int none)
{
    char min[32], t[400];
    msg_const(min, sizeof min, K_WHATIF_MIN_FRACTION);
    if (recipe) {
        char hist[64] = "";
        if (r->fp8_history >= 0)
            snprintf(hist, sizeof hist, ", amax history %d, margin %d", r->fp8_history, r->fp8_margin);
        snprintf(t, sizeof t, "fp8 recipe (Transformer Engine delayed scaling%s; e4m3 activations and weights, "
                 "e5m2 gradients) would hurt:", hist);
    } else {
        snprintf(t, sizeof t, "%s (unscaled) would hurt most:", col >= 0 && col < r->nwcol ? r->wcol[col].name : "?");
    }
    snprintf(buf, n, "%s%s%s%s", t, none ? " nothing (under " : "", none ? min : "", none ? " of any tensor)" : "");
}

void msg_whatif_more(char *buf, size_t n, size_t more) { snprintf(buf, n, "(and %zu more tensors)", more); }

void msg_whatif_row(char *buf, size_t n, const an_run *r, const an_finding *f)
{
    snprintf(buf, n, "%-12s %-16s %.3g%% overflow, %.3g%% flush to zero", an_layer_name(r, f->s.layer),
             ampdiag_kind_name(f->s.kind), 100.0 * fv(f, "overflow_share"), 100.0 * fv(f, "underflow_share"));
}

void msg_whatif_hidden(char *buf, size_t n, const char *columns)
{
    if (!columns || !*columns)
        snprintf(buf, n, "%s", "");
    else
        snprintf(buf, n, "the traces also hold what-if counts of %s: --what-if fp8 (or all, or the names) "
                 "shows them", columns);
}

/* ------------------------------------------------------------------------------------------
 * Recipe sections
 * ------------------------------------------------------------------------------------------ */

void msg_recipes_counted(char *buf, size_t n, const char *names, int quant)
{
    if (names && *names)
        snprintf(buf, n, "the traces counted what the low-precision recipes %s would do: --recipe NAME shows the "
                 "tensors one would hurt and which layers should stay BF16%s", names,
                 quant ? "; --what-if all (or a /quant column's name) the figures of each layer and kind" : "");
    else if (quant)
        snprintf(buf, n, "the traces hold block-scaled what-if rows (/quant): --what-if all (or a column's name) "
                 "shows the figures of each layer and kind");
    else
        snprintf(buf, n, "%s", "");
}

void msg_recipe_not_counted(char *buf, size_t n, int recipe, const char *counted)
{
    int delayed = recipe == AN_RECIPE_FP8_DELAYED;
    snprintf(buf, n, "%s: not counted in the trace%s%s (ampdiag run %s%s counts it)", an_recipe_name(recipe),
             counted && *counted ? "; it counted " : "", counted && *counted ? counted : "",
             delayed ? "--fp8-amax-history N" : "--whatif ", delayed ? "" : an_recipe_name(recipe));
}

void msg_recipe_header(char *buf, size_t n, int recipe, int none)
{
    char fx[32], sx[32], fac[32], db[32];
    msg_const(fx, sizeof fx, K_RECIPE_FLUSH_EXCESS);
    msg_const(sx, sizeof sx, K_RECIPE_SAT_EXCESS);
    msg_const(fac, sizeof fac, K_RECIPE_REF_FACTOR);
    msg_const(db, sizeof db, K_RECIPE_SQNR_MARGIN);
    snprintf(buf, n, "%s (%s) would hurt%s (flush more than %s, saturate more than %s of the values beyond what it "
             "does to normal values and %s times as many, or an SQNR more than %s dB below theirs)%s",
             an_recipe_name(recipe), an_recipe_what(recipe), none ? " nothing" : "", fx, sx, fac, db, none ? "" : ":");
}

void msg_recipe_plan_header(char *buf, size_t n, int recipe)
{
    snprintf(buf, n, "plan for %s: each linear layer by the worst of its activations, activation gradients and "
             "weights, ranked by how far their error goes beyond the limits:", an_recipe_name(recipe));
}

const char *msg_recipe_reason_key(int reason)
{
    static const char *const keys[] = {"ok", "saturate", "flush", "sqnr"};
    return reason >= 0 && reason < 4 ? keys[reason] : "?";
}
