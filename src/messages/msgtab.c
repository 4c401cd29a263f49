/*
 * msgtab.c - the words of every finding and rule item (messages.h): one row each.
 *
 * Styles of "{name:style}": g g2 g3 g4 (%g, %.2g, ...), f0 f1 f2 (%.1f, ...), int, pct (a share
 * as a percentage: "0%", "1.5e-05%", "12.3%"), spct (signed), pc0 pc2 pc3 (%.0f%%, %.2g%%,
 * %.3g%% of the share), pint (the share x 100 as an integer: "P99"), pctc (the complement's
 * percentage), scale ("2^16"), pow2 (the number is an exponent: "2^16"), l2 (log2, %.1f),
 * layer / q (a layer index: its name, "(global)" / "?" for none), kind / kab (a tensor kind:
 * "activation gradients" / "agrad"), run (a run index: its label), fmt (a format: "FP16"),
 * target, event (an event code's name). Without a style: shares as pct, loss scales as scale,
 * steps and counts as integers, the rest %g.
 */
#include "messages/messages_internal.h"

#define EVAL_WHERE "{?event: ({?nan:NaN}{!nan:inf} in {layer} activations{?rows:, validation rows {rows_from}-{rows_to}})}"
#define METRIC "{?eval:final eval loss}{!eval:final-window training loss}"
#define RATIO_SRC "{?layers:median of the per-layer medians over {layers} layers}{!layers:median of the steps' ratios}"
#define SPAN "the gradients span 2^{range_log2:f1} (largest / the {K.GRAD_RANGE_QUANTILE} quantile), more than FP16's 2^{K.FP16_SPAN_LOG2}"
/* a recipe's reference (what it does to normal values) in brackets, where it has one */
#define RECIPE_REF(name) "{#ref_sqnr_db: (normal values {" #name ":pct})}"
#define KEEPS "keeps the largest gradient ({max_grad:g3}, {layer} {kind}, step {step}) 1 binade under {K.FP16_MAX}"

const msg_row msg_finding_rows[AN_NFINDINGS] = {
    [F_NONE] = {NULL, F_NONE, {0}, "", NULL},
    [F_NOT_COMPLETE] = {NULL, F_NONE, {0}, "{run}: status '{status}', {steps} steps", NULL},
    [F_CUT_OFF] = {NULL, F_NONE, {0}, "{run} was cut off (status 'running'): its numbers cover {steps} steps", NULL},
    [F_NO_LOSS_SCALING] = {NULL, F_NONE, {0},
                           "{run}: FP16 ran without a loss scaler (recorded at step {step}): gradients below 2^-24 "
                           "flush to zero{?zero:; {zero:pc1} of the traced gradient values were zero}",
                           "FP16 without a loss scaler"},
    [F_INTERRUPTED] = {NULL, F_NONE, {0}, "{run}: interrupted after {steps} steps", NULL},
    [F_DIVERGED] = {NULL, F_NONE, {0}, "{run}: diverged from step {step}{?why:: {why}}", "diverges from step {step}"},
    [F_LOSS_NONFINITE] = {NULL, F_NONE, {0}, "{run}: non-finite loss at {count} steps, first at step {first_step}",
                          "non-finite loss from step {first_step}"},
    [F_FWD_NONFINITE] = {NULL, F_NONE, {0},
                         "{run}: {?inf:inf}{!inf:NaN} in {layer} activations from step {step} (first in forward "
                         "order; {values} non-finite activation values over the traced steps)",
                         "{?inf:inf}{!inf:NaN} in {layer} activations from step {step}"},
    [F_NONFINITE_WEIGHTS] = {NULL, F_NONE, {0},
                             "{run}: {layer} weights hold NaN/inf from step {step} on (an update made them so)", NULL},
    [F_NONFINITE_EVENT] = {NULL, F_NONE, {0}, "{run}: {code:event} at step {step} ({message})", NULL},
    [F_SCALE_COLLAPSED] = {NULL, F_NONE, {0},
                           "{run}: loss scale collapses to {scale_min:scale} at step {step}{?at_min:, the scaler's "
                           "minimum {scaler_min:scale}} ({backoffs} backoffs, {skipped} skipped steps of {steps})",
                           "the loss scale collapses to {scale_min:scale}"},
    [F_SKIPS_ABOVE_LIMIT] = {NULL, F_NONE, {0},
                             "{run}: {skipped_after} of {steps_after} steps skipped after the first {calib} "
                             "(calibration): {rate:pc3}, more than {K.SKIP_RATE_MAX}; first at step {first_step} "
                             "({?reason:{reason}}{!reason:no reason recorded})",
                             "{rate:pc2} of steps skipped after calibration"},
    [F_EVAL_NONFINITE] = {NULL, F_NONE, {0}, "{run}: eval loss at step {step} is not finite (first at step {first_step})",
                          NULL, .covered = {F_EVAL_ONLY_NONFINITE}},
    [F_EVAL_ONLY_NONFINITE] = {NULL, F_NONE, {0},
                               "{run}: eval loss not finite from step {first_step}" EVAL_WHERE
                               " while its training stays finite (no NaN/inf in its loss or activation records)",
                               NULL},
    [F_ADAM_EPS_ZERO] = {NULL, F_NONE, {0},
                         "{run}: AdamW eps {eps:g} with FP16 optimizer state rounds to 0 (FP16 flushes |x| <= "
                         "{K.FP16_UNDERFLOW_AT}): zero-gradient steps give 0/0 = NaN{?nan_values: (this run has "
                         "NaN values)}; use eps >= {K.ADAM_EPS_SAFE} or FP32 state",
                         NULL},
    [F_NOT_LEARNING] = {NULL, F_NONE, {0},
                        "{run} does not learn enough: its final-window training loss {window:g4} is not below "
                        "{K.LEARNED_FRACTION} of its first training loss, {first:g4}",
                        NULL, .covered = {F_LEARNS_NOTHING, F_STEPS_TOO_SMALL}},
    [F_LEARNS_NOTHING] = {NULL, F_NONE, {0},
                          "{run} does not learn at all: its final-window training loss {window:g4} is not below "
                          "{K.FLAT_FRACTION} of its first training loss, {first:g4}",
                          NULL},
    [F_DEAD_UNITS] = {NULL, F_NONE, {0},
                      "{run}: {zero_share:pct} of {layer}'s weight-gradient values are exactly 0 at its last "
                      "record (at its first {first_zero_share:pct}): {died:pct} of those that were live died, "
                      "at least {K.DIED_SHARE}, while its training loss stays at {window:g3} from {first:g3}: "
                      "units died",
                      NULL},
    [F_STEPS_TOO_SMALL] = {NULL, F_NONE, {0},
                           "{run} does not learn and its update/weight ratio {ratio:g3} is below the ~{K.RATIO_TARGET} "
                           "target: its steps are too small",
                           NULL},
    [F_UPDATE_RATIO] = {NULL, F_NONE, {0}, "{run}: update/weight ratio {ratio:g3} (" RATIO_SRC "; target ~{K.RATIO_TARGET})",
                        NULL},
    [F_LOSS_SPIKES] = {NULL, F_NONE, {0}, "{run}: {count} loss spikes in {steps} steps, first at step {first_step}", NULL},
    [F_LEARNS] = {NULL, F_NONE, {0},
                  "{run} learns: eval loss {final:g4} at step {step} from {initial:g4} at the start ({change:+g3}, "
                  "beyond the {?paired:paired }noise {band:g2} = {K.LEARN_SE} standard errors{?paired: of the "
                  "differences of its {examples} validation examples}){#accuracy:, accuracy {accuracy:pct} "
                  "above chance {chance:pct} by more than {acc_band:pct}}",
                  NULL},
    [F_DOES_NOT_LEARN] = {NULL, F_NONE, {0},
                          "{run} does not learn: eval loss {final:g4} at step {step} from {initial:g4} at the "
                          "start ({change:+g3}){!loss_ok:, not lower by more than the {?paired:paired }noise "
                          "{band:g2} ({K.LEARN_SE} standard errors{?paired: of the differences of its {examples} "
                          "validation examples})}{!acc_ok:{#accuracy:, accuracy {accuracy:pct} not above chance "
                          "{chance:pct} by more than {acc_band:pct}}}",
                          "it does not learn (eval loss {final:g3} from {initial:g3})"},
    [F_VAL_DEGENERATE] = {NULL, F_NONE, {0},
                          "{run}: its validation set judges nothing: {?one_class:every one of its {rows:int} "
                          "rows is of one class (of {classes:int}){?sorted:, the labels being sorted in "
                          "file order}}{!one_class:{rows:int} rows, fewer than {K.VAL_MIN_ROWS}}",
                          "the validation set is degenerate"},
    [F_INPUT_SCALE] = {NULL, F_NONE, {0},
                       "{run}: its inputs are far from unit scale: {?large:a feature's standard deviation "
                       "reaches {std_max:g3} (largest |x| {absmax:g3}), more than {K.INPUT_SCALE_FAR}}"
                       "{!large:their root mean square is {rms:g3}, below 1/{K.INPUT_SCALE_FAR}}",
                       NULL},
    [F_LR_TOO_HIGH] = {NULL, F_NONE, {0},
                       "{run}: its lr is too high: {?diverged:it diverges from step {fail_step:int}}"
                       "{!diverged:{?explosion:its training loss explodes early (to {loss_peak:g3} at step "
                       "{peak_step:int}, from {first:g3}){?sticks: and then sticks}}{#died:{?explosion:; }units "
                       "died after large early updates ({died:pct} of {layer}'s live weight gradients went to 0; "
                       "its update/weight ratio reached {early_ratio:g2} at step {ratio_step:int}, above "
                       "{K.RATIO_EARLY_HIGH})}}",
                       "the lr is too high"},
    [F_LR_TOO_LOW] = {NULL, F_NONE, {0},
                      "{run}: its lr is too low: its gradients live, and its update/weight ratio is small "
                      "throughout (90th percentile {ratio_p90:g2}, below {K.RATIO_LOW}) while it "
                      "{?learns:learns slowly (final-window training loss {window:g4} from {first:g4})}"
                      "{!learns:does not learn}",
                      NULL},
    [F_STILL_FALLING] = {NULL, F_NONE, {0},
                         "{run}: its training loss still falls at the end: over its second half at "
                         "{rate_share:pct} of its mean rate over the run ({first:g4} in its first {window:int} "
                         "steps, {half:g4} around the middle, {last:g4} in its last {window:int}; a converging "
                         "run slows below {K.STILL_FALLING})",
                         "it is still falling at the end"},
    [F_FWD_OVERFLOW] = {NULL, F_NONE, {0},
                        "{run}: {layer} {kind} reach {absmax:g4} (2^{absmax:l2}) at step {step}, above FP16's "
                        "{K.FP16_MAX}",
                        NULL},
    [F_ACT_OVERFLOW] = {NULL, F_NONE, {0}, "{run}: {layer} activations reach {absmax:g4} at step {step}", NULL,
                        .covered = {F_FWD_OVERFLOW}},
    [F_FWD_HEADROOM_LOW] = {NULL, F_NONE, {0},
                            "{run}: {layer} {kind} reach {absmax:g4} at step {step}: less than 1 binade of FP16 "
                            "headroom ({headroom:f2} binades below {K.FP16_MAX})",
                            NULL, .covered = {F_FWD_OVERFLOW}},
    [F_BF16_OVERFLOW] = {NULL, F_NONE, {0},
                         "{run}: {layer} {kind} reach {absmax:g4} at step {step}: beyond BF16's {K.BF16_MAX:g3}", NULL},
    [F_OVERFLOW_IN_RUN] = {NULL, F_NONE, {0}, "{run}: {layer} forward values overflow {fmt}{?what_if: (what-if)}",
                           NULL, .covered = {F_FWD_OVERFLOW}},
    [F_LOSS_SCALE] = {NULL, F_NONE, {0}, "{run}: loss scale {log2:pow2} " KEEPS, NULL},
    [F_FLUSH_AT_SCALE] = {NULL, F_NONE, {0},
                          "{run}: at loss scale {log2:pow2}, {share:pct} of {layer} {kind} flush to zero in FP16"
                          "{#norm_share: ({norm_share:pct} of their squared norm)}",
                          NULL},
    [F_SUBNORMAL_AT_SCALE] = {NULL, F_NONE, {0},
                              "{run}: at loss scale {log2:pow2}, {share:pct} of {layer} {kind} are FP16 subnormals",
                              NULL},
    [F_FLUSH_UNSCALED] = {NULL, F_NONE, {0},
                          "{run}: without loss scaling {share:pct} of {layer} {kind} flush to zero in FP16", NULL},
    [F_GRAD_SPAN] = {NULL, F_NONE, {0},
                     "{run}: the gradients span 2^{range_log2:f1} (largest / the {K.GRAD_RANGE_QUANTILE} quantile), "
                     "{?wide:more than}{!wide:within} FP16's 2^{K.FP16_SPAN_LOG2}",
                     NULL},
    [F_LOST_UPDATES] = {NULL, F_NONE, {0},
                        "{run}: {all:pct} of non-zero updates rounded away in its weight storage (worst layer "
                        "{layer:q}: {worst:pct})",
                        NULL},
    [F_LOST_IF_BF16] = {NULL, F_NONE, {0},
                        "{run}: {all:pct} of updates would be lost with BF16 weights without FP32 master weights "
                        "(worst layer {layer:q}: {worst:pct})",
                        NULL},
    [F_WHATIF_HURT] = {NULL, F_NONE, {0}, "{layer} {kind_id}: {hurt_why}", NULL},
    [F_RECIPE_HURT] = {NULL, F_NONE, {0},
                       "{layer} {kind} ({colname}) {reason_words}: flushed {flush_share:pct}" RECIPE_REF(ref_flush)
                       ", saturated {saturated_share:pct}" RECIPE_REF(ref_saturated) ", subnormal "
                       "{subnormal_share:pct}{#sqnr_db:, SQNR {sqnr_db:f1} dB{#ref_sqnr_db: ({ref_sqnr_db:f1})}, its "
                       "worst step {worst_step} {worst_sqnr_db:f1} dB}{?scale_underflow:; the scales of "
                       "{scale_underflow:pct} of its blocks underflow}{?disagree_share:; columnwise and rowwise "
                       "blocking decode {disagree_share:pct} of the values differently}",
                       NULL},
    [F_RECIPE_LAYER] = {NULL, F_NONE, {0},
                        "{rank}. {layer}: {?keep:stay BF16, its {kind} ({colname}) {reason_words}}{!keep:take {recipe:recipe} "
                        "(worst: {kind}, {colname})}; flushed {flush_share:pct}" RECIPE_REF(ref_flush) ", saturated {saturated_share:pct}"
                        RECIPE_REF(ref_saturated) "{#sqnr_db:, SQNR {sqnr_db:f1} dB{#ref_sqnr_db: ({ref_sqnr_db:f1})}}",
                        NULL},
    [F_RECIPE_PLAN] = {NULL, F_NONE, {0},
                       "{recipe:recipe}: {keep} of {layers} linear layers ({keep_share:pct}) should stay BF16{?keep:, "
                       "{keep_last} of them among the last {keep}}; it would hurt {hurt} of the {tensors} tensors it "
                       "quantises{?nearest: (the trace lacks some of its blocks or formats: the nearest it counted stand "
                       "in, each named)} (NVIDIA's NVFP4 recipe keeps about {K.RECIPE_KEEP_SHARE} of the "
                       "linear layers in BF16, most of them the last)",
                       NULL},
    [F_CLIP_VALUE] = {NULL, F_NONE, {0},
                      "{run}: clip {value:g3} = max(P{K.CLIP_QUANTILE:pint} {p99:g3}, median {median:g3} + "
                      "{K.CLIP_MADS} x {K.MAD_SIGMA} x MAD {mad:g3} = {robust:g3}) of {n} gradient norms: would "
                      "clip {n_over} steps ({share:pct})",
                      NULL},
    [F_CLIP_FEW_NORMS] = {NULL, F_NONE, {0},
                          "{run}: {n} finite, unskipped gradient norms after the first {warmup} steps "
                          "({K.CLIP_MIN_NORMS} needed for a clip value)",
                          NULL},
    [F_NORM_DRIFT] = {NULL, F_NONE, {0},
                      "{run}: the gradient norm drifts (median {median_first:g3} in the first {K.DRIFT_SHARE} of "
                      "the history, {median_last:g3} in the last {K.DRIFT_SHARE})",
                      NULL},
    [F_NORM_SPIKE] = {NULL, F_NONE, {0},
                      "{run}: a gradient-norm spike {ratio:g3}x the rolling median at step {step} is followed by a "
                      "loss spike at step {loss_step}",
                      NULL},
    [F_CLIP_PRIOR_NEVER] = {NULL, F_NONE, {0},
                            "{run}: the common transformer clip {K.CLIP_PRIOR} would never fire (median norm "
                            "{median:g3})",
                            NULL},
    [F_CLIP_PRIOR_ALWAYS] = {NULL, F_NONE, {0},
                             "{run}: the common transformer clip {K.CLIP_PRIOR} would clip every step (median norm "
                             "{median:g3})",
                             NULL},
    [F_CLIPPED_BY_RUN] = {NULL, F_NONE, {0}, "{run} clipped at {clip:g}: {clipped} steps clipped", NULL},
    [F_BAD_ROWS] = {NULL, F_NONE, {0}, "{run}: {rows} tensor records name an unknown layer or kind (ignored)", NULL},
    [F_HIST_SAMPLED] = {NULL, F_NONE, {0},
                        "{run}: {read} of {total} histogram records read (evenly spaced blocks); fractions come "
                        "from that sample",
                        NULL},
    [F_RANK_FIRST_NONFINITE] = {NULL, F_NONE, {0},
                                "{run}: NaN/inf first on rank {rank:int}, at step {step} in {layer} {kind} ({phase})"
                                "{!identified:, a tensor the ranks share after the reduction: its records do not show "
                                "which rank it came from; {?local:ranks whose own activations or their gradients held "
                                "NaN/inf: {local_ranks}}{!local:no rank's own activations or their gradients held "
                                "NaN/inf}}; {ranks_affected} of {ranks} ranks hold non-finite records",
                                "NaN/inf first on rank {rank:int} at step {step}"},
    [F_RANK_REPLICA_DIVERGENCE] = {NULL, F_NONE, {0},
                                   "{run}: the replicas of {layer} weights differ across ranks from step {first_step} "
                                   "({steps} steps): rank {rank:int}'s mean differs from rank {vs_rank:int}'s by "
                                   "{delta_mean:g3}, its rms by {rel_delta_rms:spct}; replicated weights must stay the "
                                   "same on every rank",
                                   "replicas of {layer} differ from step {first_step}"},
    [F_RANK_REDUCED_GRAD_MISMATCH] = {NULL, F_NONE, {0},
                                      "{run}: {?record:{layer} {kind} differ}{!record:{what} differs} across ranks from step "
                                      "{first_step} ({steps} steps): rank {rank:int} {?record:mean }{value:g4}, rank "
                                      "{vs_rank:int} {vs_value:g4}{?record: (rms {rel:spct})}; every rank must hold "
                                      "the same{?reduced: after the gradient reduction}",
                                      NULL},
    [F_RANK_SKIP_DISAGREEMENT] = {NULL, F_NONE, {0},
                                  "{run}: rank {rank:int} skipped steps that not all {ranks} ranks skipped ({steps}, "
                                  "the first at step {first_step}): the ranks' loss scalers decided apart",
                                  NULL},
    [F_RANK_STOPPED_EARLY] = {NULL, F_NONE, {0},
                              "{run}: rank {rank:int} stopped first, at step {stop_step}{?event: ({message})}"
                              "{!event: (its trace ends there, status '{status}')}{?others_complete:; the other "
                              "ranks completed}{#others_step:; the other ranks went on to step {others_step}}",
                              "rank {rank:int} stopped first, at step {stop_step}"},
    [F_RANK_MISSING] = {NULL, F_NONE, {0},
                        "{?trace:{run}: no trace of rank {rank:int} of {world_size} ({read} ranks read): the merged "
                        "run holds the others' records}{?shard:{run}: rank {rank:int}'s shard of {layer} {kind} is "
                        "missing at {records} steps from step {first_step}: those steps' records of the layer are "
                        "left out of the merged run}{?sum:{run}: the shards of {layer} weights hold {count} values "
                        "at step {first_step}, not the layer's {params} parameters: a shard is missing}",
                        NULL},
    [F_RANK_SPREAD] = {NULL, F_NONE, {0},
                       "{run}: {words}{?tensor: of {layer} {kind}} spreads across ranks by {rel:pct} at step {step} "
                       "({min:g4} on rank {argmin:int}, {max:g4} on rank {argmax:int}; {typical:pct} on average "
                       "over {steps} steps)",
                       NULL},
    [F_CMP_MODEL] = {NULL, F_NONE, {0},
                     "{run}: model '{model}' differs from the baseline's '{base_model}': layers are matched by "
                     "name and the loss gap mixes model and precision",
                     NULL},
    [F_CMP_DATA] = {NULL, F_NONE, {0},
                    "{run}: data '{data}' differs from the baseline's '{base_data}': losses are not comparable", NULL},
    [F_CMP_SEED] = {NULL, F_NONE, {0},
                    "{run}: seed {seed:int} differs from the baseline's {base_seed:int}: the gap includes "
                    "seed-to-seed noise",
                    NULL},
    [F_CMP_STEPS] = {NULL, F_NONE, {0},
                     "{run}: {steps} steps recorded, the baseline {base_steps}: curves are compared over the steps "
                     "both have",
                     NULL},
    [F_CMP_LR] = {NULL, F_NONE, {0},
                  "{run}: lr {lr:g} differs from the baseline's {base_lr:g}: its gap measures the learning rate as "
                  "well as the precision",
                  NULL},
    [F_CMP_OPTIMIZER] = {NULL, F_NONE, {0}, "{run}: optimizer {optimizer} differs from the baseline's {base_optimizer}",
                         NULL},
    [F_CMP_BATCH] = {NULL, F_NONE, {0}, "{run}: batch {batch} differs from the baseline's {base_batch}", NULL},
    [F_CMP_LAYERS] = {NULL, F_NONE, {0},
                      "{run}: {matched} of its {layers} layers match the baseline's {base_layers} by name; the "
                      "others are reported but not compared",
                      NULL},
    [F_CMP_CUT_OFF] = {NULL, F_NONE, {0}, "{run}: cut off (status still 'running'): {steps} steps up to its last flush",
                       NULL},
    [F_CMP_INTERRUPTED] = {NULL, F_NONE, {0}, "{run}: interrupted after {steps} steps", NULL},
    [F_CMP_BASELINE_NOT_FP32] = {NULL, F_NONE, {0},
                                 "the baseline is {run} ({path}), not an FP32 trace: gaps are measured against it",
                                 NULL},
    [F_CMP_NO_FP32] = {NULL, F_NONE, {0},
                       "no FP32 trace given: the baseline is {run} ({path}); gaps are measured against it", NULL},
    [F_CMP_GAP] = {NULL, F_NONE, {0},
                   "{run}: " METRIC " {value:g4} vs {base:g4} in {run2} ({rel:spct}), {?outside:outside}"
                   "{!outside:within} the noise band +-{band:pct}",
                   NULL},
    [F_CMP_DEVIATION] = {NULL, F_NONE, {0},
                         "{run}: {layer} activations differ from {run2}'s by {rel:pct} (median over {steps} steps)",
                         NULL},
};

#define I(id, k, f, ...) [id] = {k, f, __VA_ARGS__}

const msg_row msg_item_rows[REC_NMIDS] = {
    I(R_NONE, "finding", F_NONE, {0}, "", NULL),
    I(R_TARGET_NO_BF16, "target_no_bf16", F_NONE, {"target"},
      "target {target:target} has no BF16 tensor cores (BF16 needs Ampere sm80 or newer)", "no BF16 on {target:target}"),
    I(R_BASELINE_ADAM_EPS, "baseline_adam_eps", F_ADAM_EPS_ZERO, {0},
      "the FP32 baseline {run} fails (from step {fail_step}) because its AdamW state is held in FP16, where eps "
      "{eps:g} rounds to 0 (FP16 flushes |x| <= {K.FP16_UNDERFLOW_AT}) and a zero gradient gives 0/0 = NaN: a "
      "format cause no learning rate fixes; keep the optimizer state in FP32 (--optim-state fp32) or use eps >= "
      "{K.ADAM_EPS_SAFE}, then compare again", NULL),
    I(R_BASELINE_DIVERGES, "baseline_diverges", F_DIVERGED, {0},
      "the FP32 baseline {run} diverges too (from step {step}): the learning rate, not the format, is the "
      "problem; fix it first (see LR)", NULL),
    I(R_BASELINE_LOSS_NONFINITE, "baseline_loss_nonfinite", F_LOSS_NONFINITE, {0},
      "the FP32 baseline {run} has a non-finite loss (first at step {first_step}): fix that first (see LR)", NULL),
    I(R_EVERY_RUN_FAILS, "every_run_fails", F_NONE, {0},
      "every run diverges or has a non-finite loss, and no FP32 run shows whether the format is the cause: run "
      "FP32 (ampdiag sweep) or lower the lr", NULL),
    I(R_FIRST_MODEL, "first_model_differs", F_CMP_MODEL, {0},
      "first: {run} is a run of model '{model}', the baseline {run2} of '{base_model}': its comparison mixes the "
      "model difference with the precision", NULL),
    I(R_FIRST_DATA, "first_data_differs", F_CMP_DATA, {0},
      "first: {run} ran on data '{data}', the baseline {run2} on '{base_data}': their losses are not comparable",
      NULL),
    I(R_FIRST_NOT_LEARNING, "first_baseline_does_not_learn", F_LEARNS_NOTHING,
      {"small", "dead", "ratio", "lost", "dead_layer", "accuracy"},
      "first: the FP32 baseline {run} does not learn: its final-window training loss {window:g4} is not below "
      "{K.FLAT_FRACTION} of its first training loss, {first:g4}{?accuracy: (its eval accuracy is chance-level or "
      "close)}{?small:; the cause: its steps are too small (update/weight ratio {ratio:g3}, target "
      "~{K.RATIO_TARGET}{#lost:; {lost:pct} of its updates round away even in FP32 weights}): the lr is too "
      "low}{?dead:; the cause: units died ({dead_layer:layer}'s weight gradients are mostly 0): the lr is too "
      "high}; a 16-bit run that matches it shows little: the format findings below hold for these values, but "
      "fix the training first (see LR)", NULL),
    I(R_FIRST_STEPS, "first_steps_differ", F_CMP_STEPS, {0},
      "first: {run} was planned for {planned:int} steps, the baseline {run2} for {base_planned:int}: their losses "
      "are not comparable", NULL),
    I(R_FIRST_SEED, "first_seed_differs", F_CMP_SEED, {0},
      "first: {run} has seed {seed:int}, the baseline {run2} {base_seed:int}, and no band over seeds was measured: "
      "the gap would mix seed-to-seed noise with the precision (give runs of one seed, or of the baseline's "
      "configuration with several seeds)", NULL),
    I(R_FIRST_VALIDATION, "first_validation_degenerate", F_VAL_DEGENERATE, {0},
      "first: {run}'s validation set judges nothing: {?one_class:every one of its {rows:int} rows is of one class "
      "(of {classes:int}){?sorted:, the labels being sorted in file order (shuffle the file or give /x_val and "
      "/y_val)}}{!one_class:{rows:int} rows, fewer than {K.VAL_MIN_ROWS}}: no loss or accuracy of it says "
      "whether a precision works", NULL),
    I(R_FIRST_NO_LEARNING, "first_baseline_does_not_learn_eval", F_DOES_NOT_LEARN, {0},
      "first: the baseline {run} does not learn: its eval loss {final:g4} at step {step} is not below its "
      "initial {initial:g4} by more than the {?paired:paired }noise {band:g2}{!acc_ok:{#accuracy:, and its "
      "accuracy {accuracy:pct} is not above chance {chance:pct} by more than {acc_band:pct}}}: there is nothing "
      "to hold a 16-bit run against", NULL),
    I(R_FIRST_STILL_FALLING, "first_baseline_still_falling", F_STILL_FALLING, {0},
      "first: the baseline {run} learns but is not trained to its best: its training loss still falls at the end "
      "(over its second half at {rate_share:pct} of its mean rate, {half:g4} -> {last:g4}; a converging run slows "
      "below {K.STILL_FALLING}): its lr is likely too low (or its run too short), by an amount no single run "
      "measures; a 16-bit run held against it shows only what holds at this lr", NULL),
    I(R_CAUSE_LR_HIGH, "cause_lr_too_high", F_LR_TOO_HIGH, {0},
      "likely cause: the lr is too high: {?diverged:{run} diverges from step {fail_step:int}}{!diverged:"
      "{?explosion:its training loss explodes early (to {loss_peak:g3} at step {peak_step:int}, from "
      "{first:g3}){?sticks: and then sticks}}{#died:{?explosion:; }units died after large early updates "
      "({died:pct} of {layer}'s live weight gradients went to 0; the update/weight ratio reached "
      "{early_ratio:g2} at step {ratio_step:int}, above {K.RATIO_EARLY_HIGH})}}", NULL),
    I(R_CAUSE_LR_LOW, "cause_lr_too_low", F_LR_TOO_LOW, {0},
      "likely cause: the lr is too low: the gradients live and the update/weight ratio stays small (90th "
      "percentile {ratio_p90:g2}, below {K.RATIO_LOW})", NULL),
    I(R_CAUSE_STEPS_SMALL, "cause_steps_too_small", F_STEPS_TOO_SMALL, {0},
      "likely cause: the steps are too small (update/weight ratio {ratio:g3}, target ~{K.RATIO_TARGET}): the lr "
      "is too low", NULL),
    I(R_CAUSE_INPUTS, "cause_inputs", F_INPUT_SCALE, {0},
      "possible cause: the inputs are far from unit scale ({?large:a feature's standard deviation reaches "
      "{std_max:g3}}{!large:root mean square {rms:g3}}): standardise them (--standardize on)", NULL),
    I(R_CAUSE_DEAD, "cause_dead_units", F_DEAD_UNITS, {0},
      "likely cause: units died ({died:pct} of {layer}'s live weight gradients went to 0): the lr is too high or "
      "the initialisation poor", NULL),
    I(R_CAUSE_VALIDATION, "cause_validation", F_VAL_DEGENERATE, {0},
      "the validation set judges nothing ({rows:int} rows{?one_class:, one class}): learning cannot be measured",
      NULL),
    I(R_INPUTS_FIRST, "first_standardize_inputs", F_INPUT_SCALE, {0},
      "first: {run}'s inputs are far from unit scale ({?large:a feature's standard deviation reaches "
      "{std_max:g3}, largest |x| {absmax:g3}, more than {K.INPUT_SCALE_FAR}}{!large:root mean square {rms:g3}, "
      "below 1/{K.INPUT_SCALE_FAR}}) and the trouble starts at the first layer: standardise the inputs "
      "(--standardize on) before any precision or lr remedy", NULL),
    I(R_INPUTS_WARN, "inputs_far_from_unit_scale", F_INPUT_SCALE, {0},
      "{run}'s inputs are far from unit scale ({?large:a feature's standard deviation reaches {std_max:g3}, "
      "largest |x| {absmax:g3}}{!large:root mean square {rms:g3}}): nothing goes wrong with them here, but "
      "standardised inputs (--standardize on) leave every format more headroom", NULL),
    I(R_FP16_FWD_OVERFLOW, "fp16_forward_overflow", F_FWD_OVERFLOW, {0},
      "forward overflow: {layer} {kind} reach {absmax:g4} (2^{absmax:l2}) at step {step} in {run}, above FP16's "
      "{K.FP16_MAX} (>= {K.FP16_OVERFLOW_AT} rounds to inf); loss scaling cannot help the forward pass. Layers "
      "reaching {K.FP16_OVERFLOW_AT}: {all_layers}",
      "forward overflow: {layer} {kind} reach {absmax:g3} > {K.FP16_MAX}"),
    I(R_FP16_HEADROOM, "fp16_headroom_low", F_FWD_HEADROOM_LOW, {0},
      "{layer} {kind} reach {absmax:g4} at step {step} in {run}: less than 1 binade of FP16 headroom "
      "({headroom:f2} binades below {K.FP16_MAX})", NULL),
    I(R_FP16_ADAM_EPS, "fp16_run_adam_eps", F_ADAM_EPS_ZERO, {0},
      "{run} fails because its AdamW state is held in FP16, where eps {eps:g} rounds to 0 and zero gradients give "
      "0/0 = NaN (the first cause: the NaN in its layers follows from it); re-run with --optim-state fp32 to judge "
      "FP16 autocast itself", NULL),
    I(R_FP16_FWD_NONFINITE, "fp16_forward_nonfinite", F_FWD_NONFINITE, {"above", "cannot_fix"},
      "{run}: {?inf:inf}{!inf:NaN} in {layer} activations from step {step} (first in forward order; {values} "
      "non-finite activation values){?above:: the forward overflow above}{?cannot_fix:: a forward overflow, which "
      "loss scaling cannot fix}",
      "{?inf:inf}{!inf:NaN} in {layer} activations from step {step}"),
    I(R_FP16_COLLAPSE, "fp16_scale_collapsed", F_SCALE_COLLAPSED, {0},
      "{run}: loss scale collapses to {scale_min:scale} at step {step}{?at_min:, the scaler's minimum "
      "{scaler_min:scale}} ({backoffs} backoffs, {skipped} skipped steps of {steps})",
      "the loss scale collapses to {scale_min:scale}"),
    I(R_FP16_SKIPS, "fp16_skips_above_limit", F_SKIPS_ABOVE_LIMIT, {0},
      "{run}: {skipped_after} of {steps_after} steps skipped after the first {calib} (calibration): {rate:pc3}, "
      "more than {K.SKIP_RATE_MAX}; first at step {first_step} ({?reason:{reason}}{!reason:no reason recorded})",
      "{rate:pc2} of steps skipped after calibration"),
    I(R_FP16_LOSS_NONFINITE, "fp16_loss_nonfinite", F_LOSS_NONFINITE, {"have_fp32"},
      "{run}: non-finite loss at {count} steps, first at step {first_step}{?have_fp32: where FP32 stays finite}",
      "non-finite loss from step {first_step}"),
    I(R_FP16_DIVERGES, "fp16_diverges", F_DIVERGED, {"have_fp32"},
      "{run}: diverges from step {step}{?have_fp32: where FP32 does not}", "diverges from step {step}"),
    I(R_EVAL_OVERFLOW, "eval_overflow", F_EVAL_ONLY_NONFINITE, {"fmt", "base_eval"},
      "{run}: eval loss not finite from step {first_step}" EVAL_WHERE " while its training stays finite (no NaN/inf "
      "in its loss or activation records) and {baseline}'s eval loss is {base_eval:g4}: validation inputs "
      "overflow {fmt:fmt} in the forward pass, beyond the range the training batches had; loss scaling cannot "
      "help the forward pass",
      "eval loss not finite from step {first_step}: validation inputs overflow {fmt:fmt}"),
    I(R_EVAL_FIRST, "first_eval_overflow", F_EVAL_ONLY_NONFINITE, {"fmt", "base_eval"},
      "first: {run}'s evaluation overflows {fmt:fmt} from step {first_step}" EVAL_WHERE " while its training stays "
      "finite and {baseline}'s eval loss is {base_eval:g4}: the validation data holds values beyond "
      "{fmt:fmt}'s range that the training batches never had; {fmt:fmt} is ruled out for this data (check the "
      "validation data's preprocessing)", NULL),
    I(R_FP16_CLEAN, "fp16_clean", F_NONE, {"skipped", "skipped_after", "scale_init", "scale_final"},
      "{run}: no NaN/inf in the forward pass, {skipped:int} skipped steps ({skipped_after:int} after "
      "calibration), loss scale {scale_init:scale} -> {scale_final:scale}", NULL),
    I(R_FP16_CLEAN_UNSCALED, "fp16_clean_unscaled", F_NONE, {0},
      "{run}: no NaN/inf in the forward pass, no skipped steps (no loss scaling)", NULL),
    I(R_FP16_NO_SCALER, "fp16_no_scaler", F_NO_LOSS_SCALING, {0},
      "{run} ran FP16 without a loss scaler{?zero: ({zero:pc1} of its traced gradient values were zero)}: "
      "gradients below 2^-24 flush to zero, so it is no evidence that fp16 works; run fp16 with dynamic "
      "loss scaling (a GradScaler), or bf16",
      "no loss scaler"),
    I(R_GAP_OUTSIDE, "loss_gap_outside_band", F_CMP_GAP, {"bf16", "pure"},
      "{run}: " METRIC " {value:g4} vs {base:g4} in {run2} (+{rel:pct}), outside the noise band "
      "+-{band:pct}{?pure: (the lost updates above)}",
      "loss +{rel:pct} vs FP32, outside the noise band{?bf16: +-{band:pct}}"),
    I(R_GAP_WITHIN, "loss_gap_within_band", F_CMP_GAP, {0},
      "{run}: " METRIC " {value:g4} vs {base:g4} ({rel:spct}), within the noise band +-{band:pct}", NULL),
    I(R_FLUSH_PREDICTED, "flush_predicted", F_FLUSH_AT_SCALE, {"healthy"},
      "predicted from {run}: at loss scale {log2:pow2}, {share:pct} of {layer} {kind} flush to zero in FP16"
      "{#norm_share: ({norm_share:pct} of their squared norm)}; not decisive: {?healthy:an FP16 run was run and "
      "is healthy, and what it did decides}{!healthy:the flushed values carry less than {K.FLUSH_NORM_MAX} of the "
      "gradient's squared norm}", NULL),
    I(R_FLUSH_DECISIVE, "flush_at_best_scale", F_FLUSH_AT_SCALE, {"max_grad", "max_layer", "max_kind", "max_step"},
      "gradient range: even at the best loss scale {log2:pow2} (largest gradient {max_grad:g3} in "
      "{max_layer:layer} {max_kind:kind}, step {max_step:int}, kept under {K.FP16_MARGIN_AT}) {share:pct} of "
      "{layer} {kind} flush to zero in FP16 (from {run})",
      "{share:pct} of {layer} {kind} flush to zero even at loss scale {log2:pow2}"),
    I(R_SPAN_HEALTHY_RUN, "span_not_decisive_run", F_GRAD_SPAN, {"healthy_run"},
      "predicted from {run}: " SPAN "; not decisive: {healthy_run:run} was run and is healthy, and what it did "
      "decides", NULL),
    I(R_SPAN_HARMLESS, "span_not_decisive_norm", F_GRAD_SPAN, {"norm"},
      "predicted from {run}: " SPAN "; not decisive: at the suggested loss scale the values that flush carry "
      "{norm:pct} of the worst layer's squared gradient norm (under {K.FLUSH_NORM_MAX} does not rule FP16 out)",
      NULL),
    I(R_SPAN_DECISIVE, "span_too_wide", F_GRAD_SPAN, {0}, "gradient range: " SPAN " (from {run})",
      "the gradients span 2^{range_log2:f0}, more than FP16's 2^{K.FP16_SPAN_LOG2}"),
    I(R_NEEDS_SCALING, "needs_loss_scaling", F_FLUSH_UNSCALED, {"log2", "worst", "fl_layer", "fl_kind", "fl_share"},
      "needs loss scaling: without it {share:pct} of {layer} {kind} flush to zero in FP16 (what-if from {run}); at "
      "loss scale {log2:pow2} {?worst:the worst, {fl_layer:layer} {fl_kind:kind}, loses {fl_share:pct}}"
      "{!worst:none of them flush}", NULL),
    I(R_SCALE_GOOD, "loss_scale_keeps", F_LOSS_SCALE, {"fl_layer", "fl_kind", "fl_share"},
      "loss scale {log2:pow2} " KEEPS "; at it {fl_share:pct} of {fl_layer:layer} {fl_kind:kind} still flush to "
      "zero (the worst layer; from {run})", NULL),
    I(R_SCALE_GOOD_NONE, "loss_scale_keeps_all", F_LOSS_SCALE, {0},
      "loss scale {log2:pow2} " KEEPS "; no gradient flushes to zero at it (from {run})", NULL),
    I(R_SUBNORMAL, "subnormal_at_scale", F_SUBNORMAL_AT_SCALE, {0},
      "at loss scale {log2:pow2}, {share:pct} of {layer} {kind} are FP16 subnormals: hardware that flushes FP16 "
      "subnormals (AMD MI200 FP16 MFMA) would lose them", NULL),
    I(R_SCALE_LINE, "loss_scale", F_LOSS_SCALE, {"flushed"},
      "{log2:pow2} for fp16 (static, or --scale-init for the dynamic scaler): the largest gradient "
      "{max_grad:g3} (2^{max_grad:l2}, {layer} {kind}, step {step}) times {log2:pow2} stays under "
      "{K.FP16_MARGIN_AT}; {flushed:pct} of the worst layer's gradients still flush to zero at it{!from_hist: "
      "(a bound: no histograms)}", NULL),
    I(R_BF16_MASTER_WEIGHTS, "bf16_master_weights", F_LOST_UPDATES, {0},
      "{run} (weights stored in BF16, no FP32 master copy): {worst:pct} of {layer:q}'s updates were lost (fl(w + "
      "dw) == w), {all:pct} of all; median update/weight ratio {ratio:g3} is below BF16's "
      "{K.BF16_UNIT_ROUNDOFF} = {K.BF16_UNIT_ROUNDOFF:g2}: keep FP32 master weights", NULL),
    I(R_BF16_PURE_KEPT, "bf16_pure_kept", F_LOST_UPDATES, {"pure_loss", "fp32_loss", "eval"},
      "{run} (weights stored in BF16, no FP32 master copy): {worst:pct} of {layer:q}'s updates were lost "
      "(fl(w + dw) == w), {all:pct} of all, yet it learns, is healthy and ends at " METRIC " {pure_loss:g4} against "
      "{baseline}'s {fp32_loss:g4}, not worse beyond the noise band: what the run did outweighs what the lost updates "
      "predict, so it is kept as run (FP32 master weights are the change if a longer run stalls)", NULL),
    I(R_BF16_FAILS, "bf16_fails", F_NONE, {"diverged", "from"},
      "{run}: {?diverged:diverges}{!diverged:non-finite loss} from step {from:int} where {baseline} does not",
      "diverges from step {from:int}"),
    I(R_BF16_CLEAN, "bf16_clean", F_NONE, {0}, "{run}: no NaN/inf, no skipped steps", NULL),
    I(R_BF16_RANGE, "bf16_overflow", F_BF16_OVERFLOW, {0},
      "{layer} {kind} reach {absmax:g4} at step {step} in {run}: beyond BF16's {K.BF16_MAX:g3}",
      "{layer} {kind} reach {absmax:g3}, beyond BF16's range"),
    I(R_BF16_RANGE_OK, "bf16_range_ok", F_NONE, {0},
      "what-if from {run}: no activation or weight beyond BF16's range (BF16 has FP32's exponent range)", NULL),
    I(R_BF16_RATIO_WHATIF, "bf16_weights_ratio", F_LOST_UPDATES, {0},
      "what-if from {run}: median update/weight ratio {ratio:g3} < {K.BF16_UNIT_ROUNDOFF}: weights stored in BF16 "
      "would lose updates; BF16 autocast keeps FP32 master weights", NULL),
    I(R_BF16_LOST_NONE, "bf16_weights_lose_nothing", F_LOST_IF_BF16, {0},
      "what-if from {run}: no update would be lost with BF16 weights without FP32 master weights (every non-zero "
      "update changes its weight in BF16)", NULL),
    I(R_BF16_LOST_WHATIF, "bf16_weights_lose", F_LOST_IF_BF16, {"bad"},
      "what-if from {run}: {all:pct} of updates would be lost with BF16 weights without FP32 master weights (fl(w "
      "+ dw) == w in BF16; worst layer {layer:q}: {worst:pct}){?bad:: do not store the weights in BF16 "
      "(bf16-pure)}; BF16 autocast keeps FP32 master weights", NULL),
    I(R_ADAM_EPS_WARN, "adam_eps_zero", F_ADAM_EPS_ZERO, {0},
      "{run}: AdamW eps {eps:g} with FP16 optimizer state rounds to 0 (FP16 flushes |x| <= {K.FP16_UNDERFLOW_AT}): "
      "zero-gradient steps give 0/0 = NaN{?nan_values: (this run has NaN values)}; use eps >= {K.ADAM_EPS_SAFE} "
      "or FP32 state", NULL),
    I(R_ISLANDS_NOT_FINITE, "islands_not_finite", F_ACT_OVERFLOW, {"next"},
      "FP32 islands {islands} would not keep the forward finite: {layer}'s output reaches {absmax:g4}, and "
      "{next:layer} rounds it to FP16 (>= {K.FP16_OVERFLOW_AT} is inf)", NULL),
    I(R_V_UNDECIDED_ADAM, "undecided_adam_eps", F_NONE, {0},
      "undecided: the FP32 baseline does not train because its AdamW state is FP16 (eps rounds to 0); keep the "
      "optimizer state in FP32 (--optim-state fp32) first", NULL),
    I(R_V_UNDECIDED_LR, "undecided_lr", F_NONE, {0},
      "undecided: the FP32 baseline does not train; fix the learning rate first", NULL),
    I(R_V_UNDECIDED_ALL, "undecided_every_run_fails", F_NONE, {0},
      "undecided: every run fails; run FP32 or lower the learning rate first", NULL),
    I(R_V_UNDECIDED_INVALID, "undecided_invalid_comparison", F_NONE, {"inputs"},
      "undecided: these runs cannot be compared (see why); fix that first{?inputs: (and standardise the inputs: "
      "--standardize on)}", NULL),
    I(R_V_UNDECIDED_FLAT, "undecided_baseline_does_not_learn", F_NONE, {"inputs", "high", "low"},
      "undecided: the baseline {run} does not learn, so no precision can be judged against it"
      "{?high:; likely cause: its lr is too high}{?low:; likely cause: its lr is too low}; "
      "{?inputs:standardise the inputs first (--standardize on), then }fix the training (see why; ampdiag tune "
      "measures the lr) and compare again", NULL),
    I(R_V_UNDECIDED_FALLING, "undecided_baseline_still_falling", F_NONE, {0},
      "undecided: the baseline {run} is still falling at the end, so the lr (or the run's length), not the "
      "precision, limits it; run ampdiag tune, which measures the lr and then the precisions at it", NULL),
    I(R_V_BF16, "bf16", F_NONE, {"from_trace", "no_run"},
      "bf16 (autocast with FP32 master weights){?from_trace:; predicted from the FP32 trace: confirm with a bf16 "
      "run}{?no_run:; no bf16 run given: confirm with one}", NULL),
    I(R_V_BF16_MASTER, "bf16_master_weights", F_NONE, {"from_trace", "no_run"},
      "bf16 with FP32 master weights (not bf16-pure: its updates are lost){?from_trace:; predicted from the FP32 "
      "trace: confirm with a bf16 run}{?no_run:; no bf16 run given: confirm with one}", NULL),
    I(R_V_BF16_PURE, "bf16_pure_kept", F_NONE, {0},
      "bf16-pure as run (weights stored in BF16, no FP32 master copy): observed to learn within the noise band of "
      "FP32, its lost updates notwithstanding (under bf16)", NULL),
    I(R_V_FP16, "fp16", F_NONE, {"log2", "without", "w_share", "w_layer", "w_kind", "predicted", "unscaled_run"},
      "fp16 + dynamic loss scaling, initial scale {log2:pow2}{?without:; without it {w_share:pct} of "
      "{w_layer:layer}'s {w_kind:kind} flush to zero}{?predicted: (predicted: confirm with an fp16 run)}"
      "{!predicted:{?unscaled_run: (the fp16 run had none: confirm with one)}}", NULL),
    I(R_V_FP16_ISLANDS, "fp16_fp32_layers", F_NONE, {"log2", "share", "seen", "seen_run"},
      "fp16 + dynamic loss scaling (initial {log2:pow2}) with FP32 layers {islands} (--fp32-layers {islands}: "
      "{share:pc0} of the parameters); {?seen:confirmed by {seen_run:run}}{!seen:confirm with a run}", NULL),
    I(R_V_BF16_ISLANDS, "bf16_fp32_layers", F_NONE, {0},
      "bf16 with FP32 layers {fp32_layers} (--fp32-layers {fp32_layers}); confirm with a run", NULL),
    I(R_V_FP32_BF16_MISSES, "fp32_bf16_misses", F_NONE, {0}, "fp32: bf16 misses the FP32 loss and fp16 is ruled out",
      NULL),
    I(R_V_FP32_NO_BF16_PARTIAL, "fp32_no_bf16_partial", F_NONE, {"target", "share"},
      "fp32 (target {target:target} has no BF16 and FP16 overflows in the forward pass from {islands}; an FP32 "
      "trace would show whether FP32 islands can rescue it)", NULL),
    I(R_V_FP32_NO_BF16_ISLANDS, "fp32_no_bf16_islands", F_NONE, {"target", "share"},
      "fp32 (target {target:target} has no BF16, and FP32 islands for FP16 would cover {share:pc0} of the "
      "parameters: {islands})", NULL),
    I(R_V_FP32_NO_BF16, "fp32_no_bf16", F_NONE, {"target", "share"},
      "fp32 (target {target:target} has no BF16 and FP16 is ruled out)", NULL),
    I(R_V_FP32, "fp32", F_NONE, {"target", "share"}, "fp32 (both 16-bit formats are ruled out)", NULL),
    I(R_V_FIRST_EVAL, "first_cause_eval", F_EVAL_ONLY_NONFINITE, {"fmt"},
      "first cause of {run}'s NaN: its evaluation overflows {fmt:fmt}" EVAL_WHERE " while its training stays "
      "finite (validation inputs beyond the training range)", NULL),
    I(R_V_FIRST_ADAM, "first_cause_adam_eps", F_ADAM_EPS_ZERO, {0},
      "first cause of {run}'s NaN: its AdamW state is FP16, where eps {eps:g} is 0 (use --optim-state fp32)", NULL),
    I(R_WHY_BOTH, "both_healthy", F_NONE, {0},
      "both 16-bit formats are healthy; bf16 is preferred: no loss scaler to tune, no skipped steps, FP32's "
      "exponent range (fp16 + dynamic loss scaling works too)", NULL),
    I(R_WHY_BF16_NO_FP16_TARGET, "bf16_no_fp16_on_target", F_NONE, {0},
      "bf16 is healthy; fp16 is not available on the target", NULL),
    I(R_WHY_BF16_FP16_OUT, "bf16_fp16_ruled_out", F_NONE, {0},
      "bf16 is healthy and fp16 is ruled out (see fp16 below)", NULL),
    I(R_WHY_BF16_PREDICTED, "bf16_predicted", F_NONE, {0},
      "fp16 is ruled out (see fp16 below) and nothing found rules out bf16, whose exponent range is FP32's", NULL),
    I(R_WHY_FP16, "fp16_healthy", F_NONE, {"no_bf16"},
      "fp16 with dynamic loss scaling is healthy{?no_bf16:; the target has no BF16}{!no_bf16:; bf16 is ruled out "
      "(see bf16 below)}", NULL),
    I(R_WHY_FP16_OBSERVED, "fp16_observed", F_NONE, {0},
      "{run} was run and is healthy: it learns, within the noise band of the baseline; bf16, which nobody "
      "ran, would likely work too, but what a run did decides: keep fp16", NULL),
    I(R_WHY_FP16_ISLANDS, "fp16_islands_rescue", F_NONE, {"share", "no_bf16"},
      "the forward overflow is confined to layers holding {share:pc0} of the parameters: keeping them in FP32 "
      "rescues fp16{?no_bf16: (the target has no BF16)}{!no_bf16: (bf16 is ruled out, see below)}", NULL),
    I(R_WHY_BF16_DEVIATION, "bf16_deviation", F_CMP_DEVIATION, {0},
      "{run} deviates most from {run2}: {layer} activations differ by {rel:pct} (median over {steps} steps), far "
      "above BF16's unit roundoff {K.BF16_UNIT_ROUNDOFF:pct}", NULL),
    I(R_ISLANDS_PARTIAL, "islands_partial", F_NONE, {0},
      "FP32 islands for FP16: at least {islands} (the first layer to overflow); an FP32 trace shows which layers "
      "after it overflow too", NULL),
    I(R_ISLANDS_OFFER, "islands_offer", F_NONE, {"share", "too_large"},
      "FP32 islands that would let FP16 run: --fp32-layers {islands} ({share:pc0} of the parameters"
      "{?too_large:: most of the model, no rescue})", NULL),
    I(R_LR_SWEEP_POINT, "lr_sweep_point", F_NONE, {"lr", "m", "eval"},
      "lr {lr:g}: {prec} " METRIC " {m:g4}", NULL),
    I(R_LR_SWEEP_FAILS, "lr_sweep_fails", F_NONE, {"lr", "step"}, "lr {lr:g}: {prec} diverges from step {step:int}",
      NULL),
    I(R_LR_PICK, "lr_pick", F_NONE, {"lr", "m", "eval"},
      "use {lr:g}: the lowest " METRIC " of {prec} among the learning rates tried ({m:g4})", NULL),
    I(R_LR_ADAM_FIRST, "lr_adam_eps_first", F_ADAM_EPS_ZERO, {0},
      "{run} fails because AdamW's eps {eps:g} is 0 in its FP16 optimizer state (0/0 = NaN on zero gradients), "
      "not because of the lr: no lr advice until the state is FP32 (--optim-state fp32)", NULL),
    I(R_LR_FORMAT_FIRST_LINE, "lr_format_first", F_NONE, {0},
      "no advice: fix the optimizer state's format first (--optim-state fp32)", NULL),
    I(R_LR_FAILS, "lr_run_fails", F_NONE, {"diverged", "step"},
      "{run} {?diverged:diverges}{!diverged:has a non-finite loss} from step {step:int}", NULL),
    I(R_LR_DIVERGE_RATIO, "lr_diverges_ratio", F_UPDATE_RATIO, {"factor"},
      "median update/weight ratio {ratio:g3} in {run} (target ~{K.RATIO_TARGET}): lr x min({K.LR_STEP}, "
      "{K.RATIO_TARGET} / {ratio:g3}) = x{factor:g3}", NULL),
    I(R_LR_DIVERGE_STEP, "lr_diverges_step", F_NONE, {0},
      "the same in every precision, so not a format limit: lr x {K.LR_STEP} and a longer warm-up (>= 2k steps "
      "for large models), a heuristic step", NULL),
    I(R_LR_WARMUP_AT, "lr_warmup", F_NONE, {"step", "lr", "factor"},
      "the instability began at step {step:int} with lr {lr:g3} (warm-up): lr x {K.LR_STEP} of that = "
      "x{factor:g3} of the peak", NULL),
    I(R_LR_LOWER_DIVERGES, "lr_lower_diverges", F_NONE, {"lr", "factor", "fp32"},
      "lower to {lr:g3} (x{factor:g3}): training diverges in {?fp32:FP32 too}{!fp32:every run}", NULL),
    I(R_LR_FORMAT_START, "lr_format_from_start", F_NONE, {"diverged", "step"},
      "{run} {?diverged:diverges}{!diverged:has a non-finite loss} from step {step:int}, with NaN/inf in the "
      "forward pass of its first step, before any update: format-caused, fix the precision first, not the lr",
      NULL),
    I(R_LR_FORMAT_CAUSED, "lr_format_caused", F_NONE, {"diverged", "step"},
      "{run} {?diverged:diverges}{!diverged:has a non-finite loss} from step {step:int} while {baseline} trains: "
      "format-caused, fix the precision first, not the lr", NULL),
    I(R_LR_NO_RATIO, "lr_no_ratio", F_NONE, {0}, "no update/weight ratios recorded in {run}: no lr advice", NULL),
    I(R_LR_TOO_LOW, "lr_too_low", F_STEPS_TOO_SMALL, {"cap", "factor", "lost"},
      "{run} does not learn{?flat: at all}{!flat: enough}: its final-window training loss {window:g4} is not "
      "below {?flat:{K.FLAT_FRACTION}}{!flat:{K.LEARNED_FRACTION}} of its first training loss, {first:g4}; its "
      "update/weight ratio {ratio:g3} is below the ~{K.RATIO_TARGET} target{#lost:, and {lost:pct} of its "
      "non-zero updates round away even in its FP32 weights (fl(w + dw) == w)}: the lr is too low, not too high; "
      "{?flat:its weights have hardly moved, so the ratio grows in proportion to the lr: }lr x min({cap:g}, "
      "{K.RATIO_TARGET}/{ratio:g3}) = x{factor:g3}", NULL),
    I(R_LR_KEEP_HEALTHY, "lr_keep_healthy", F_UPDATE_RATIO, {"above", "window", "first", "below"},
      "{run} learns (final-window training loss {window:g4}, first training loss {first:g4}): keep the lr; its "
      "update/weight ratio {ratio:g3} (" RATIO_SRC "; target ~{K.RATIO_TARGET})"
      "{?above: is above the {K.RATIO_HIGH} rule of thumb}{?below: is below the {K.RATIO_LOW} rule of thumb}"
      "{?above:, not enough to change a run that learns (ampdiag tune measures a better lr where there is "
      "one)}{?below:, not enough to change a run that learns (ampdiag tune measures a better lr where there is "
      "one)}{!above:{!below: is within {K.RATIO_LOW}..{K.RATIO_HIGH}}}", NULL),
    I(R_LR_RATIO_HIGH, "lr_ratio_high", F_UPDATE_RATIO, {"factor"},
      "update/weight ratio {ratio:g3} (" RATIO_SRC ") in {run} is above {K.RATIO_HIGH} (target "
      "~{K.RATIO_TARGET}): lr x max({K.LR_LOWER_MIN}, {K.RATIO_TARGET}/{ratio:g3}) = x{factor:g3}", NULL),
    I(R_LR_RATIO_LOW, "lr_ratio_low", F_UPDATE_RATIO, {"factor"},
      "update/weight ratio {ratio:g3} (" RATIO_SRC ") in {run} is below {K.RATIO_LOW} (target "
      "~{K.RATIO_TARGET}): lr x min({K.LR_RAISE_MAX}, {K.RATIO_TARGET}/{ratio:g3}) = x{factor:g3}", NULL),
    I(R_LR_SPIKES, "lr_loss_spikes", F_LOSS_SPIKES, {0},
      "untested: {count} loss spikes in {steps} steps of {run} (more than {K.SPIKE_RATE_MAX}; first at step "
      "{first_step}): a lower lr or a longer warm-up might help; a heuristic, so a hypothesis that ampdiag tune "
      "tests, not a change to the lr here", NULL),
    I(R_LR_STILL_FALLING, "lr_still_falling", F_STILL_FALLING, {0},
      "untested: {run}'s training loss still falls at the end (over its second half at {rate_share:pct} of its "
      "mean rate): a higher lr (or more steps) would likely go further; by how much no single run measures, so a "
      "hypothesis that ampdiag tune tests, not a change to the lr here", NULL),
    I(R_LR_KEEP_BAND, "lr_keep_band", F_UPDATE_RATIO, {"spikes"},
      "update/weight ratio {ratio:g3} (" RATIO_SRC ") in {run}, within {K.RATIO_LOW}..{K.RATIO_HIGH} (target "
      "~{K.RATIO_TARGET}); {spikes:int} loss spikes", NULL),
    I(R_LR_MASTER, "lr_master_weights", F_LOST_UPDATES, {0},
      "{run} stores weights in BF16 and its median update/weight ratio {ratio:g3} is below "
      "{K.BF16_UNIT_ROUNDOFF}: do not raise the lr to push updates over the rounding threshold; keep FP32 master "
      "weights (or Kahan summation / stochastic rounding)", NULL),
    I(R_LR_KEEP, "lr_keep", F_NONE, {"lr"}, "keep {lr:g}", NULL),
    I(R_LR_UNSETTLED, "lr_unsettled", F_NONE, {0},
      "not settled by one run: likely too low, {run} still falling at the end (untested: ampdiag tune measures it)",
      NULL),
    I(R_LR_KEEP_MASTER, "lr_keep_master", F_NONE, {"lr"},
      "keep {lr:g} and use FP32 master weights (do not raise it to beat BF16 rounding)", NULL),
    I(R_LR_LOWER, "lr_lower", F_NONE, {"lr", "factor"}, "lower to {lr:g3} (x{factor:g3})", NULL),
    I(R_LR_RAISE, "lr_raise", F_NONE, {"lr", "factor"}, "raise to {lr:g3} (x{factor:g3})", NULL),
    I(R_LR_HIGH, "lr_too_high", F_LR_TOO_HIGH, {0},
      "{run}'s history says the lr is too high: {!diverged:{?explosion:its training loss explodes early (to "
      "{loss_peak:g3} at step {peak_step:int}, from {first:g3}){?sticks: and then sticks}}{#died:{?explosion:; }"
      "units died after large early updates ({died:pct} of {layer}'s live weight gradients went to 0 while the "
      "update/weight ratio reached {early_ratio:g2} at step {ratio_step:int}, above {K.RATIO_EARLY_HIGH}: the "
      "tiny ratio after that is zero gradients, not a small lr)}}{?diverged:it diverges from step "
      "{fail_step:int}}: lr x {K.LR_HIGH_FACTOR} (how far is for a measurement: ampdiag tune)", NULL),
    I(R_LR_LOW, "lr_too_low", F_LR_TOO_LOW, {"factor", "cap"},
      "{run}'s history says the lr is too low: its gradients live and its update/weight ratio stays small "
      "(90th percentile {ratio_p90:g2}, below {K.RATIO_LOW}) while it {?learns:learns slowly}{!learns:does not "
      "learn: its weights have hardly moved, so the ratio grows in proportion to the lr}: lr x min({cap:g}, "
      "{K.RATIO_TARGET}/{ratio_p90:g2}) = x{factor:g3}", NULL),
    I(R_LR_INPUTS_FIRST, "lr_inputs_first", F_INPUT_SCALE, {0},
      "{run}'s inputs are far from unit scale and the trouble starts at the first layer: standardise them "
      "first (--standardize on); the history of a run on such inputs says little about its lr, so keep it and "
      "judge it again after", NULL),
    I(R_LR_LOWER_HIGH, "lr_lower_too_high", F_NONE, {"lr", "factor"},
      "lower to {lr:g3} (x{factor:g3}): the history shows the lr too high", NULL),
    I(R_LR_RAISE_LOW, "lr_raise_too_low", F_NONE, {"lr", "factor"},
      "raise to {lr:g3} (x{factor:g3}): the history shows the lr too low", NULL),
    I(R_CLIP_NONE, "clip_none", F_CLIP_FEW_NORMS, {0},
      "no value: {n} finite, unskipped gradient norms after the first {warmup} steps of {run} ({K.CLIP_MIN_NORMS} "
      "needed)", NULL),
    I(R_CLIP_LINE, "clip", F_CLIP_VALUE, {0},
      "{value:g3}: would clip {share:pct} of steps, the spike included (untested: a hypothesis ampdiag tune "
      "tests)", NULL),
    I(R_CLIP_NO_SPIKES, "clip_not_offered", F_CLIP_VALUE, {"spike", "sane"},
      "none offered: {!spike:the gradient-norm history shows no spike clipping would catch (no norm "
      "{K.NORM_SPIKE_FACTOR}x its rolling median followed by a loss spike)}{?spike:{!sane:the value the norms "
      "give ({value:g3}) would clip no step}}", NULL),
    I(R_CLIP_VALUE, "clip_value", F_CLIP_VALUE, {0},
      "{value:g3} = max(P{K.CLIP_QUANTILE:pint} {p99:g3}, median {median:g3} + {K.CLIP_MADS} x {K.MAD_SIGMA} x MAD "
      "{mad:g3} = {robust:g3}) of {n} unscaled, finite, pre-clip gradient norms of {run} after step {warmup}: "
      "would clip {n_over} steps ({share:pct}){?n_over:: steps {over_list}}", NULL),
    I(R_CLIP_AUTOCLIP, "clip_autoclip", F_CLIP_VALUE, {0},
      "AutoClip alternative: P{K.AUTOCLIP_QUANTILE:pint} = {p10:g3} (clips ~{K.AUTOCLIP_QUANTILE:pctc} of steps, "
      "smoothing rather than guarding spikes)", NULL),
    I(R_CLIP_PRIOR_NEVER, "clip_prior_never", F_CLIP_PRIOR_NEVER, {0},
      "the common transformer prior of {K.CLIP_PRIOR} would never fire here (median norm {median:g3})", NULL),
    I(R_CLIP_PRIOR_ALWAYS, "clip_prior_always", F_CLIP_PRIOR_ALWAYS, {0},
      "the common transformer prior of {K.CLIP_PRIOR} would clip every step here (median norm {median:g3})", NULL),
    I(R_CLIP_DRIFT, "clip_drift", F_NORM_DRIFT, {0},
      "the norm drifts (median {median_first:g3} in the first {K.DRIFT_SHARE} of the history, {median_last:g3} in "
      "the last {K.DRIFT_SHARE}): a fixed clip goes stale; consider ZClip (alpha {K.ZCLIP_ALPHA}, z {K.ZCLIP_Z}) or "
      "AutoClip", NULL),
    I(R_CLIP_SPIKE, "clip_norm_spike", F_NORM_SPIKE, {0},
      "a gradient-norm spike {ratio:g3}x the rolling median at step {step} is followed by a loss spike at step "
      "{loss_step}: besides clipping, rewind ~100 steps and skip 200-500 batches (PaLM)", NULL),
    I(R_CLIP_CLIPPED, "clip_clipped_by_run", F_CLIPPED_BY_RUN, {0}, "{run} clipped at {clip:g}: {clipped} steps clipped",
      NULL),
    I(R_REM_OPT_STATE, "remedy_optim_state", F_NONE, {"eps"},
      "AdamW eps {eps:g} rounds to 0 in FP16 optimizer state (0/0 = NaN on zero gradients)", NULL),
    I(R_REM_ISLANDS, "remedy_fp32_layers", F_NONE, {0}, "FP32 islands named by the verdict", NULL),
    I(R_REM_LOSS_SCALE, "remedy_loss_scale", F_NONE, {"k", "flush"},
      "the fp16 verdict needs dynamic loss scaling, initial scale 2^{k:int}{?flush: (gradients flush to zero "
      "without it)}", NULL),
    I(R_REM_STANDARDIZE, "remedy_standardize", F_NONE, {0},
      "the inputs are far from unit scale and the trouble starts at the first layer: standardise them (each "
      "feature minus its training mean, over its standard deviation)", NULL),
    I(R_DEC_LOSS_SCALE, "loss_scale_dynamic", F_NONE, {"k", "flush"},
      "dynamic loss scaling, initial scale 2^{k:int}, as the fp16 run given scaled", NULL),
    I(R_FAIL_EVAL, "fail_eval", F_EVAL_NONFINITE, {"eval_step"},
      "{run}'s eval loss at step {eval_step:int} is not finite", NULL),
    I(R_FAIL_EVAL_ONLY, "fail_eval_only", F_EVAL_ONLY_NONFINITE, {"eval_step"},
      "{run}'s eval loss at step {eval_step:int} is not finite" EVAL_WHERE, NULL),
    I(R_FAIL_FWD, "fail_forward", F_FWD_NONFINITE, {0},
      "{run} has NaN/inf activations from step {step} (first in {layer})", NULL),
    I(R_FAIL_LOSS, "fail_loss", F_LOSS_NONFINITE, {0},
      "{run} has a non-finite loss at {count} steps, first {first_step}", NULL),
    I(R_FAIL_EVENT, "fail_event", F_NONFINITE_EVENT, {0}, "{run}: {code:event} at step {step} ({message})", NULL),
    I(R_FAIL_WEIGHTS, "fail_weights", F_NONFINITE_WEIGHTS, {0},
      "{run}: {layer} weights hold NaN/inf from step {step}", NULL),
    I(R_FAIL_SKIPS, "fail_skips", F_NONE, {"sa", "sn", "collapsed"},
      "{run} skipped {sa:int} of {sn:int} steps after calibration{?collapsed: and its loss scale collapsed}", NULL),
    I(R_FAIL_DIVERGED, "fail_diverged", F_DIVERGED, {0}, "{run} diverges from step {step}", NULL),
    I(R_FAIL_OVERFLOW, "fail_overflow", F_OVERFLOW_IN_RUN, {0},
      "{run}: {layer} forward values overflow {fmt}{?what_if: (what-if)}", NULL),
    I(R_RECIPE_PLAN, "recipe_plan", F_RECIPE_PLAN, {0},
      "{run}, measured against what {recipe:recipe} does to normal values: {keep} of {layers} linear layers "
      "({keep_share:pct}) would flush or saturate more of a tensor's values than it does of them, by more than "
      "{K.RECIPE_FLUSH_EXCESS} of the values and {K.RECIPE_REF_FACTOR} times as many, or lose more than "
      "{K.RECIPE_SQNR_MARGIN} dB of SQNR "
      "(NVIDIA's NVFP4 recipe keeps about {K.RECIPE_KEEP_SHARE} of the linear layers in BF16)", NULL),
    I(R_WARN_CUT_OFF, "trace_cut_off", F_CUT_OFF, {0},
      "{run} was cut off (status 'running'): its numbers cover {steps} steps", NULL),
    I(R_WARN_BAD_ROWS, "trace_unknown_rows", F_BAD_ROWS, {0},
      "{run}: {rows} tensor records name an unknown layer or kind (ignored)", NULL),
    I(R_WARN_HIST_SAMPLED, "trace_histograms_sampled", F_HIST_SAMPLED, {0},
      "{run}: {read} of {total} histogram records read (evenly spaced blocks); fractions come from that sample",
      NULL),
    I(R_SPEED_FASTER, "speed_faster", F_NONE, {"other", "time", "time_other", "factor"},
      "{run} is the faster of two viable precisions: {time:dur} a step against {other:run}'s {time_other:dur} "
      "on this machine ({factor:g2}x, median step times, more than {K.STEP_TIME_FACTOR}); reported, the verdict "
      "does not weigh speed", NULL),
    I(R_CLAIM_FIX, "claim_fix", F_NONE, {"failed", "loss", "eval"},
      "decided: {run} {?failed:failed}{!failed:lost to the FP32 baseline beyond the noise band} at the baseline's lr; "
      "followed, this advice should match the baseline's {?eval:eval loss}{!eval:final-window training loss} "
      "{loss:g4} (ampdiag tune verifies it; whether another lr does better, one lr cannot say)", NULL),
    I(R_CLAIM_NO_COST, "claim_no_precision_cost", F_NONE, {0},
      "undecided beyond the precision: no 16-bit run lost to the FP32 baseline {run} at its lr beyond the noise "
      "band, so the precision is not what limits this run; if it trains worse than it should, its lr (untested: "
      "one lr was run) is the likely cause: run ampdiag tune, which measures it", NULL),
    I(R_CLAIM_NO_FP32, "claim_no_fp32_baseline", F_NONE, {0},
      "untested: no FP32 baseline, so no cost of a precision was measured; run ampdiag tune, which measures it",
      NULL),
    I(R_CLAIM_NO_16BIT, "claim_no_16bit_run", F_NONE, {0},
      "untested: no 16-bit run at {run}'s lr was given, so nothing a precision costs was observed (the verdict is "
      "a prediction from {run}'s trace) and its lr was not measured; run ampdiag tune, which measures both", NULL),
    I(R_CLAIM_STANDARDIZE, "claim_untested_inputs", F_NONE, {0},
      "untested: {run}'s cost was observed, but the advice standardises the inputs, which no run measured (the lr "
      "was set for the inputs as they were); run ampdiag tune, which measures it", NULL),
    I(R_CLAIM_LR, "claim_untested_lr", F_NONE, {"lr"},
      "untested: {run}'s cost was observed, but the advice sets lr {lr:g3}, which no run measured; run ampdiag "
      "tune, which measures it", NULL),
    I(R_CLAIM_CLIP, "claim_untested_clip", F_NONE, {"clip"},
      "untested: {run}'s cost was observed, but the advice clips the gradient norm at {clip:g3}, which no run "
      "measured; run ampdiag tune, which measures it", NULL),
    I(R_CLAIM_INPUTS, "claim_baseline_inputs", F_INPUT_SCALE, {0},
      "untested: the FP32 baseline {run} ran on inputs far from unit scale ({?large:a feature's standard "
      "deviation reaches {std_max:g3}}{!large:root mean square {rms:g3}}), so matching it says little about a "
      "run that trains well; standardise the inputs (--standardize on) and run ampdiag tune", NULL),
    I(R_CLAIM_TRADE, "claim_untested_format", F_NONE, {0},
      "untested: {run} lost to the FP32 baseline, but no mechanism of that cost was found that the advised "
      "precision removes (no overflow or NaN, no missing loss scaler, no BF16 weights): the other 16-bit format "
      "trades range for precision and no run measured it; run ampdiag tune, which measures it", NULL),
    I(R_CLAIM_BASE_LR, "claim_baseline_lr_in_doubt", F_NONE, {0},
      "untested: the cost of a precision was observed, but the FP32 baseline {run}'s own history puts its lr in "
      "doubt (see LR), so matching it says little about a run that trains well; run ampdiag tune, which "
      "measures the lr", NULL),
};

const msg_row msg_decision_rows[REC_NWHATS] = {
    [WHAT_PRECISION] = {"precision", F_NONE, {0}, "precision: {to}", NULL},
    [WHAT_FP32_LAYERS] = {"fp32_layers", F_NONE, {0}, "keep {to} in FP32", NULL},
    [WHAT_LOSS_SCALE] = {"loss_scale", F_NONE, {0}, "loss scale: {to}{#value:, initial {value:scale}}", NULL},
    [WHAT_LR] = {"lr", F_NONE, {0}, "lr: {to}{#value: {value:g3}}", NULL},
    [WHAT_CLIP] = {"clip", F_NONE, {0}, "clip the gradient norm at {value:g3} (untested)", NULL},
    [WHAT_OPT_STATE] = {"optimizer_state", F_NONE, {0}, "optimizer state in {to}", NULL},
    [WHAT_MASTER_WEIGHTS] = {"master_weights", F_NONE, {0}, "master weights in {to}", NULL},
    [WHAT_WARMUP] = {"warmup", F_NONE, {0}, "a {to} lr warm-up (untested)", NULL},
    [WHAT_INPUTS] = {"inputs", F_NONE, {0}, "standardise the inputs (--standardize on)", NULL},
    [WHAT_RECIPE_BF16] = {"recipe_bf16_layers", F_NONE, {0},
                          "{?to:under {value:recipe} keep {to} in BF16}{!to:every layer can take {value:recipe}}", NULL},
};

#define T(id, k, ...) [id] = {k, __VA_ARGS__}

const msg_tune_row msg_tune_rows[MT_N] = {
    T(MT_WHY_GIVEN, "given", {"lr"}, {"precisions", "options"},
      "the configuration as given: {precisions} at lr {lr:g}{?options: with {options}}"),
    T(MT_WHY_REMEDY, "remedy", {"lr"}, {"options"},
      "the advice names {options} for every run: FP32 with it at lr {lr:g}, kept if it measures better"),
    T(MT_WHY_LRFIND, "lrfind", {"lr_min", "lr_max", "steps"}, {"why"},
      "{why}: the LR range test (lr {lr_min:g} -> {lr_max:g} over {steps:int} steps) from the same initial "
      "weights"),
    T(MT_WHY_LR_BRACKET, "lr_bracket", {"lr", "from"}, {"source"},
      "the lr measured: FP32 at {lr:g}, around {from:g} ({source})"),
    T(MT_WHY_LR_NEIGHBOUR, "lr_neighbour", {"lr", "best"}, {0},
      "the lr measured: FP32 at {lr:g}, beside the best so far ({best:g}), the way it improves (a decade away "
      "where the best is the edge of the lrs measured, else half-way in log to the run on that side, at most a "
      "decade)"),
    T(MT_WHY_LR_LOWER, "lr_lower", {"lr", "lowest"}, {0},
      "no FP32 run learns yet: FP32 at {lr:g}, below the lowest lr tried ({lowest:g})"),
    T(MT_WHY_LR_TOWARD, "lr_toward", {"lr", "closest"}, {0},
      "no FP32 run learns yet: FP32 at {lr:g}, beside the lr whose run ends with the lowest eval loss "
      "({closest:g}), the run closest to learning"),
    T(MT_WHY_LR_PLATEAU, "lr_plateau", {"lr", "best"}, {0},
      "the lr measured: FP32 at {lr:g}, past a neighbour of the best so far ({best:g}) that ends within its "
      "noise band: the search goes on across the plateau"),
    T(MT_WHY_LR_CLIFF, "lr_cliff", {"lr", "best"}, {0},
      "the lr measured: FP32 at {lr:g}, half-way (in log) from the best so far ({best:g}) to its nearest "
      "neighbour on that side, which does not learn: a sharp valley, whose best lr may lie near its edge"),
    T(MT_WHY_REMEDY_AGAIN, "remedy_again", {"lr", "given"}, {"options"},
      "the advice names {options} for every run; rejected at the lr given {given:g}, which does not learn: FP32 "
      "with it at {lr:g} (the lr measured best; where no run ends finite, the lowest tried), kept if it measures "
      "better (and the lr measured again from there)"),
    T(MT_WHY_HYPOTHESIS, "hypothesis", {"lr"}, {"options", "what"},
      "a hypothesis of the advice ({what}, untested): FP32 with {options} at lr {lr:g}, kept if it measures "
      "better"),
    T(MT_WHY_PRECISIONS, "precisions", {"lr"}, {"precisions", "options"},
      "{precisions} at the yardstick's lr {lr:g}{?options: with {options}}"),
    T(MT_WHY_RECOMMENDED, "recommended", {"lr"}, {"precision", "options"},
      "the recommendation: {precision} at lr {lr:g} with {options}, the options for its run"),
    T(MT_LRFIND, "lrfind_result", {"valley", "steepest", "minimum", "start"}, {"source"},
      "the LR range test suggests {start:g} ({source}; valley {valley:g}, steepest {steepest:g}, minimum / 10 "
      "{minimum:g})"),
    T(MT_ADOPTED, "adopted", {"eval", "base_eval"}, {"options"},
      "{options}: kept (FP32 eval loss {eval:g4}, {base_eval:g4} without it)"),
    T(MT_REJECTED, "rejected", {"eval", "base_eval", "learns"}, {"options"},
      "{options}: not kept (FP32 eval loss {eval:g4}{!learns:, and it does not learn}, {base_eval:g4} without "
      "it)"),
    T(MT_YARDSTICK, "yardstick", {"lr", "eval", "initial", "runs"}, {"options"},
      "the yardstick: FP32 at lr {lr:g}{?options: with {options}}, eval loss {eval:g4} from {initial:g4}: the best "
      "of the {runs:int} FP32 runs measured that learn"),
    T(MT_VERIFIED, "verified", {"lr", "eval", "initial", "base_eval", "band", "paired", "is_yard"},
      {"precision", "options", "path"},
      "{precision} at lr {lr:g}{?options: with {options}} ({path}): learns (eval loss {eval:g4} from {initial:g4}), "
      "healthy (complete, no NaN/inf, skips within the limit){?is_yard:, the yardstick itself: no 16-bit run "
      "passed}{!is_yard:, eval loss within the {?paired:paired }noise band +-{band:pct} of the yardstick's "
      "{base_eval:g4}}"),
    T(MT_FAIL_UNHEALTHY, "not_healthy", {"lr"}, {"precision", "why"}, "{precision} at lr {lr:g}: not healthy: {why}"),
    T(MT_FAIL_NOT_LEARNING, "not_learning", {"lr"}, {"precision", "why"},
      "{precision} at lr {lr:g}: does not learn: {why}"),
    T(MT_FAIL_GAP, "worse", {"lr", "eval", "base_eval", "rel", "band", "paired"}, {"precision"},
      "{precision} at lr {lr:g}: eval loss {eval:g4} vs the yardstick's {base_eval:g4} ({rel:spct}), worse beyond "
      "the {?paired:paired }noise band +-{band:pct}"),
    T(MT_FAIL_COMMAND, "command_failed", {"lr"}, {"precision", "why"},
      "{precision} at lr {lr:g}: the command failed: {why}"),
    T(MT_NOTHING_LEARNS, "nothing_learns", {"runs", "lr_min", "lr_max"}, {"why"},
      "nothing learns: none of the {runs:int} FP32 runs tune made (lr {lr_min:g} .. {lr_max:g}) learns{?why:; "
      "{why}}: the model, the data or the options are the problem, not the precision or the lr"),
    T(MT_NOT_VERIFIED, "not_verified", {0}, {"why"}, "no configuration passed: {why}"),
    T(MT_CANNOT_JUDGE, "cannot_judge", {0}, {"why"},
      "no run can be verified: {why}; fix the validation set (shuffle the file, or give /x_val and /y_val "
      "with several classes and enough rows), then tune again"),
};
