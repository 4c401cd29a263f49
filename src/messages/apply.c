/*
 * apply.c - how to apply a decision (messages.h): one table, a row per decision (and, for the
 * precision, per value), with the words in each vocabulary: ampdiag run's options, and PyTorch's
 * code for a run traced by ampdiag.torch. The numbers are the decision's own (its value and
 * "to"), printed by the template styles of expand.c (py2: a Python literal, 2.0**22 for a power
 * of two; pylist: a comma list as the strings of a Python list); {device} is the device type the
 * baseline ran on, as torch.autocast names it. A NULL cell: the decision is not applied that way.
 * docs/recommendations.md prints the table (msg_rules_markdown).
 */
#include "messages/messages_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct apply_row {
    rec_what what;
    const char *to;                   /* the decision's "to" this row is for; NULL: any */
    const char *text[MSG_NVOCABS];    /* ampdiag, pytorch */
} apply_row;

/* The code that keeps a module list in FP32 under autocast: its forward runs with autocast off,
 * its floating-point inputs cast to FP32 by a pre-hook. */
#define TORCH_FP32_MODULES                                                                          \
    "for name in [{to:pylist}]: m = model.get_submodule(name); "                                    \
    "m.forward = torch.autocast(device_type=\"{device}\", enabled=False)(m.forward); "             \
    "m.register_forward_pre_hook(lambda m, args: tuple(a.float() if torch.is_tensor(a) and "      \
    "a.is_floating_point() else a for a in args))"

static const apply_row rows[] = {
    {WHAT_PRECISION, "fp32", {"--precision fp32",
                              "no torch.autocast and no GradScaler: the model and its inputs in torch.float32"}},
    {WHAT_PRECISION, "bf16", {"--precision bf16",
                              "with torch.autocast(device_type=\"{device}\", dtype=torch.bfloat16): around the "
                              "forward pass and the loss; parameters stay torch.float32, no GradScaler"}},
    {WHAT_PRECISION, "bf16-pure", {"--precision bf16-pure (as it is)",
                                   "keep the parameters in torch.bfloat16 as they are (no FP32 master copy); "
                                   "if a longer run stalls, keep them in torch.float32 under torch.autocast"}},
    {WHAT_PRECISION, "fp16", {"--precision fp16 --loss-scale dynamic",
                              "with torch.autocast(device_type=\"{device}\", dtype=torch.float16): around the "
                              "forward pass and the loss, with a GradScaler: scaler.scale(loss).backward(); "
                              "scaler.step(opt); scaler.update()"}},
    {WHAT_PRECISION, "undecided", {NULL, NULL}}, /* fix the baseline first */
    {WHAT_FP32_LAYERS, NULL, {"--fp32-layers {to}", "keep {to} in FP32 under autocast: " TORCH_FP32_MODULES}},
    {WHAT_LOSS_SCALE, NULL, {"--loss-scale dynamic --scale-init {value:int}",
                             "scaler = torch.amp.GradScaler(\"{device}\", init_scale={value:py2}), given to "
                             "ampdiag.torch's tracer too"}},
    {WHAT_LR, "keep", {"--lr {value:g6} (as it is)", "keep the optimizer's lr={value:g6}"}},
    {WHAT_LR, "keep-use-master-weights", {"--lr {value:g6} (as it is)", "keep the optimizer's lr={value:g6}"}},
    {WHAT_LR, NULL, {"--lr {value:g6}",
                     "pass lr={value:g6} to the optimizer (torch.optim.AdamW(model.parameters(), lr={value:g6}) "
                     "or yours; with an lr scheduler, create the optimizer with it before the scheduler, which "
                     "scales from it), or set it: for g in opt.param_groups: g[\"lr\"] = {value:g6}"}},
    {WHAT_CLIP, NULL, {"--clip {value:g6}",
                       "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm={value:g6}) after "
                       "loss.backward(), before opt.step() (with a GradScaler: after scaler.unscale_(opt), "
                       "before scaler.step(opt))"}},
    {WHAT_OPT_STATE, NULL, {"--optim-state {to}",
                            "keep the optimizer over torch.float32 parameters (torch.autocast for the 16-bit "
                            "compute, not model.half() or model.to(torch.bfloat16)): its state (AdamW's "
                            "exp_avg, exp_avg_sq) is then torch.float32"}},
    {WHAT_MASTER_WEIGHTS, NULL, {"--precision bf16 (FP32 master weights), not bf16-pure",
                                 "keep the parameters in torch.float32 (the FP32 master weights) and run the "
                                 "16-bit compute under torch.autocast, not model.to(torch.bfloat16) or "
                                 "model.half()"}},
    {WHAT_WARMUP, NULL, {"--schedule cosine:STEPS with more warm-up STEPS",
                         "more warm-up steps: torch.optim.lr_scheduler.LinearLR(opt, start_factor=..., "
                         "total_iters=...) with a larger total_iters, chained before the main schedule by "
                         "torch.optim.lr_scheduler.SequentialLR"}},
    {WHAT_RECIPE_BF16, NULL, {NULL, NULL}}, /* a what-if plan, nothing a run sets */
};

static const char *const vocab_keys[MSG_NVOCABS] = {"ampdiag", "pytorch"};
static const char *const vocab_names[MSG_NVOCABS] = {"ampdiag run's options", "PyTorch"};

const char *msg_vocab_key(msg_vocab v) { return (int)v >= 0 && v < MSG_NVOCABS ? vocab_keys[v] : "?"; }
const char *msg_vocab_name(msg_vocab v) { return (int)v >= 0 && v < MSG_NVOCABS ? vocab_names[v] : "?"; }

msg_vocab msg_run_vocab(const an_run *r)
{
    static const char torch_writer[] = "ampdiag.torch";
    for (size_t i = 0; r && i < r->nattrs; i++)
        if (strcmp(r->attrs[i].name, "writer") == 0 && r->attrs[i].type == AMPDIAG_ATTR_STR && r->attrs[i].s &&
            strncmp(r->attrs[i].s, torch_writer, sizeof torch_writer - 1) == 0)
            return MSG_VOCAB_PYTORCH;
    return MSG_VOCAB_AMPDIAG;
}

static const apply_row *row_of(const rec_decision *d)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].what == d->what && (!rows[i].to || strcmp(rows[i].to, d->to) == 0))
            return &rows[i];
    return NULL;
}

int msg_apply(char *buf, size_t n, const msg_ctx *c, const rec_decision *d, msg_vocab v)
{
    buf[0] = 0;
    const apply_row *r = row_of(d);
    if (!r || (int)v < 0 || v >= MSG_NVOCABS || !r->text[v] || (strstr(r->text[v], "{value") && !isfinite(d->value)))
        return 0; /* (a value to set that the decision does not have: nothing to apply) */
    static const char *const names[REC_MAXV] = {"value"};
    const double val[REC_MAXV] = {d->value};
    msg_src x = {c, NULL, val, names, -1, 0, 0, 0, NULL, d->to, NULL, NULL};
    msg_expand(buf, n, r->text[v], &x);
    return 1;
}

/* What a run's own finding suggests setting, as the decision compare would take (info). */
typedef struct finding_apply {
    an_fid f;
    rec_what what;
    const char *to;   /* the decision's "to" */
    const char *fig;  /* the figure that is its value (NULL: none) */
    int pow2;         /* the figure is an exponent: the value is 2^it */
    int fp16_only;    /* only for a run in FP16 (the loss scale) */
} finding_apply;

static const finding_apply finding_rows[] = {
    {F_LOSS_SCALE, WHAT_LOSS_SCALE, "dynamic", "log2", 1, 1},
    {F_CLIP_VALUE, WHAT_CLIP, "", "value", 0, 0},
    {F_ADAM_EPS_ZERO, WHAT_OPT_STATE, "fp32", NULL, 0, 0},
};

int msg_apply_finding(char *buf, size_t n, const msg_ctx *c, const an_finding *f, msg_vocab v)
{
    buf[0] = 0;
    const an_run *r = c->alone ? c->runs : c->runs && f->s.run >= 0 && (size_t)f->s.run < c->nruns ? &c->runs[f->s.run] : NULL;
    for (size_t i = 0; i < sizeof finding_rows / sizeof finding_rows[0]; i++) {
        const finding_apply *a = &finding_rows[i];
        if (a->f != f->id || (a->fp16_only && (!r || r->prec != PREC_FP16)))
            continue;
        rec_decision d;
        memset(&d, 0, sizeof d);
        d.what = a->what;
        d.value = NAN;
        d.scope = REM_NONE;
        snprintf(d.to, sizeof d.to, "%s", a->to);
        int k = a->fig ? an_finding_fig(f->id, a->fig) : -1;
        if (k >= 0)
            d.value = a->pow2 ? ldexp(1.0, (int)f->v[k]) : f->v[k];
        if (a->fig && !isfinite(d.value))
            return 0;
        char what[300], how[1500];
        msg_ctx m = *c;
        m.baseline = -1;
        msg_decision(what, sizeof what, &m, &d);
        if (!msg_apply(how, sizeof how, &m, &d, v))
            return 0;
        snprintf(buf, n, "%s: %s", what, how);
        return 1;
    }
    return 0;
}

int msg_apply_markdown(FILE *f)
{
    fprintf(f, "\n### Applying the decisions\n\nHow each decision is applied, in the words of the run's "
               "writer: `ampdiag run`'s options, or PyTorch's code for a trace `ampdiag.torch` wrote "
               "(`{device}` is the device type the baseline ran on).\n\n| what | for | %s | %s |\n|---|---|---|---|\n",
            vocab_names[0], vocab_names[1]);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fprintf(f, "| `%s` | %s | ", rec_what_key(rows[i].what), rows[i].to ? rows[i].to : "any");
        for (int v = 0; v < MSG_NVOCABS; v++) {
            if (rows[i].text[v])
                fprintf(f, "`%s`", rows[i].text[v]);
            else
                fprintf(f, "-");
            fprintf(f, " |%s", v + 1 < MSG_NVOCABS ? " " : "\n");
        }
    }
    return ferror(f) ? -1 : 0;
}

int msg_apply_check(FILE *out)
{
    int bad = 0;
    static const char *const names[REC_MAXV] = {"value"};
    static const double v[REC_MAXV] = {0};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        for (int k = 0; k < MSG_NVOCABS; k++) {
            if (!rows[i].text[k])
                continue;
            msg_src x;
            memset(&x, 0, sizeof x);
            x.run = -1;
            x.check = 1;
            x.v = v;
            x.vnames = names;
            x.report = out;
            x.to = "";
            char buf[4096];
            msg_expand(buf, sizeof buf, rows[i].text[k], &x);
            bad += x.bad;
        }
    return bad;
}
