/*
 * recommend.c - the rules in order (recommend.h): the precision rules (rules_prec.c,
 * rules_bf16.c, rules_verdict.c), the remedies, the learning rate (rules_lr.c), the clip value
 * and --fail-on (rules_clip.c); the names of targets, verdicts and sections; what the rule files
 * share (rules.h).
 */
#include "analysis/rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * Names and parsing
 * ------------------------------------------------------------------------------------------ */

static const char *const target_names[] = {"any", "sm70", "sm75", "sm80", "sm89", "sm90", "cpu"};

int rec_target_parse(const char *s, rec_target *t)
{
    for (size_t i = 0; i < NELEM(target_names); i++)
        if (strcmp(s, target_names[i]) == 0) {
            *t = (rec_target)i;
            return 0;
        }
    return -1;
}

const char *rec_target_name(rec_target t)
{
    return (size_t)t < NELEM(target_names) ? target_names[t] : "?";
}

int rec_target_has_bf16(rec_target t) { return t != TGT_SM70 && t != TGT_SM75; }
int rec_target_has_fp16(rec_target t) { (void)t; return 1; }

const char *rec_precision_name(rec_precision p)
{
    switch (p) {
    case REC_FP32: return "fp32";
    case REC_FP16: return "fp16";
    case REC_BF16: return "bf16";
    default: return "undecided";
    }
}

const char *rec_lr_name(rec_lr_verdict v)
{
    switch (v) {
    case LR_KEEP: return "keep";
    case LR_LOWER: return "lower";
    case LR_RAISE: return "raise";
    case LR_KEEP_MASTER: return "keep-use-master-weights";
    case LR_PICK: return "pick";
    default: return "unknown";
    }
}

const char *rec_scope_name(rec_scope s)
{
    return s == REM_EVERY_RUN ? "every-run" : s == REM_RECOMMENDED ? "recommended" : "none";
}

static const char *const sec_keys[REC_NSECS] = {
    "verdict", "why", "fp16_against", "fp16_for", "bf16_against", "bf16_for",
    "loss_scale", "lr_line", "lr", "clip_line", "clip", "warnings", "fail_on",
    "speed", "claim",
};

const char *rec_sec_key(rec_sec s) { return (int)s >= 0 && s < REC_NSECS ? sec_keys[s] : "?"; }

static const char *const what_keys[REC_NWHATS] = {
    "precision", "fp32_layers", "loss_scale", "lr", "clip", "optimizer_state", "master_weights",
    "warmup", "inputs", "recipe_bf16_layers",
};

const char *rec_what_key(rec_what w) { return (int)w >= 0 && w < REC_NWHATS ? what_keys[w] : "?"; }

const char *rec_conf_key(rec_conf c)
{
    return c == CONF_OBSERVED ? "observed" : c == CONF_MEASURED ? "measured" : "hypothesis";
}

/* ------------------------------------------------------------------------------------------
 * --fail-on: finding ids, and the four groups every version took
 * ------------------------------------------------------------------------------------------ */

#define B REC_FAIL_BIT
const rec_fail_set REC_FAIL_NAN = B(F_FWD_NONFINITE) | B(F_LOSS_NONFINITE) | B(F_NONFINITE_EVENT) |
                                  B(F_NONFINITE_WEIGHTS) | B(F_EVAL_NONFINITE) | B(F_EVAL_ONLY_NONFINITE);
const rec_fail_set REC_FAIL_SKIPS = B(F_SKIPS_ABOVE_LIMIT) | B(F_SCALE_COLLAPSED);
const rec_fail_set REC_FAIL_DIVERGENCE = B(F_DIVERGED);
const rec_fail_set REC_FAIL_OVERFLOW = B(F_OVERFLOW_IN_RUN);
#undef B

static const struct {
    const char *name;
    const rec_fail_set *set;
} fail_groups[] = {
    {"nan", &REC_FAIL_NAN}, {"skips", &REC_FAIL_SKIPS}, {"divergence", &REC_FAIL_DIVERGENCE},
    {"overflow", &REC_FAIL_OVERFLOW},
};

const char *rec_fail_name(an_fid id)
{
    for (size_t g = 0; g < NELEM(fail_groups); g++)
        if (*fail_groups[g].set & REC_FAIL_BIT(id))
            return fail_groups[g].name;
    return an_finding_def_get(id)->key;
}

/* One word of the list into *set: a group, a finding's key, "all" or "none". 0 or -1. */
static int fail_word(const char *w, size_t len, rec_fail_set *set)
{
    char word[64];
    if (len >= sizeof word)
        return -1;
    memcpy(word, w, len);
    word[len] = 0;
    if (strcmp(word, "none") == 0)
        return 0;
    for (size_t g = 0; g < NELEM(fail_groups); g++)
        if (strcmp(word, fail_groups[g].name) == 0 || strcmp(word, "all") == 0) {
            *set |= *fail_groups[g].set;
            if (strcmp(word, "all"))
                return 0;
        }
    if (strcmp(word, "all") == 0)
        return 0;
    an_fid id = an_finding_parse(word);
    if (id == F_NONE)
        return -1;
    *set |= REC_FAIL_BIT(id);
    return 0;
}

int rec_fail_parse(const char *list, rec_fail_set *set, char *err, size_t errlen)
{
    *set = 0;
    if (!list || !*list) {
        snprintf(err, errlen, "--fail-on needs a list (nan,skips,divergence,overflow or finding ids: "
                 "ampdiag help rules)");
        return -1;
    }
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (fail_word(p, len, set)) {
            snprintf(err, errlen,
                     "--fail-on: unknown condition '%.*s' (expected a comma-separated list of nan, "
                     "skips, divergence, overflow, all, or the id of a finding: ampdiag help rules)",
                     (int)len, p);
            return -1;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * What the rule files share (rules.h)
 * ------------------------------------------------------------------------------------------ */

int rec_say(recommendation *R, rec_sec sec, rec_mid msg, const an_finding *f, int run,
            const double *v, size_t nv)
{
    rec_item *it = vec_add(&R->items);
    if (!it) {
        R->oom = 1;
        return -1;
    }
    it->msg = msg;
    it->sec = sec;
    it->f = f;
    it->run = run >= 0 ? run : f ? f->s.run : -1;
    for (size_t i = 0; i < REC_MAXV; i++)
        it->v[i] = i < nv ? v[i] : NAN;
    return (int)(R->items.n - 1);
}

rec_decision *rec_decide(recommendation *R, rec_what what, rec_conf conf)
{
    rec_decision *d = vec_add(&R->decisions);
    if (!d) {
        R->oom = 1;
        return NULL;
    }
    d->what = what;
    d->conf = conf;
    d->value = NAN;
    d->scope = REM_NONE;
    d->why = R_NONE;
    for (size_t i = 0; i < REC_MAXV; i++)
        d->v[i] = NAN;
    return d;
}

void rec_because(rec_decision *d, const an_finding *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < d->nbecause; i++)
        if (d->because[i] == f)
            return;
    if (d->nbecause < REC_MAX_BECAUSE)
        d->because[d->nbecause++] = f;
}

void rec_summary(rec_format *f, int item)
{
    if (f->summary < 0 && item >= 0)
        f->summary = item;
}

int64_t rec_fail_step(const an_run *r)
{
    const an_finding *d = an_run_finding(r, F_DIVERGED);
    if (d)
        return (int64_t)rec_fv(d, "step");
    const an_finding *l = an_run_finding(r, F_LOSS_NONFINITE);
    return l ? (int64_t)rec_fv(l, "first_step") : -1;
}

int rec_failed_from_start(const an_run *r)
{
    const an_finding *f = an_run_finding(r, F_FWD_NONFINITE);
    return f && rec_fv(f, "at_start") != 0;
}

int rec_every_run_fails(const an_run *runs, size_t n)
{
    int all = n > 0;
    for (size_t i = 0; i < n; i++)
        all &= run_failed(&runs[i]) && !rec_failed_from_start(&runs[i]);
    return all;
}

double rec_fv(const an_finding *f, const char *name)
{
    if (!f)
        return NAN;
    int i = an_finding_fig(f->id, name);
    return i >= 0 ? f->v[i] : NAN;
}

void rec_append_name(char *buf, size_t n, const char *name)
{
    size_t len = strlen(buf);
    if (len + strlen(name) + 2 >= n)
        return;
    if (len)
        strcat(buf, ",");
    strcat(buf, name);
}

int rec_in_list(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, ",");
        if (k == len && strncmp(p, name, len) == 0)
            return 1;
        p += k + (p[k] == ',');
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */

size_t rec_remedies(const recommendation *R, const rec_decision **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < R->decisions.n && n < max; i++)
        if (R->decisions.v[i].option[0])
            out[n++] = &R->decisions.v[i];
    return n;
}

const rec_item *rec_find_item(const recommendation *R, rec_sec sec, rec_mid msg, an_fid f)
{
    for (size_t i = 0; i < R->items.n; i++) {
        const rec_item *it = &R->items.v[i];
        if ((sec == REC_NSECS || it->sec == sec) && (msg == R_NONE || it->msg == msg) &&
            (f == F_NONE || (it->f && it->f->id == f)))
            return it;
    }
    return NULL;
}

int recommend(const an_run *runs, size_t n, const an_comparison *c, rec_target target,
              rec_fail_set fail_mask, recommendation *R)
{
    memset(R, 0, sizeof *R);
    R->target = target;
    R->fail_mask = fail_mask;
    R->ref = c->baseline;
    R->lr_current = R->lr_factor = R->lr_suggested = NAN;
    R->fp16.summary = R->bf16.summary = -1;
    R->islands_param_share = R->islands_flop_share = NAN;
    R->islands_forward_finite = -1;
    if (n == 0)
        return 0;
    rec_precision_rules(runs, n, c, R);
    rec_remedy_rules(runs, n, R);
    rec_lr_rules(runs, n, c, R);
    rec_clip_rules(runs, c, R);
    rec_fail_checks(runs, n, R);
    rec_trace_warnings(runs, n, R);
    rec_speed_rules(runs, n, c, R);
    rec_claim_rules(runs, n, c, R);
    return R->oom ? -1 : 0;
}

void rec_free(recommendation *R)
{
    if (!R)
        return;
    vec_free(&R->items);
    vec_free(&R->decisions);
}
