/*
 * evidence.c - the tables of evidence.h: the named constants (with where each comes from) and
 * the rows of the findings (key, figures and their units, strings, constants judged against).
 */
#include "analysis/evidence.h"

#include "ampdiag.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

static const char *const unit_keys[AN_NUNITS] = {
    [U_NONE] = "none", [U_COUNT] = "count", [U_STEP] = "step", [U_SHARE] = "share",
    [U_BINADES] = "binades", [U_VALUE] = "value", [U_LOSS] = "loss", [U_RATIO] = "ratio",
    [U_LR] = "lr", [U_FACTOR] = "factor", [U_SCALE] = "loss_scale", [U_LOG2] = "log2",
    [U_NORM] = "norm", [U_FLAG] = "flag", [U_INDEX] = "index", [U_DB] = "db", [U_MS] = "ms",
    [U_BYTES] = "bytes",
};

const char *an_unit_key(an_unit u) { return (int)u >= 0 && u < AN_NUNITS ? unit_keys[u] : "?"; }

/* ------------------------------------------------------------------------------------------
 * Constants. The format facts (first block) are filled from the format table on first use.
 * ------------------------------------------------------------------------------------------ */

static an_const consts[AN_NCONSTS] = {
    [K_FP16_MAX] = {"FP16_MAX", 0, KS_G, "FP16's largest finite value"},
    [K_FP16_OVERFLOW_AT] = {"FP16_OVERFLOW_AT", 0, KS_G, "the smallest |x| FP16 rounds to inf"},
    [K_FP16_MARGIN_AT] = {"FP16_MARGIN_AT", 0, KS_G,
                          "half of FP16's largest value: one binade of headroom"},
    [K_FP16_UNDERFLOW_AT] = {"FP16_UNDERFLOW_AT", 0, KS_POW2,
                             "the largest |x| FP16 rounds to zero (half its smallest subnormal)"},
    [K_FP16_MIN_NORMAL] = {"FP16_MIN_NORMAL", 0, KS_POW2, "FP16's smallest normal value"},
    [K_FP16_SPAN_LOG2] = {"FP16_SPAN_LOG2", 0, KS_G,
                          "FP16's range in binades, smallest subnormal to largest value"},
    [K_BF16_MAX] = {"BF16_MAX", 0, KS_G, "BF16's largest finite value"},
    [K_BF16_OVERFLOW_AT] = {"BF16_OVERFLOW_AT", 0, KS_G, "the smallest |x| BF16 rounds to inf"},
    [K_BF16_MIN_NORMAL] = {"BF16_MIN_NORMAL", 0, KS_POW2, "BF16's smallest normal value"},
    [K_BF16_UNIT_ROUNDOFF] = {"BF16_UNIT_ROUNDOFF", 0, KS_POW2,
                              "BF16's unit roundoff: updates |dw/w| below it can be lost in "
                              "BF16 weights"},
    [K_SKIP_RATE_MAX] = {"SKIP_RATE_MAX", 1.0 / 500.0, KS_RATIO,
                         "skipped steps after calibration a healthy FP16 run stays under "
                         "(PyTorch GradScaler docs)"},
    [K_SKIP_MIN_COUNT] = {"SKIP_MIN_COUNT", 2, KS_INT, "... and at least this many (one skip is no rate)"},
    [K_WARMUP_MAX] = {"WARMUP_MAX", 100, KS_INT,
                      "the calibration and clip warm-up window: at most this many steps"},
    [K_WARMUP_SHARE] = {"WARMUP_SHARE", 0.2, KS_PCT, "... and at most this share of the steps"},
    [K_SCALE_INIT_LOG2] = {"SCALE_INIT_LOG2", 16, KS_INT,
                           "GradScaler's initial loss scale 2^16, when no gradient was traced"},
    [K_FLUSH_MAX] = {"FLUSH_MAX", 0.01, KS_PCT,
                     "share of a layer's non-zero gradients FP16 may flush at a loss scale"},
    [K_FLUSH_NORM_MAX] = {"FLUSH_NORM_MAX", 0.01, KS_PCT,
                          "... and of their squared norm: a prediction rules FP16 out only when "
                          "both are reached"},
    [K_SUBNORMAL_WARN] = {"SUBNORMAL_WARN", 0.01, KS_PCT,
                          "share of a layer's gradients that are FP16 subnormals at the scale"},
    [K_GRAD_RANGE_QUANTILE] = {"GRAD_RANGE_QUANTILE", 0.01, KS_PCT,
                               "the gradients' range: largest over this quantile"},
    [K_LOST_MAX] = {"LOST_MAX", 0.01, KS_PCT, "share of a layer's updates that may be lost"},
    [K_DEV_ISLAND] = {"DEV_ISLAND", 0.05, KS_PCT,
                      "activation rms deviation from the baseline that names a BF16 island"},
    [K_DEV_ISLAND_LAYERS] = {"DEV_ISLAND_LAYERS", 3, KS_INT,
                             "at most this many of the most deviating layers named"},
    [K_ISLAND_SHARE_MAX] = {"ISLAND_SHARE_MAX", 0.5, KS_PCT,
                            "FP32 islands holding more of the parameters are no rescue"},
    [K_ADAM_EPS_SAFE] = {"ADAM_EPS_SAFE", 1e-7, KS_EXP, "an AdamW eps FP16 state keeps non-zero"},
    [K_LEARNED_FRACTION] = {"LEARNED_FRACTION", 0.9, KS_PCT,
                            "a run learns when its final-window loss is below this share of its "
                            "first"},
    [K_FLAT_FRACTION] = {"FLAT_FRACTION", 0.98, KS_PCT,
                         "not below this share: the run does not learn at all"},
    [K_ZERO_GRAD_NOTE] = {"ZERO_GRAD_NOTE", 0.05, KS_PCT,
                          "the run summary names zero weight gradients from this share on"},
    [K_LEARN_SE] = {"LEARN_SE", 2, KS_INT,
                    "a run learns when its final eval loss is below its initial one by more than this "
                    "many standard errors of their per-example differences (paired), and its accuracy "
                    "above chance by more than this many binomial standard errors (over the predictions it counts)"},
    [K_PAIRED_WINSOR] = {"PAIRED_WINSOR", 0.01, KS_PCT,
                         "learning is tested on the per-example differences winsorized at this "
                         "share on each side: one example whose initial loss is huge neither "
                         "makes nor hides the decrease"},
    [K_VAL_MIN_ROWS] = {"VAL_MIN_ROWS", 10, KS_INT,
                        "a validation set of fewer rows judges nothing: comparisons are undecided"},
    [K_INPUT_SCALE_FAR] = {"INPUT_SCALE_FAR", 100, KS_G,
                           "inputs whose largest feature standard deviation is above this, or whose "
                           "root mean square is below its inverse, are far from unit scale"},
    [K_EARLY_SHARE] = {"EARLY_SHARE", 0.1, KS_PCT, "the early steps: this share of the run"},
    [K_STILL_FALLING] = {"STILL_FALLING", 0.8, KS_PCT,
                         "a run whose training loss fell over its second half at this share of its "
                         "mean rate over the whole run or more (window means, the decrease beyond "
                         "LEARN_SE standard errors) is still falling: a converging run slows down "
                         "(its second half falls at a small share of its mean rate), a run whose lr "
                         "is too low, or too short, does not"},
    [K_EARLY_MIN] = {"EARLY_MIN", 10, KS_INT, "... and at least this many"},
    [K_RATIO_EARLY_HIGH] = {"RATIO_EARLY_HIGH", 3e-2, KS_G,
                            "an early update/weight ratio above this (30x the healthy ~1e-3; AdamW's "
                            "first steps reach ~1e-2 at its default lr) is a large early update"},
    [K_DIED_SHARE] = {"DIED_SHARE", 0.5, KS_PCT,
                      "this share of a layer's live weight gradients (not 0 at its first record) "
                      "exactly 0 at its last: its units died"},
    [K_DEAD_LOSS_SHARE] = {"DEAD_LOSS_SHARE", 0.5, KS_PCT,
                           "... while the final-window training loss stays above this share of the "
                           "first (a model that fits its data has exactly-zero gradients too, at a "
                           "loss near 0)"},
    [K_LOSS_RISE] = {"LOSS_RISE", 1.5, KS_G,
                     "an early training loss above this x the first: an early explosion"},
    [K_LR_HIGH_FACTOR] = {"LR_HIGH_FACTOR", 0.1, KS_G,
                          "an lr the history shows too high: x this (tune measures the lr instead)"},
    [K_RATIO_TARGET] = {"RATIO_TARGET", 1e-3, KS_EXP,
                        "a healthy update/weight ratio (CS231n)"},
    [K_RATIO_HIGH] = {"RATIO_HIGH", 1e-2, KS_EXP, "above: lower the lr"},
    [K_RATIO_LOW] = {"RATIO_LOW", 1e-4, KS_EXP, "below: raise the lr"},
    [K_RATIO_STRONG] = {"RATIO_STRONG", 0.1, KS_G,
                        "a healthy run's ratio above this still means lower"},
    [K_LR_LOWER_MIN] = {"LR_LOWER_MIN", 0.1, KS_G, "lr x max(this, target / ratio)"},
    [K_LR_RAISE_MAX] = {"LR_RAISE_MAX", 10, KS_G, "lr x min(this, target / ratio)"},
    [K_LR_STEP] = {"LR_STEP", 0.5, KS_G, "the heuristic lr step (divergence, loss spikes)"},
    [K_LR_RAISE_FLAT_MAX] = {"LR_RAISE_FLAT_MAX", 1000, KS_G,
                             "a baseline that learns nothing: lr x min(this, target / ratio)"},
    [K_LR_DIVERGE_MIN] = {"LR_DIVERGE_MIN", 1e-3, KS_G,
                          "divergence: lr x at least this (the evidence may ask a lot)"},
    [K_SPIKE_RATE_MAX] = {"SPIKE_RATE_MAX", 1.0 / 1000, KS_RATIO, "loss spikes per step"},
    [K_SPIKE_MIN_COUNT] = {"SPIKE_MIN_COUNT", 2, KS_INT, "... and at least this many"},
    [K_LR_SWEEP_MAX] = {"LR_SWEEP_MAX", 64, KS_INT, "learning rates a sweep compares"},
    [K_CLIP_MIN_NORMS] = {"CLIP_MIN_NORMS", 20, KS_INT, "gradient norms needed for a clip value"},
    [K_CLIP_QUANTILE] = {"CLIP_QUANTILE", 0.99, KS_PCT, "the clip value's upper percentile"},
    [K_CLIP_MADS] = {"CLIP_MADS", 3, KS_INT, "... or the median plus this many robust sigmas"},
    [K_MAD_SIGMA] = {"MAD_SIGMA", 1.4826, KS_G, "1.4826 MAD estimates a standard deviation"},
    [K_AUTOCLIP_QUANTILE] = {"AUTOCLIP_QUANTILE", 0.10, KS_PCT, "AutoClip's percentile"},
    [K_CLIP_PRIOR] = {"CLIP_PRIOR", 1.0, KS_F1, "the common transformer clip value"},
    [K_CLIP_PRIOR_NEVER] = {"CLIP_PRIOR_NEVER", 0.1, KS_G,
                            "median norm below: the prior would never fire"},
    [K_CLIP_PRIOR_ALWAYS] = {"CLIP_PRIOR_ALWAYS", 10.0, KS_G,
                             "median norm above: the prior would clip every step"},
    [K_CLIP_DRIFT] = {"CLIP_DRIFT", 2.0, KS_G,
                      "the last / first 10% median outside [1/this, this]: the norm drifts"},
    [K_DRIFT_SHARE] = {"DRIFT_SHARE", 0.1, KS_PCT,
                       "the first and last share of the norm history whose medians are compared"},
    [K_NORM_SPIKE_FACTOR] = {"NORM_SPIKE_FACTOR", 10, KS_G,
                             "a gradient norm this many times its rolling median is a spike"},
    [K_NORM_SPIKE_HISTORY] = {"NORM_SPIKE_HISTORY", 20, KS_INT, "norms needed before one is"},
    [K_NORM_SPIKE_WITHIN] = {"NORM_SPIKE_WITHIN", 100, KS_INT,
                             "steps within which a loss spike follows it"},
    [K_ZCLIP_ALPHA] = {"ZCLIP_ALPHA", 0.97, KS_G, "ZClip's EMA factor"},
    [K_ZCLIP_Z] = {"ZCLIP_Z", 2.5, KS_G, "ZClip's z-score"},
    [K_NOISE_BAND_MIN] = {"NOISE_BAND_MIN", 0.01, KS_PCT, "the noise band is at least this"},
    [K_NOISE_SE] = {"NOISE_SE", 2, KS_INT, "the band is this many standard errors (or sigmas)"},
    [K_FINAL_WINDOW_SHARE] = {"FINAL_WINDOW_SHARE", 0.1, KS_PCT,
                              "the final window: this share of the steps"},
    [K_FINAL_WINDOW_MIN] = {"FINAL_WINDOW_MIN", 10, KS_INT, "... and at least this many"},
    [K_CURVE_SEGMENTS] = {"CURVE_SEGMENTS", 10, KS_INT, "segments the loss curves are compared in"},
    [K_WHATIF_MIN_FRACTION] = {"WHATIF_MIN_FRACTION", 1e-3, KS_PCT,
                               "share of a tensor a what-if format must overflow or flush to "
                               "hurt it"},
    [K_RANK_SPREAD_TOP] = {"RANK_SPREAD_TOP", 3, KS_INT,
                           "activation figures whose spread across ranks is named (the widest)"},
    [K_RECIPE_FLUSH_EXCESS] = {"RECIPE_FLUSH_EXCESS", 0.01, KS_PCT,
                               "share of a tensor's values a low-precision recipe may flush to zero beyond "
                               "what it flushes of normally distributed values (the FLUSH_MAX of FP16's loss "
                               "scale, beyond the recipe's own)"},
    [K_RECIPE_SAT_EXCESS] = {"RECIPE_SAT_EXCESS", 0.01, KS_PCT,
                             "... and saturate beyond what it saturates of normal values (the same 1%: a "
                             "saturated value is clamped to the element's largest, a bounded error the SQNR "
                             "weighs)"},
    [K_RECIPE_REF_FACTOR] = {"RECIPE_REF_FACTOR", 2, KS_G,
                             "... and more than this many times the share of normal values: a tensor loses "
                             "values at least twice as fast as well-behaved data (heuristic)"},
    [K_RECIPE_SQNR_MARGIN] = {"RECIPE_SQNR_MARGIN", 6.02, KS_G,
                              "dB a tensor's SQNR may fall below the recipe's on normal values: one bit "
                              "(20 log10 2)"},
    [K_RECIPE_KEEP_SHARE] = {"RECIPE_KEEP_SHARE", 0.15, KS_PCT,
                             "share of linear layers NVIDIA's NVFP4 pretraining recipe keeps in BF16, most of "
                             "them the last (arXiv:2509.25149)"},
    [K_STEP_TIME_FACTOR] = {"STEP_TIME_FACTOR", 1.5, KS_FACTOR,
                            "ratio of two runs' median step times above which compare names the faster of "
                            "two viable precisions: well beyond the few percent a step's time varies from run "
                            "to run on one machine, and below the 2x and more that tensor-core formats (or "
                            "their absence: fp16 emulated on a CPU) make; reported, not weighed by the "
                            "verdict"},
};

static pthread_once_t facts_once = PTHREAD_ONCE_INIT;

static void read_facts(void)
{
    const ampdiag_format_info *h = ampdiag_format_get(AMPDIAG_FP16);
    const ampdiag_format_info *b = ampdiag_format_get(AMPDIAG_BF16);
    consts[K_FP16_MAX].value = h->max_finite;
    consts[K_FP16_OVERFLOW_AT].value = h->overflow_at;
    consts[K_FP16_MARGIN_AT].value = (double)h->max_finite / 2;
    consts[K_FP16_UNDERFLOW_AT].value = h->underflow_at;
    consts[K_FP16_MIN_NORMAL].value = h->min_normal;
    /* 40: 2^-24 (emin - mantissa bits) .. 2^16 */
    consts[K_FP16_SPAN_LOG2].value = (double)(h->emax + 1 - (h->emin - h->mant_bits));
    consts[K_BF16_MAX].value = b->max_finite;
    consts[K_BF16_OVERFLOW_AT].value = b->overflow_at;
    consts[K_BF16_MIN_NORMAL].value = b->min_normal;
    consts[K_BF16_UNIT_ROUNDOFF].value = b->unit_roundoff;
}

const an_const *an_const_get(an_kid k)
{
    pthread_once(&facts_once, read_facts);
    return (int)k >= 0 && k < AN_NCONSTS ? &consts[k] : NULL;
}

double an_k(an_kid k)
{
    const an_const *c = an_const_get(k);
    return c ? c->value : NAN;
}

/* ------------------------------------------------------------------------------------------
 * The rows of the findings
 * ------------------------------------------------------------------------------------------ */

#define KS(...) {__VA_ARGS__}, sizeof((an_kid[]){__VA_ARGS__}) / sizeof(an_kid)
#define NOK {AN_NCONSTS}, 0

static const an_finding_def defs[AN_NFINDINGS] = {
    [F_NONE] = {"none", {{0}}, {0}, NOK},
    [F_NOT_COMPLETE] = {"not_complete", {{"steps", U_COUNT}}, {"status"}, NOK},
    [F_CUT_OFF] = {"cut_off", {{"steps", U_COUNT}}, {0}, NOK},
    [F_NO_LOSS_SCALING] = {"no_loss_scaling", {{"step", U_STEP}, {"zero", U_SHARE}}, {0}, NOK},
    [F_INTERRUPTED] = {"interrupted", {{"steps", U_COUNT}}, {0}, NOK},
    [F_DIVERGED] = {"diverged", {{"step", U_STEP}}, {"why"}, NOK},
    [F_LOSS_NONFINITE] = {"loss_nonfinite", {{"count", U_COUNT}, {"first_step", U_STEP}}, {0}, NOK},
    [F_FWD_NONFINITE] = {"forward_nonfinite",
                         {{"step", U_STEP}, {"values", U_COUNT}, {"inf", U_FLAG}, {"at_start", U_FLAG}},
                         {0}, NOK},
    [F_NONFINITE_WEIGHTS] = {"nonfinite_weights", {{"step", U_STEP}}, {0}, NOK},
    [F_NONFINITE_EVENT] = {"nonfinite_event", {{"step", U_STEP}, {"code", U_INDEX}, {"nan_events", U_COUNT}},
                           {"message"}, NOK},
    [F_SCALE_COLLAPSED] = {"scale_collapsed",
                           {{"scale_min", U_SCALE}, {"step", U_STEP}, {"at_min", U_FLAG},
                            {"scaler_min", U_SCALE}, {"backoffs", U_COUNT}, {"skipped", U_COUNT},
                            {"steps", U_COUNT}},
                           {0}, NOK},
    [F_SKIPS_ABOVE_LIMIT] = {"skips_above_limit",
                             {{"skipped_after", U_COUNT}, {"steps_after", U_COUNT}, {"calib", U_COUNT},
                              {"rate", U_SHARE}, {"first_step", U_STEP}},
                             {"reason"}, KS(K_SKIP_RATE_MAX, K_SKIP_MIN_COUNT)},
    [F_EVAL_NONFINITE] = {"eval_nonfinite", {{"step", U_STEP}, {"first_step", U_STEP}}, {0}, NOK},
    [F_EVAL_ONLY_NONFINITE] = {"eval_only_nonfinite",
                               {{"first_step", U_STEP}, {"event", U_FLAG}, {"nan", U_FLAG},
                                {"rows", U_FLAG}, {"rows_from", U_INDEX}, {"rows_to", U_INDEX}},
                               {0}, NOK},
    [F_ADAM_EPS_ZERO] = {"adam_eps_zero", {{"eps", U_VALUE}, {"failed", U_FLAG}, {"nan_values", U_COUNT},
                          {"fail_step", U_STEP}},
                         {0}, KS(K_FP16_UNDERFLOW_AT, K_ADAM_EPS_SAFE)},
    [F_NOT_LEARNING] = {"not_learning", {{"window", U_LOSS}, {"first", U_LOSS}}, {0},
                        KS(K_LEARNED_FRACTION)},
    [F_LEARNS_NOTHING] = {"learns_nothing", {{"window", U_LOSS}, {"first", U_LOSS}, {"accuracy", U_FLAG}},
                          {0}, KS(K_FLAT_FRACTION)},
    [F_DEAD_UNITS] = {"dead_units",
                      {{"zero_share", U_SHARE}, {"first_zero_share", U_SHARE}, {"window", U_LOSS},
                       {"first", U_LOSS}, {"died", U_SHARE}},
                      {0}, KS(K_DIED_SHARE, K_DEAD_LOSS_SHARE)},
    [F_STEPS_TOO_SMALL] = {"steps_too_small",
                           {{"ratio", U_RATIO}, {"lost_share", U_SHARE}, {"window", U_LOSS},
                            {"first", U_LOSS}, {"flat", U_FLAG}},
                           {0}, KS(K_RATIO_TARGET, K_LOST_MAX, K_LEARNED_FRACTION, K_FLAT_FRACTION)},
    [F_UPDATE_RATIO] = {"update_ratio", {{"ratio", U_RATIO}, {"layers", U_COUNT}}, {0},
                        KS(K_RATIO_LOW, K_RATIO_TARGET, K_RATIO_HIGH)},
    [F_LOSS_SPIKES] = {"loss_spikes",
                       {{"count", U_COUNT}, {"steps", U_COUNT}, {"first_step", U_STEP}, {"above", U_FLAG}},
                       {0}, KS(K_SPIKE_RATE_MAX, K_SPIKE_MIN_COUNT)},
    [F_LEARNS] = {"learns",
                  {{"initial", U_LOSS}, {"final", U_LOSS}, {"change", U_LOSS}, {"band", U_LOSS},
                   {"paired", U_FLAG}, {"examples", U_COUNT}, {"accuracy", U_SHARE}, {"chance", U_SHARE},
                   {"acc_band", U_SHARE}, {"loss_ok", U_FLAG}, {"acc_ok", U_FLAG}, {"step", U_STEP}},
                  {0}, KS(K_LEARN_SE)},
    [F_DOES_NOT_LEARN] = {"does_not_learn",
                          {{"initial", U_LOSS}, {"final", U_LOSS}, {"change", U_LOSS}, {"band", U_LOSS},
                           {"paired", U_FLAG}, {"examples", U_COUNT}, {"accuracy", U_SHARE},
                           {"chance", U_SHARE}, {"acc_band", U_SHARE}, {"loss_ok", U_FLAG},
                           {"acc_ok", U_FLAG}, {"step", U_STEP}},
                          {0}, KS(K_LEARN_SE)},
    [F_VAL_DEGENERATE] = {"validation_degenerate",
                          {{"rows", U_COUNT}, {"classes", U_COUNT}, {"val_classes", U_COUNT},
                           {"chance", U_SHARE}, {"one_class", U_FLAG}, {"few_rows", U_FLAG},
                           {"sorted", U_FLAG}},
                          {0}, KS(K_VAL_MIN_ROWS)},
    [F_INPUT_SCALE] = {"input_scale",
                       {{"rms", U_VALUE}, {"std_max", U_VALUE}, {"std_min", U_VALUE}, {"absmax", U_VALUE},
                        {"large", U_FLAG}},
                       {0}, KS(K_INPUT_SCALE_FAR)},
    [F_LR_TOO_HIGH] = {"lr_too_high",
                       {{"diverged", U_FLAG}, {"fail_step", U_STEP}, {"explosion", U_FLAG},
                        {"loss_peak", U_LOSS}, {"peak_step", U_STEP}, {"first", U_LOSS}, {"died", U_SHARE},
                        {"early_ratio", U_RATIO}, {"ratio_step", U_STEP}, {"sticks", U_FLAG},
                        {"early_steps", U_COUNT}},
                       {0}, KS(K_RATIO_EARLY_HIGH, K_DIED_SHARE, K_LOSS_RISE, K_EARLY_SHARE)},
    [F_LR_TOO_LOW] = {"lr_too_low",
                      {{"ratio_p90", U_RATIO}, {"ratio", U_RATIO}, {"learns", U_FLAG}, {"window", U_LOSS},
                       {"first", U_LOSS}, {"zero_share", U_SHARE}},
                      {0}, KS(K_RATIO_LOW, K_RATIO_TARGET)},
    [F_STILL_FALLING] = {"still_falling",
                         {{"rate_share", U_SHARE}, {"first", U_LOSS}, {"half", U_LOSS}, {"last", U_LOSS},
                          {"window", U_COUNT}, {"steps", U_COUNT}},
                         {0}, KS(K_STILL_FALLING, K_LEARN_SE)},
    [F_FWD_OVERFLOW] = {"forward_overflow", {{"absmax", U_VALUE}, {"step", U_STEP}}, {0},
                        KS(K_FP16_OVERFLOW_AT, K_FP16_MAX)},
    [F_ACT_OVERFLOW] = {"activation_overflow",
                        {{"absmax", U_VALUE}, {"step", U_STEP}, {"fp32_op", U_FLAG}, {"island", U_FLAG}},
                        {0}, KS(K_FP16_OVERFLOW_AT)},
    [F_FWD_HEADROOM_LOW] = {"forward_headroom_low",
                            {{"absmax", U_VALUE}, {"step", U_STEP}, {"headroom", U_BINADES}}, {0},
                            KS(K_FP16_MARGIN_AT, K_FP16_MAX)},
    [F_BF16_OVERFLOW] = {"bf16_overflow", {{"absmax", U_VALUE}, {"step", U_STEP}}, {0},
                         KS(K_BF16_OVERFLOW_AT)},
    [F_OVERFLOW_IN_RUN] = {"overflow_in_run_format", {{"values", U_COUNT}, {"what_if", U_FLAG}}, {0}, NOK},
    [F_LOSS_SCALE] = {"loss_scale",
                      {{"log2", U_LOG2}, {"max_grad", U_VALUE}, {"step", U_STEP}, {"from_hist", U_FLAG}},
                      {0}, KS(K_FP16_MARGIN_AT)},
    [F_FLUSH_AT_SCALE] = {"flush_at_scale",
                          {{"share", U_SHARE}, {"norm_share", U_SHARE}, {"log2", U_LOG2}}, {0},
                          KS(K_FLUSH_MAX, K_FLUSH_NORM_MAX, K_FP16_UNDERFLOW_AT)},
    [F_SUBNORMAL_AT_SCALE] = {"subnormal_at_scale", {{"share", U_SHARE}, {"log2", U_LOG2}}, {0},
                              KS(K_SUBNORMAL_WARN, K_FP16_MIN_NORMAL)},
    [F_FLUSH_UNSCALED] = {"flush_unscaled", {{"share", U_SHARE}}, {0}, KS(K_FLUSH_MAX)},
    [F_GRAD_SPAN] = {"gradient_span", {{"range_log2", U_BINADES}, {"wide", U_FLAG}}, {0},
                     KS(K_FP16_SPAN_LOG2, K_GRAD_RANGE_QUANTILE)},
    [F_LOST_UPDATES] = {"lost_updates",
                        {{"worst", U_SHARE}, {"all", U_SHARE}, {"ratio", U_RATIO}}, {0},
                        KS(K_LOST_MAX, K_BF16_UNIT_ROUNDOFF)},
    [F_LOST_IF_BF16] = {"lost_if_bf16_weights", {{"all", U_SHARE}, {"worst", U_SHARE}}, {0},
                        KS(K_LOST_MAX)},
    [F_WHATIF_HURT] = {"whatif_hurt",
                       {{"values", U_COUNT}, {"overflow", U_COUNT}, {"underflow", U_COUNT},
                        {"overflow_share", U_SHARE}, {"underflow_share", U_SHARE},
                        {"absmax", U_VALUE}, {"absmin_nz", U_VALUE}, {"reason", U_INDEX},
                        {"recipe", U_FLAG}, {"rank", U_COUNT}, {"margin", U_COUNT}},
                       {0}, KS(K_WHATIF_MIN_FRACTION)},
    [F_RECIPE_HURT] = {"recipe_hurt",
                       {{"flush_share", U_SHARE}, {"ref_flush", U_SHARE}, {"saturated_share", U_SHARE},
                        {"ref_saturated", U_SHARE}, {"subnormal_share", U_SHARE}, {"sqnr_db", U_DB},
                        {"ref_sqnr_db", U_DB}, {"rel_mse", U_RATIO}, {"max_rel_err", U_RATIO},
                        {"scale_underflow", U_SHARE}, {"disagree_share", U_SHARE}, {"worst_sqnr_db", U_DB},
                        {"worst_step", U_STEP}, {"excess", U_FACTOR}, {"reason", U_INDEX}, {"recipe", U_INDEX}},
                       {0}, KS(K_RECIPE_FLUSH_EXCESS, K_RECIPE_SAT_EXCESS, K_RECIPE_REF_FACTOR, K_RECIPE_SQNR_MARGIN)},
    [F_RECIPE_LAYER] = {"recipe_layer",
                        {{"rank", U_COUNT}, {"keep", U_FLAG}, {"excess", U_FACTOR}, {"flush_share", U_SHARE},
                         {"ref_flush", U_SHARE}, {"saturated_share", U_SHARE}, {"ref_saturated", U_SHARE},
                         {"sqnr_db", U_DB}, {"ref_sqnr_db", U_DB}, {"reason", U_INDEX}, {"recipe", U_INDEX},
                         {"layers", U_COUNT}, {"position", U_COUNT}},
                        {0}, KS(K_RECIPE_FLUSH_EXCESS, K_RECIPE_SAT_EXCESS, K_RECIPE_REF_FACTOR, K_RECIPE_SQNR_MARGIN)},
    [F_RECIPE_PLAN] = {"recipe_plan",
                       {{"recipe", U_INDEX}, {"layers", U_COUNT}, {"keep", U_COUNT}, {"keep_share", U_SHARE},
                        {"keep_last", U_COUNT}, {"hurt", U_COUNT}, {"tensors", U_COUNT}, {"nearest", U_FLAG}},
                       {0}, KS(K_RECIPE_KEEP_SHARE)},
    [F_CLIP_VALUE] = {"clip_value",
                      {{"value", U_NORM}, {"p99", U_NORM}, {"median", U_NORM}, {"mad", U_NORM},
                       {"robust", U_NORM}, {"n", U_COUNT}, {"warmup", U_COUNT}, {"n_over", U_COUNT},
                       {"share", U_SHARE}, {"p10", U_NORM}, {"over1", U_STEP}, {"over2", U_STEP},
                       {"over3", U_STEP}, {"over4", U_STEP}, {"over5", U_STEP}, {"over6", U_STEP}},
                      {0}, KS(K_CLIP_QUANTILE, K_CLIP_MADS, K_MAD_SIGMA)},
    [F_CLIP_FEW_NORMS] = {"clip_few_norms", {{"n", U_COUNT}, {"warmup", U_COUNT}}, {0},
                          KS(K_CLIP_MIN_NORMS)},
    [F_NORM_DRIFT] = {"norm_drift", {{"median_first", U_NORM}, {"median_last", U_NORM}}, {0},
                      KS(K_CLIP_DRIFT)},
    [F_NORM_SPIKE] = {"norm_spike", {{"ratio", U_FACTOR}, {"step", U_STEP}, {"loss_step", U_STEP}}, {0},
                      KS(K_NORM_SPIKE_FACTOR, K_NORM_SPIKE_WITHIN)},
    [F_CLIP_PRIOR_NEVER] = {"clip_prior_never", {{"median", U_NORM}}, {0},
                            KS(K_CLIP_PRIOR, K_CLIP_PRIOR_NEVER)},
    [F_CLIP_PRIOR_ALWAYS] = {"clip_prior_always", {{"median", U_NORM}}, {0},
                             KS(K_CLIP_PRIOR, K_CLIP_PRIOR_ALWAYS)},
    [F_CLIPPED_BY_RUN] = {"clipped_by_run", {{"clip", U_NORM}, {"clipped", U_COUNT}}, {0}, NOK},
    [F_BAD_ROWS] = {"unknown_tensor_rows", {{"rows", U_COUNT}}, {0}, NOK},
    [F_HIST_SAMPLED] = {"histograms_sampled", {{"read", U_COUNT}, {"total", U_COUNT}}, {0}, NOK},
    [F_RANK_FIRST_NONFINITE] = {"rank_first_nonfinite",
                                {{"rank", U_INDEX}, {"step", U_STEP}, {"ranks_affected", U_COUNT},
                                 {"ranks", U_COUNT}, {"identified", U_FLAG}, {"local", U_COUNT}},
                                {"phase", "local_ranks"}, NOK},
    [F_RANK_REPLICA_DIVERGENCE] = {"rank_replica_divergence",
                                   {{"first_step", U_STEP}, {"rank", U_INDEX}, {"vs_rank", U_INDEX},
                                    {"delta_mean", U_VALUE}, {"rel_delta_rms", U_SHARE}, {"steps", U_COUNT},
                                    {"ranks", U_COUNT}},
                                   {0}, NOK},
    [F_RANK_REDUCED_GRAD_MISMATCH] = {"rank_reduced_grad_mismatch",
                                      {{"first_step", U_STEP}, {"rank", U_INDEX}, {"vs_rank", U_INDEX},
                                       {"value", U_NONE}, {"vs_value", U_NONE}, {"rel", U_SHARE},
                                       {"steps", U_COUNT}, {"record", U_FLAG}, {"reduced", U_FLAG}},
                                      {"what"}, NOK},
    [F_RANK_SKIP_DISAGREEMENT] = {"rank_skip_disagreement",
                                  {{"rank", U_INDEX}, {"steps", U_COUNT}, {"first_step", U_STEP},
                                   {"ranks", U_COUNT}},
                                  {0}, NOK},
    [F_RANK_STOPPED_EARLY] = {"rank_stopped_early",
                              {{"rank", U_INDEX}, {"last_step", U_STEP}, {"stop_step", U_STEP},
                               {"others_step", U_STEP}, {"event", U_FLAG}, {"others_complete", U_FLAG}},
                              {"status", "message"}, NOK},
    [F_RANK_MISSING] = {"rank_missing",
                        {{"rank", U_INDEX}, {"world_size", U_COUNT}, {"read", U_COUNT}, {"records", U_COUNT},
                         {"first_step", U_STEP}, {"count", U_COUNT}, {"params", U_COUNT}, {"trace", U_FLAG},
                         {"shard", U_FLAG}, {"sum", U_FLAG}},
                        {0}, NOK},
    [F_RANK_SPREAD] = {"rank_spread",
                       {{"step", U_STEP}, {"min", U_NONE}, {"max", U_NONE}, {"argmin", U_INDEX},
                        {"argmax", U_INDEX}, {"rel", U_SHARE}, {"typical", U_SHARE}, {"steps", U_COUNT},
                        {"tensor", U_FLAG}},
                       {"figure", "words"}, KS(K_RANK_SPREAD_TOP)},
    [F_CMP_MODEL] = {"model_differs", {{0}}, {"model", "base_model"}, NOK},
    [F_CMP_DATA] = {"data_differs", {{0}}, {"data", "base_data"}, NOK},
    [F_CMP_SEED] = {"seed_differs", {{"seed", U_INDEX}, {"base_seed", U_INDEX}}, {0}, NOK},
    [F_CMP_STEPS] = {"steps_differ",
                     {{"steps", U_COUNT}, {"base_steps", U_COUNT}, {"planned", U_COUNT}, {"base_planned", U_COUNT}},
                     {0}, NOK},
    [F_CMP_LR] = {"lr_differs", {{"lr", U_LR}, {"base_lr", U_LR}}, {0}, NOK},
    [F_CMP_OPTIMIZER] = {"optimizer_differs", {{0}}, {"optimizer", "base_optimizer"}, NOK},
    [F_CMP_BATCH] = {"batch_differs", {{"batch", U_COUNT}, {"base_batch", U_COUNT}}, {0}, NOK},
    [F_CMP_LAYERS] = {"layers_unmatched",
                      {{"matched", U_COUNT}, {"layers", U_COUNT}, {"base_layers", U_COUNT}}, {0}, NOK},
    [F_CMP_CUT_OFF] = {"cut_off", {{"steps", U_COUNT}}, {0}, NOK},
    [F_CMP_INTERRUPTED] = {"interrupted", {{"steps", U_COUNT}}, {0}, NOK},
    [F_CMP_BASELINE_NOT_FP32] = {"baseline_not_fp32", {{0}}, {"path"}, NOK},
    [F_CMP_NO_FP32] = {"no_fp32_trace", {{0}}, {"path"}, NOK},
    [F_CMP_GAP] = {"loss_gap",
                   {{"eval", U_FLAG}, {"step", U_STEP}, {"base", U_LOSS}, {"value", U_LOSS},
                    {"rel", U_SHARE}, {"band", U_SHARE}, {"outside", U_FLAG}, {"curve_rel", U_SHARE},
                    {"curve_from", U_STEP}, {"curve_to", U_STEP}, {"paired", U_FLAG}, {"examples", U_COUNT},
                    {"paired_band", U_SHARE}},
                   {0}, KS(K_NOISE_BAND_MIN, K_NOISE_SE)},
    [F_CMP_DEVIATION] = {"activation_deviation",
                         {{"rel", U_SHARE}, {"steps", U_COUNT}, {"rank", U_COUNT}}, {0},
                         KS(K_DEV_ISLAND, K_DEV_ISLAND_LAYERS)},
};

const an_fid an_cause_order[] = {
    F_ADAM_EPS_ZERO, F_EVAL_ONLY_NONFINITE, F_FWD_OVERFLOW, F_FWD_NONFINITE, F_NONFINITE_WEIGHTS,
    F_LOSS_NONFINITE, F_DIVERGED, F_SCALE_COLLAPSED, F_SKIPS_ABOVE_LIMIT, F_EVAL_NONFINITE,
    F_DEAD_UNITS, F_STEPS_TOO_SMALL, F_LEARNS_NOTHING, F_FLUSH_UNSCALED, F_LOST_UPDATES, F_CUT_OFF,
    F_INTERRUPTED, F_NONE,
};

/* --fail-on keeps the findings asked for as bits of a 128-bit set (recommend.h) */
_Static_assert(AN_NFINDINGS <= 128, "more findings than --fail-on's set holds");

const an_finding_def *an_finding_def_get(an_fid id)
{
    return (int)id >= 0 && id < AN_NFINDINGS ? &defs[id] : &defs[F_NONE];
}

an_fid an_finding_parse(const char *key)
{
    for (int i = 1; i < AN_NFINDINGS; i++)
        if (defs[i].key && strcmp(defs[i].key, key) == 0)
            return (an_fid)i;
    return F_NONE;
}

int an_finding_fig(an_fid id, const char *name)
{
    const an_finding_def *d = an_finding_def_get(id);
    for (int i = 0; i < AN_MAXFIG && d->fig[i].name; i++)
        if (strcmp(d->fig[i].name, name) == 0)
            return i;
    return -1;
}

an_finding *an_finding_add(an_finding_list *l, an_fid id, int run)
{
    an_finding *f = vec_add(l);
    if (!f)
        return NULL;
    f->id = id;
    f->s = (an_subject){run, -1, -1, -1, -1, -1, -1};
    for (int i = 0; i < AN_MAXFIG; i++)
        f->v[i] = NAN;
    return f;
}

const an_finding *an_finding_next(const an_finding_list *l, an_fid id, int run,
                                  const an_finding *prev)
{
    size_t i = prev ? (size_t)(prev - l->v) + 1 : 0;
    for (; i < l->n; i++)
        if (l->v[i].id == id && (run < 0 || l->v[i].s.run == run))
            return &l->v[i];
    return NULL;
}

const an_finding *an_finding_find(const an_finding_list *l, an_fid id, int run)
{
    return an_finding_next(l, id, run, NULL);
}
