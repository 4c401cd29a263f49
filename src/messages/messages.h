/*
 * messages.h - the one message table: the words of every finding, every rule's item and
 * decision, every headline figure and every term the reports use, for every renderer (text,
 * Markdown, JSON, charts, the run summary, tune). Nothing else formats a finding or a decision:
 * renderers print what these functions write. Every threshold in the words is printed from its
 * named constant (evidence.h), so docs/recommendations.md, generated from this table
 * (msg_rules_markdown), cannot drift from the code.
 *
 * The words are templates: "{name}" is a figure of the item, its finding or its decision
 * (their rows name them), "{K.NAME}" a constant, "{run}" / "{run2}" / "{baseline}" a run's
 * label, "{layer}", "{kind}", "{fmt}" the subject; "{name:style}" formats it (msgtab.c lists the
 * styles); "{?name:text}" writes text when the figure is true (not 0, not NaN), "{!name:text}"
 * when it is not, "{#name:text}" when it is known (not NaN).
 */
#ifndef AMPDIAG_MESSAGES_H
#define AMPDIAG_MESSAGES_H

#include <stddef.h>
#include <stdio.h>

#include "analysis/figures.h"
#include "analysis/recommend.h"

/* What the words may name: the runs (labels, layers), the comparison's baseline, the
 * recommendation (its islands). Any may be absent (NULL / -1). */
typedef struct msg_ctx {
    const an_run *runs;
    size_t nruns;
    long baseline;
    const recommendation *R;
    int alone;  /* 1: runs is one run, and every finding is about it (whatever its index in the
                   runs it was compared with) */
} msg_ctx;

/* The context of one run's own words (info, the run summary). */
msg_ctx msg_ctx_run(const an_run *r);

/* The words of a finding alone: what info, the run summary and compare's notes print. */
void msg_finding(char *buf, size_t n, const msg_ctx *c, const an_finding *f);
/* Whether a list leaves f out: the run has a finding that says the same and more about the same
 * layer (an activation overflow where the forward overflow is named, ...). JSON keeps them all. */
int msg_finding_covered(const an_finding_list *l, const an_finding *f);
/* The words of an item: a finding as a rule weighed it, or a rule's reasoning. */
void msg_item(char *buf, size_t n, const msg_ctx *c, const rec_item *it);
/* Its short words: a format's first problem on the verdict line ("" when it has none). */
void msg_item_short(char *buf, size_t n, const msg_ctx *c, const rec_item *it);
/* The words of a decision ("precision: bf16", "keep fc1,fc2 in FP32"). */
void msg_decision(char *buf, size_t n, const msg_ctx *c, const rec_decision *d);
/* The words of why it was taken, for a run option ("" when it names none). */
void msg_decision_why(char *buf, size_t n, const msg_ctx *c, const rec_decision *d);
/* The items of a section joined by sep (the verdict line: "; "). */
void msg_section(char *buf, size_t n, const msg_ctx *c, rec_sec sec, const char *sep);
/* The verdict line: the verdict's parts, then what it says about the formats not chosen
 * ("Not fp16: ...", "fp16 + dynamic loss scaling (initial 2^16) works too."). */
void msg_verdict(char *buf, size_t n, const msg_ctx *c);
/* A remedy's line: "--optim-state fp32 (every run): AdamW eps ...". */
void msg_remedy(char *buf, size_t n, const msg_ctx *c, const rec_decision *d);
/* The stable id of an item's words (JSON): the finding's key for R_NONE. */
const char *msg_item_key(const rec_item *it);

/* ------------------------------------------------------------------------------------------
 * How to apply a decision (apply.c): in ampdiag run's options, or in PyTorch's code for a run
 * traced by ampdiag.torch. One table, a row per decision, a column per vocabulary.
 * ------------------------------------------------------------------------------------------ */

typedef enum msg_vocab { MSG_VOCAB_AMPDIAG = 0, MSG_VOCAB_PYTORCH, MSG_NVOCABS } msg_vocab;
const char *msg_vocab_key(msg_vocab v);  /* "ampdiag", "pytorch" (JSON) */
const char *msg_vocab_name(msg_vocab v); /* "ampdiag run's options", "PyTorch" */
/* The vocabulary of a run's advice: PyTorch's for a trace ampdiag.torch wrote (its root
 * attribute writer starts "ampdiag.torch"), else ampdiag's. */
msg_vocab msg_run_vocab(const an_run *r);
/* How to apply decision d in vocabulary v ("--clip 2.61", "torch.nn.utils.clip_grad_norm_(...,
 * max_norm=2.61) ..."). Returns 1, or 0 with "" where it is not applied that way (an undecided
 * precision, a recipe's plan). */
int msg_apply(char *buf, size_t n, const msg_ctx *c, const rec_decision *d, msg_vocab v);
/* info: what a run's own finding suggests setting (a clip value, an FP16 run's loss scale, FP32
 * optimizer state) as the decision's words and how to apply it: "clip the gradient norm at
 * 2.61: torch.nn.utils...". 1, or 0 with "" when the finding suggests nothing to set. */
int msg_apply_finding(char *buf, size_t n, const msg_ctx *c, const an_finding *f, msg_vocab v);

/* ------------------------------------------------------------------------------------------
 * Figures: one name, one unit, one definition each
 * ------------------------------------------------------------------------------------------ */

const char *msg_fig_name(an_figid id);       /* "final training loss (last step)" */
/* What it is and how it is computed, its constants printed. */
void msg_fig_definition(char *buf, size_t n, an_figid id);
/* A run's figure as the reports print it ("0.3254", "2^16", "12.3%", "fc1.act +11.6",
 * "fc1.act overflowed (inf)", "-"); layer and kind named where the figure has them. */
void msg_fig_value(char *buf, size_t n, const an_run *r, an_figid id);

/* The comparison's figures (compare's table and notes). */
typedef enum msg_cfig { MSG_LOSS_GAP, MSG_CURVE_GAP, MSG_NOISE_BAND, MSG_NCFIGS } msg_cfig;
const char *msg_cfig_name(msg_cfig id);
/* The comparison's noise band and where it comes from: "+-27.6% (the larger of 1% and 2
 * standard errors of the baseline's final eval loss over its validation examples)". */
void msg_noise_band(char *buf, size_t n, const an_comparison *c);
void msg_cfig_definition(char *buf, size_t n, msg_cfig id);

/* What-if sections: the header of the tensors a what-if column (recipe 0) or the FP8 recipe
 * (recipe 1: Transformer Engine's delayed scaling) would hurt, "nothing" when none would;
 * "(and N more tensors)"; the line of one unscaled column's tensor. */
void msg_whatif_header(char *buf, size_t n, const an_run *r, int col, int recipe, int none);
void msg_whatif_more(char *buf, size_t n, size_t more);
/* What a what-if format would do to a tensor (F_WHATIF_HURT), as a clause: "3.1% of values would
 * flush to zero in E4M3 even with delayed scaling: its dynamic range ... is wider than ...". */
void msg_hurt_why(char *buf, size_t n, const an_run *r, const an_finding *f);
void msg_whatif_row(char *buf, size_t n, const an_run *r, const an_finding *f);
/* The line that says which what-if columns beyond FP16 and BF16 the traces hold, and the option
 * that shows them ("" when none). */
void msg_whatif_hidden(char *buf, size_t n, const char *columns);

/* Recipe sections (the findings F_RECIPE_*, recipe.h): the line that says which recipes the
 * traces counted and the option that shows one, and (quant) that they hold /quant columns ("" when
 * neither); the line for a recipe asked for
 * that no trace counted; the header of the tensors a recipe would hurt ("nothing" when none);
 * "(and N more tensors)"; the header of its per-layer plan. */
void msg_recipes_counted(char *buf, size_t n, const char *names, int quant);
void msg_recipe_not_counted(char *buf, size_t n, int recipe, const char *counted);
void msg_recipe_header(char *buf, size_t n, int recipe, int none);
void msg_recipe_plan_header(char *buf, size_t n, int recipe);
/* "ok", "saturate", "flush", "sqnr": the reason of an F_RECIPE_HURT or F_RECIPE_LAYER (JSON). */
const char *msg_recipe_reason_key(int reason);

/* ------------------------------------------------------------------------------------------
 * ampdiag tune's words: why it made each run, what it measured and adopted, its verification
 * ------------------------------------------------------------------------------------------ */

typedef enum msg_tune_id {
    MT_WHY_GIVEN,          /* the precisions as given, at the lr given */
    MT_WHY_REMEDY,         /* FP32 with the options the advice names for every run */
    MT_WHY_LRFIND,         /* the LR range test, from the same initial weights */
    MT_WHY_LR_BRACKET,     /* FP32 around the lr the search starts from */
    MT_WHY_LR_NEIGHBOUR,   /* FP32 beside the best lr measured, further the way it improves */
    MT_WHY_LR_LOWER,       /* nothing learned yet: FP32 below every lr tried */
    MT_WHY_LR_TOWARD,      /* nothing learned yet: FP32 beside the run with the lowest eval loss */
    MT_WHY_LR_PLATEAU,     /* FP32 a step past a neighbour of the best within its noise band */
    MT_WHY_LR_CLIFF,       /* FP32 half-way between the best and a neighbour that does not learn */
    MT_WHY_REMEDY_AGAIN,   /* an every-run option rejected at the lr given, at the lr measured */
    MT_WHY_HYPOTHESIS,     /* FP32 with a hypothesis of the advice (clip, warm-up) */
    MT_WHY_PRECISIONS,     /* the 16-bit precisions at the yardstick's lr and options */
    MT_WHY_RECOMMENDED,    /* the recommended precision with the options for its run */
    MT_LRFIND,             /* what the range test suggested */
    MT_ADOPTED,            /* a tested option kept: it measured better */
    MT_REJECTED,           /* ... not kept */
    MT_YARDSTICK,          /* the yardstick: the best FP32 run measured */
    MT_VERIFIED,           /* the run verified */
    MT_FAIL_UNHEALTHY,     /* a candidate that is not healthy */
    MT_FAIL_NOT_LEARNING,  /* ... that does not learn */
    MT_FAIL_GAP,           /* ... worse than the yardstick beyond the paired band */
    MT_FAIL_COMMAND,       /* ... whose command failed (`tune -- CMD`: an exit status, no complete
                              trace) */
    MT_NOTHING_LEARNS,     /* no FP32 run tune made learns */
    MT_NOT_VERIFIED,       /* no candidate passed */
    MT_CANNOT_JUDGE,       /* the validation set judges nothing: no run can be verified */
    MT_N
} msg_tune_id;

/* The words of tune's row id with its figures v[0..nv) and strings s[0..ns) (named by the row). */
void msg_tune(char *buf, size_t n, msg_tune_id id, const double *v, size_t nv, const char *const *s,
              size_t ns);
/* The stable id of a row (JSON). */
const char *msg_tune_key(msg_tune_id id);

/* ------------------------------------------------------------------------------------------
 * Numbers as every renderer prints them
 * ------------------------------------------------------------------------------------------ */

void msg_scale(char *buf, size_t n, double v);   /* "2^16" for powers of two, else "%g" */
void msg_duration(char *buf, size_t n, double ms); /* "8.4 s", "0.21 s", "12.3 ms", "-" (NaN) */
void msg_bytes(char *buf, size_t n, double b);   /* "1.23 GiB", "412 MiB", "96 KiB", "-" (NaN) */
/* What a run's peak memory measured, in a word: "CUDA", "RSS", or the source as the trace
 * names it; and in a sentence (the note under compare's table). */
const char *msg_peak_memory_source(const char *source);
const char *msg_peak_memory_what(const char *source);
void msg_pct(char *buf, size_t n, double f);     /* "0%", "1.5e-05%", "12.3%", "+inf", "?" */
void msg_const(char *buf, size_t n, an_kid k);   /* a constant in its style: "1 in 500", "1%" */
const char *msg_kind_words(int kind);            /* "activation gradients" */
const char *msg_kind_abbrev(int kind);           /* "agrad" */

/* ------------------------------------------------------------------------------------------
 * The glossary (`ampdiag help terms`, docs/glossary.md) and the rules' reference
 * (`ampdiag help rules`, docs/recommendations.md's generated part)
 * ------------------------------------------------------------------------------------------ */

typedef struct msg_term {
    const char *term;
    const char *definition;
} msg_term;

const msg_term *msg_glossary(size_t *n);
/* A term's definition, its constants printed. */
void msg_term_definition(char *buf, size_t n, const msg_term *t);
/* The glossary as text, wrapped at width (figures first, then terms). 0 or -1 (write error). */
int msg_glossary_text(FILE *f, int width);
int msg_glossary_markdown(FILE *f);
/* The reference of the constants, findings and rule items, their words with the constants
 * printed, as Markdown (the generated part of docs/recommendations.md). 0 or -1. */
int msg_rules_markdown(FILE *f);
/* Every template expands without an unknown name (a test): the number of problems, each
 * described on f (may be NULL). */
int msg_check_templates(FILE *f);
/* The table of msg_apply as Markdown (part of msg_rules_markdown), and its templates checked
 * (part of msg_check_templates). */
int msg_apply_markdown(FILE *f);
int msg_apply_check(FILE *f);

#endif
