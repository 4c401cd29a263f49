/*
 * optim.c - the optimizer as the training loop sees it: its configuration, its state (held by
 * the backend, in the backend's memory) and its steps, which the backend's optim_step,
 * grad_norm and update_stats carry out (src/backend/cpu/optim_cpu.c for the CPU: what SGD and
 * AdamW compute, exactly); gradient clipping; learning-rate schedules.
 */
#include "train/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void optim_config_default(optim_config *c, optim_kind kind)
{
    c->kind = kind;
    c->momentum = 0.9;
    c->weight_decay = 0.0;
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    c->eps = 1e-8;
    c->state_fmt = AMPDIAG_FP32;
    c->weight_fmt = AMPDIAG_FP32;
    c->round_flags = 0;
    c->copy_fmt = AMPDIAG_FP32;
}

int optim_kind_parse(const char *name, optim_kind *k)
{
    if (strcasecmp(name, "sgd") == 0) { *k = OPT_SGD; return 0; }
    if (strcasecmp(name, "adamw") == 0) { *k = OPT_ADAMW; return 0; }
    return -1;
}

const char *optim_kind_name(optim_kind k) { return k == OPT_SGD ? "sgd" : "adamw"; }

int optim_init(optim *o, const backend *bk, const optim_config *c, size_t nparams)
{
    memset(o, 0, sizeof *o);
    o->bk = bk;
    o->cfg = *c;
    o->n = nparams;
    size_t bytes = (nparams ? nparams : 1) * sizeof(float);
    o->m = bk->alloc(bk, bytes); /* zero-filled */
    if (c->kind == OPT_ADAMW)
        o->v = bk->alloc(bk, bytes);
    if (!o->m || (c->kind == OPT_ADAMW && !o->v)) {
        optim_free(o);
        return -1;
    }
    return 0;
}

void optim_free(optim *o)
{
    if (o->bk) {
        o->bk->free(o->bk, o->m);
        o->bk->free(o->bk, o->v);
    }
    o->m = o->v = NULL;
}

void optim_stats_init(optim_stats *s)
{
    memset(s, 0, sizeof *s);
    ampdiag_tstats_init(&s->weight);
    ampdiag_tstats_init(&s->update);
}

void optim_begin(optim *o) { o->t++; }

void optim_update(optim *o, float *w, const float *g, size_t off, size_t n, double lr, float ginv, float gscale,
                  float *dw_keep, float *w_keep, float *w_copy, uint64_t *nonfinite)
{
    o->bk->optim_step(o->bk, &o->cfg, o->t, w + off, g + off, o->m + off, o->v ? o->v + off : NULL, n, lr,
                      ginv, gscale, dw_keep, w_keep, w_copy, nonfinite);
}

void optim_update_stats(const optim *o, const float *w_old, const float *dw, size_t n, optim_stats *st,
                        ampdiag_hist *hu)
{
    o->bk->update_stats(o->bk, &o->cfg, w_old, dw, n, st, hu);
}

void optim_update_stats_many(const optim *o, size_t k, const bk_update_req *req)
{
    bk_update_stats_many(o->bk, &o->cfg, k, req);
}

float clip_coefficient(double norm, double max_norm)
{
    if (!(max_norm > 0) || !isfinite(norm))
        return 1.0f;
    double c = max_norm / (norm + 1e-6);
    return c < 1.0 ? (float)c : 1.0f;
}

int schedule_parse(schedule *s, const char *text, double lr, long total, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->lr = lr;
    s->total = total;
    if (!text || strcmp(text, "constant") == 0) {
        s->kind = SCHED_CONSTANT;
        return 0;
    }
    if (strncmp(text, "cosine", 6) == 0 && (text[6] == 0 || text[6] == ':')) {
        s->kind = SCHED_COSINE;
        s->warmup = total / 20;
        s->min_lr = lr * 0.1;
        const char *p = text + 6;
        if (*p == ':') {
            char *end;
            long wu = strtol(p + 1, &end, 10);
            if (end == p + 1 || wu < 0 || (*end && *end != ':')) goto bad;
            s->warmup = wu;
            p = end;
            if (*p == ':') {
                double mn = strtod(p + 1, &end);
                if (end == p + 1 || *end || !(mn >= 0) || !isfinite(mn)) goto bad; /* NaN, inf */
                s->min_lr = mn;
            }
        }
        return 0;
    }
    if (strncmp(text, "range:", 6) == 0) {
        /* the LR range test: exponentially from MIN_LR at step 0 to lr at the last step */
        char *end;
        double mn = strtod(text + 6, &end);
        if (end == text + 6 || *end || !(mn > 0) || !isfinite(mn) || !(mn < lr)) goto bad;
        s->kind = SCHED_RANGE;
        s->min_lr = mn;
        return 0;
    }
bad:
    snprintf(err, errlen, "--schedule '%s': expected 'constant', 'cosine[:WARMUP_STEPS[:MIN_LR]]' or "
             "'range:MIN_LR' (MIN_LR below --lr)", text);
    return -1;
}

double schedule_lr(const schedule *s, long t)
{
    if (s->kind == SCHED_RANGE)
        return s->total > 1 ? s->min_lr * pow(s->lr / s->min_lr, (double)t / (double)(s->total - 1))
                            : s->lr;
    if (s->warmup > 0 && t < s->warmup)
        return s->lr * (double)(t + 1) / (double)s->warmup;
    if (s->kind == SCHED_CONSTANT)
        return s->lr;
    long span = s->total - s->warmup;
    if (span <= 0)
        return s->lr;
    double p = (double)(t - s->warmup) / (double)span;
    if (p > 1) p = 1;
    return s->min_lr + 0.5 * (s->lr - s->min_lr) * (1.0 + cos(3.14159265358979323846 * p));
}
