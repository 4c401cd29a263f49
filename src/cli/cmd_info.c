/*
 * cmd_info.c - `ampdiag info run.h5`: what one trace says. The run (precision, model, data,
 * steps, status: complete, diverged, interrupted or cut off), the loss, the loss scale, skipped
 * steps, events, the layers with the least FP16/BF16 headroom, and the "what if" totals: how
 * many recorded values would overflow, underflow or be subnormal in FP16 and in BF16, whatever
 * precision the run used. Text for people, --format json for programs (documented in --help
 * and traces/FORMAT.md).
 */
#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "cli/cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ampdiag info TRACE.h5 [--format text|json] [--top N]\n"
            "\n"
            "Summarise one trace: the run (precision, model, data, steps, status), the loss\n"
            "(first, last, minimum), the loss scale (initial, minimum, final, backoffs), skipped\n"
            "steps, events, the (layer, tensor kind) pairs with the least FP16 and BF16 headroom\n"
            "at each end of the range, and what-if totals: values that would overflow, underflow\n"
            "(round to zero) or be subnormal in FP16 and BF16, summed over the trace, per tensor\n"
            "kind, and the share of non-zero updates that would round away if the weights were\n"
            "stored in FP16 / BF16 (no FP32 master copy). An FP32 run so predicts both 16-bit runs.\n"
            "\n"
            "Headroom is in binades (factors of 2); negative means values beyond the range\n"
            "(on the underflow side: subnormal, and beyond 10 (fp16) or 7 (bf16) binades, zero):\n"
            "  overflow side   log2(max_finite / absmax)     (fp16 65504, bf16 3.39e38)\n"
            "  underflow side  log2(absmin_nz / min_normal)  (fp16 2^-14, bf16 2^-126)\n"
            "with absmax the largest and absmin_nz the smallest non-zero |value| recorded for that\n"
            "layer and kind over the whole trace.\n"
            "\n"
            "A trace whose status is still 'running' was cut off (its writer was killed or is\n"
            "still running): it holds every record up to the writer's last flush.\n"
            "\n"
            "options:\n"
            "  --format text|json  output format (default text; json is described in\n"
            "                      traces/FORMAT.md, section 'ampdiag info --format json')\n"
            "  --top N             rows of the headroom tables in text output (default 5)\n"
            "  -h, --help\n"
            "\n"
            "exit status: 0 success, 2 bad usage or not a valid trace, 3 I/O error\n");
}

/* ------------------------------------------------------------------------------------------
 * Aggregation
 * ------------------------------------------------------------------------------------------ */

struct agg {
    uint64_t records, count, nan, posinf, neginf;
    uint64_t f16o, f16u, f16s, b16o, b16u, b16s, lost;
    uint64_t zero, lost_if16, lost_ifb16; /* zeros; what-if lost updates (FP16 / BF16 weights) */
    double absmax;      /* -1 while none */
    int64_t absmax_step;
    double absmin_nz;   /* +inf while none */
    int64_t absmin_step;
};

struct headroom {
    int layer, kind;
    double absmax, absmin_nz;
    int64_t absmax_step, absmin_step;
    double over, under; /* binades */
};

struct info {
    const char *path;
    ampdiag_trace_reader *r;
    ampdiag_trace_counts c;
    ampdiag_trace_layer *layers;
    size_t nlayers;
    ampdiag_trace_step *steps;
    size_t nsteps;
    ampdiag_trace_event *events;
    size_t nevents;
    ampdiag_trace_eval *evals;
    size_t nevals;
    struct agg *agg;        /* [nlayers * AMPDIAG_NKINDS] */
    struct agg kind_tot[AMPDIAG_NKINDS];
    uint64_t bad_rows;      /* tensor rows with an unknown layer or kind */
    int have_lost_if;       /* /tensors has lost_if_fp16 and lost_if_bf16 */
    /* one entry per (layer, kind) with finite non-zero values, in four orders: least headroom
     * first on the overflow side and on the underflow side, for fp16 and for bf16 */
    struct headroom *h[2][2]; /* [fp16, bf16][overflow, underflow] */
    size_t nh;
};

static void agg_init(struct agg *a)
{
    memset(a, 0, sizeof *a);
    a->absmax = -1;
    a->absmin_nz = INFINITY;
}

static void agg_add(struct agg *a, const ampdiag_trace_tensor *t)
{
    a->records++;
    a->count += t->count;
    a->nan += t->n_nan;
    a->posinf += t->n_posinf;
    a->neginf += t->n_neginf;
    a->f16o += t->fp16_overflow;
    a->f16u += t->fp16_underflow;
    a->f16s += t->fp16_subnormal;
    a->b16o += t->bf16_overflow;
    a->b16u += t->bf16_underflow;
    a->b16s += t->bf16_subnormal;
    a->lost += t->lost_updates;
    a->zero += t->n_zero;
    a->lost_if16 += t->lost_if_fp16;
    a->lost_ifb16 += t->lost_if_bf16;
    if (!isnan(t->absmax) && t->absmax > a->absmax) {
        a->absmax = t->absmax;
        a->absmax_step = t->step;
    }
    if (!isnan(t->absmin_nz) && t->absmin_nz > 0 && t->absmin_nz < a->absmin_nz) {
        a->absmin_nz = t->absmin_nz;
        a->absmin_step = t->step;
    }
}

static void agg_merge(struct agg *d, const struct agg *s)
{
    d->records += s->records;
    d->count += s->count;
    d->nan += s->nan;
    d->posinf += s->posinf;
    d->neginf += s->neginf;
    d->f16o += s->f16o;
    d->f16u += s->f16u;
    d->f16s += s->f16s;
    d->b16o += s->b16o;
    d->b16u += s->b16u;
    d->b16s += s->b16s;
    d->lost += s->lost;
    d->zero += s->zero;
    d->lost_if16 += s->lost_if16;
    d->lost_ifb16 += s->lost_ifb16;
    if (s->absmax > d->absmax) {
        d->absmax = s->absmax;
        d->absmax_step = s->absmax_step;
    }
    if (s->absmin_nz < d->absmin_nz) {
        d->absmin_nz = s->absmin_nz;
        d->absmin_step = s->absmin_step;
    }
}

static int cmp_tie(const struct headroom *x, const struct headroom *y)
{
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return x->kind < y->kind ? -1 : x->kind > y->kind;
}

static int cmp_over(const void *a, const void *b)
{
    const struct headroom *x = a, *y = b;
    if (x->over != y->over) return x->over < y->over ? -1 : 1;
    return cmp_tie(x, y);
}

static int cmp_under(const void *a, const void *b)
{
    const struct headroom *x = a, *y = b;
    if (x->under != y->under) return x->under < y->under ? -1 : 1;
    return cmp_tie(x, y);
}

/* Returns 0 or a trace error code (message in ampdiag_trace_errmsg). */
static int load(struct info *in)
{
    int rc;
    ampdiag_trace_get_counts(in->r, &in->c);
    in->have_lost_if = ampdiag_trace_has_field(in->r, "/tensors", "lost_if_fp16") &&
                       ampdiag_trace_has_field(in->r, "/tensors", "lost_if_bf16");
    if ((rc = ampdiag_trace_read_layers(in->r, &in->layers, &in->nlayers)) ||
        (rc = ampdiag_trace_read_steps(in->r, &in->steps, &in->nsteps)) ||
        (rc = ampdiag_trace_read_events(in->r, &in->events, &in->nevents)) ||
        (rc = ampdiag_trace_read_evals(in->r, &in->evals, &in->nevals)))
        return rc;
    size_t ncell = (in->nlayers ? in->nlayers : 1) * AMPDIAG_NKINDS;
    in->agg = malloc(ncell * sizeof *in->agg);
    if (!in->agg)
        return AMPDIAG_TRACE_ENOMEM;
    for (int f = 0; f < 2; f++)
        for (int side = 0; side < 2; side++)
            if (!(in->h[f][side] = malloc(ncell * sizeof *in->h[f][side])))
                return AMPDIAG_TRACE_ENOMEM;
    for (size_t i = 0; i < ncell; i++)
        agg_init(&in->agg[i]);
    for (int k = 0; k < AMPDIAG_NKINDS; k++)
        agg_init(&in->kind_tot[k]);
    enum { BATCH = 65536 };
    for (size_t first = 0; first < in->c.tensors; first += BATCH) {
        ampdiag_trace_tensor *t;
        size_t n;
        if ((rc = ampdiag_trace_read_tensors(in->r, first, BATCH, &t, &n)))
            return rc;
        for (size_t i = 0; i < n; i++) {
            if (t[i].layer < 0 || (size_t)t[i].layer >= in->nlayers || t[i].kind < 0 ||
                t[i].kind >= AMPDIAG_NKINDS) {
                in->bad_rows++;
                continue;
            }
            agg_add(&in->agg[(size_t)t[i].layer * AMPDIAG_NKINDS + (size_t)t[i].kind], &t[i]);
        }
        free(t);
        if (n == 0)
            break;
    }
    const ampdiag_format_info *f16 = ampdiag_format_get(AMPDIAG_FP16);
    const ampdiag_format_info *bf = ampdiag_format_get(AMPDIAG_BF16);
    for (size_t l = 0; l < in->nlayers; l++)
        for (int k = 0; k < AMPDIAG_NKINDS; k++) {
            const struct agg *a = &in->agg[l * AMPDIAG_NKINDS + (size_t)k];
            agg_merge(&in->kind_tot[k], a);
            if (a->records == 0 || !(a->absmax > 0) || isinf(a->absmin_nz))
                continue;
            struct headroom h = {(int)l, k, a->absmax, a->absmin_nz, a->absmax_step, a->absmin_step,
                                 0, 0};
            for (int f = 0; f < 2; f++) {
                const ampdiag_format_info *fi = f ? bf : f16;
                h.over = log2(fi->max_finite / a->absmax);
                h.under = log2(a->absmin_nz / fi->min_normal);
                in->h[f][0][in->nh] = h;
                in->h[f][1][in->nh] = h;
            }
            in->nh++;
        }
    for (int f = 0; f < 2; f++) {
        qsort(in->h[f][0], in->nh, sizeof *in->h[f][0], cmp_over);
        qsort(in->h[f][1], in->nh, sizeof *in->h[f][1], cmp_under);
    }
    return 0;
}

static void info_free(struct info *in)
{
    free(in->layers);
    free(in->steps);
    free(in->events);
    free(in->evals);
    free(in->agg);
    for (int f = 0; f < 2; f++)
        for (int side = 0; side < 2; side++)
            free(in->h[f][side]);
    ampdiag_trace_reader_close(in->r);
}

/* ------------------------------------------------------------------------------------------
 * Derived summaries shared by both outputs
 * ------------------------------------------------------------------------------------------ */

struct summary {
    int have_loss;
    double loss_first, loss_last, loss_min;
    int64_t step_first, step_last, loss_min_step;
    size_t loss_nonfinite;
    double scale_init, scale_min, scale_final;
    int64_t scale_min_step;
    size_t backoffs, growths;
    int scaled;              /* some loss scale other than 1 */
    size_t skipped;
    int64_t first_skip_step;
    const char *first_skip_reason;
    size_t by_code[AMPDIAG_NEVENT_CODES];
    size_t unknown_events;
    uint64_t params;
};

static void summarise(const struct info *in, struct summary *s)
{
    memset(s, 0, sizeof *s);
    s->first_skip_step = -1;
    for (size_t i = 0; i < in->nlayers; i++)
        s->params += in->layers[i].params;
    if (in->nsteps) {
        const ampdiag_trace_step *st = in->steps;
        s->have_loss = 1;
        s->step_first = st[0].step;
        s->step_last = st[in->nsteps - 1].step;
        s->loss_first = st[0].loss;
        s->loss_last = st[in->nsteps - 1].loss;
        s->loss_min = NAN;
        s->scale_init = st[0].loss_scale;
        s->scale_final = st[in->nsteps - 1].loss_scale;
        s->scale_min = st[0].loss_scale;
        s->scale_min_step = st[0].step;
        for (size_t i = 0; i < in->nsteps; i++) {
            if (isfinite(st[i].loss)) {
                if (isnan(s->loss_min) || st[i].loss < s->loss_min) {
                    s->loss_min = st[i].loss;
                    s->loss_min_step = st[i].step;
                }
            } else {
                s->loss_nonfinite++;
            }
            if (st[i].loss_scale != 1.0 && !isnan(st[i].loss_scale))
                s->scaled = 1;
            if (st[i].loss_scale < s->scale_min) {
                s->scale_min = st[i].loss_scale;
                s->scale_min_step = st[i].step;
            }
            if (i > 0 && st[i].loss_scale < st[i - 1].loss_scale)
                s->backoffs++;
            if (i > 0 && st[i].loss_scale > st[i - 1].loss_scale)
                s->growths++;
            if (st[i].skipped) {
                if (s->skipped == 0) {
                    s->first_skip_step = st[i].step;
                    s->first_skip_reason = st[i].skip_reason;
                }
                s->skipped++;
            }
        }
    }
    for (size_t i = 0; i < in->nevents; i++) {
        int c = in->events[i].code;
        if (c >= 0 && c < AMPDIAG_NEVENT_CODES)
            s->by_code[c]++;
        else
            s->unknown_events++;
    }
}

static const char *layer_name(const struct info *in, int layer)
{
    if (layer < 0)
        return NULL;
    if ((size_t)layer < in->nlayers)
        return in->layers[layer].name;
    return "?";
}

static const char *str_or(const char *s, const char *dflt) { return s && *s ? s : dflt; }

/* ------------------------------------------------------------------------------------------
 * Text output
 * ------------------------------------------------------------------------------------------ */

/* A loss scale as 2^k when it is a power of two, else %g. */
static void fmt_scale(char *buf, size_t n, double v)
{
    int e;
    double m = frexp(v, &e);
    if (isfinite(v) && v > 0 && m == 0.5)
        snprintf(buf, n, "2^%d", e - 1);
    else
        snprintf(buf, n, "%g", v);
}

static void fmt_pct(char *buf, size_t n, uint64_t k, uint64_t total)
{
    if (k == 0)
        snprintf(buf, n, "0");
    else if (total == 0)
        snprintf(buf, n, "%" PRIu64, k);
    else
        snprintf(buf, n, "%" PRIu64 " (%.3g%%)", k, 100.0 * (double)k / (double)total);
}

static void print_headroom(const struct info *in, int f, size_t top)
{
    const char *fmt = f ? "bf16" : "fp16";
    static const char *const rule[2][2] = {
        {"log2(65504 / largest |x|)", "log2(smallest non-zero |x| / 2^-14)"},
        {"log2(3.39e38 / largest |x|)", "log2(smallest non-zero |x| / 2^-126)"},
    };
    for (int side = 0; side < 2; side++) {
        printf("%s %s headroom, least first (%s, binades):\n", fmt,
               side ? "underflow" : "overflow", rule[f][side]);
        if (in->nh == 0) {
            printf("  (no finite non-zero values recorded)\n");
            continue;
        }
        const struct headroom *h = in->h[f][side];
        /* below the smallest normal, a value has mant_bits binades of subnormals before it
         * rounds to zero */
        double subnormal_binades = ampdiag_format_get(f ? AMPDIAG_BF16 : AMPDIAG_FP16)->mant_bits;
        for (size_t i = 0; i < in->nh && i < top; i++) {
            double b = side ? h[i].under : h[i].over;
            const char *note = "";
            if (!side && b < 0)
                note = "  overflows";
            else if (side && b < -subnormal_binades)
                note = "  underflows to 0";
            else if (side && b < 0)
                note = "  subnormal";
            printf("  %-20s %-16s %+7.1f  %s %-10.3g at step %" PRId64 "%s\n",
                   layer_name(in, h[i].layer), ampdiag_kind_name(h[i].kind), b,
                   side ? "absmin_nz" : "absmax   ", side ? h[i].absmin_nz : h[i].absmax,
                   side ? h[i].absmin_step : h[i].absmax_step, note);
        }
    }
}

static void print_text(const struct info *in, size_t top)
{
    struct summary s;
    summarise(in, &s);
    ampdiag_trace_reader *r = in->r;
    const char *status = ampdiag_trace_status_text(r);
    const char *prec = str_or(ampdiag_trace_attr_str(r, AMPDIAG_ATTR_PRECISION), "?");

    /* headline */
    printf("%s: ", in->path);
    switch (ampdiag_trace_status_of(r)) {
    case AMPDIAG_STATUS_RUNNING:
        printf("cut off (status still 'running': the writer was killed or is still writing), %zu "
               "steps up to the last flush",
               in->nsteps);
        break;
    case AMPDIAG_STATUS_INTERRUPTED:
        printf("interrupted after %zu steps", in->nsteps);
        break;
    case AMPDIAG_STATUS_DIVERGED:
        printf("diverged after %zu steps", in->nsteps);
        break;
    case AMPDIAG_STATUS_COMPLETE:
        printf("complete, %zu step%s", in->nsteps, in->nsteps == 1 ? "" : "s");
        break;
    default:
        printf("status '%s' (unknown), %zu steps", status, in->nsteps);
        break;
    }
    if (in->nsteps)
        printf(" (%" PRId64 "..%" PRId64 ")", s.step_first, s.step_last);
    printf(", %s\n", prec);

    printf("  model        %s, %zu layer%s, %" PRIu64 " parameters\n",
           str_or(ampdiag_trace_attr_str(r, AMPDIAG_ATTR_MODEL), "?"), in->nlayers,
           in->nlayers == 1 ? "" : "s", s.params);
    printf("  data         %s\n", str_or(ampdiag_trace_attr_str(r, AMPDIAG_ATTR_DATA), "?"));
    const char *opt = ampdiag_trace_attr_str(r, AMPDIAG_ATTR_OPTIMIZER);
    double lr = ampdiag_trace_attr_double(r, AMPDIAG_ATTR_LR, NAN);
    if (opt || !isnan(lr)) {
        printf("  optimizer    %s", str_or(opt, "?"));
        if (!isnan(lr))
            printf(", lr %g", lr);
        const char *sch = ampdiag_trace_attr_str(r, AMPDIAG_ATTR_LR_SCHEDULE);
        if (sch)
            printf(" (%s)", sch);
        double clip = ampdiag_trace_attr_double(r, AMPDIAG_ATTR_CLIP, NAN);
        if (!isnan(clip))
            printf(", clip %s", clip > 0 ? "" : "off");
        if (clip > 0)
            printf("%g", clip);
        printf("\n");
    }
    const char *dev = ampdiag_trace_attr_str(r, AMPDIAG_ATTR_DEVICE);
    if (dev) {
        const char *dn = ampdiag_trace_attr_str(r, AMPDIAG_ATTR_DEVICE_NAME);
        printf("  device       %s%s%s%s\n", dev, dn ? " (" : "", dn ? dn : "", dn ? ")" : "");
    }
    printf("  trace        format %d, tool_version %s, started %s", ampdiag_trace_format_version(r),
           str_or(ampdiag_trace_attr_str(r, "tool_version"), "?"),
           str_or(ampdiag_trace_attr_str(r, AMPDIAG_ATTR_START_TIME), "?"));
    const char *end = ampdiag_trace_attr_str(r, "end_time");
    if (end && *end)
        printf(", ended %s", end);
    printf("\n");
    if (ampdiag_trace_was_repaired(r))
        printf("  note         the file's open-for-write mark was cleared to read it\n");
    if (in->bad_rows)
        printf("  warning      %" PRIu64 " tensor records name an unknown layer or kind (ignored)\n",
               in->bad_rows);

    /* loss */
    if (s.have_loss) {
        printf("loss           %.6g (step %" PRId64 ") -> %.6g (step %" PRId64 ")", s.loss_first,
               s.step_first, s.loss_last, s.step_last);
        if (!isnan(s.loss_min))
            printf("; min %.6g at step %" PRId64, s.loss_min, s.loss_min_step);
        if (s.loss_nonfinite)
            printf("; %zu non-finite", s.loss_nonfinite);
        printf("\n");
    } else {
        printf("loss           no steps recorded\n");
    }
    if (in->nevals) {
        const ampdiag_trace_eval *e = &in->evals[in->nevals - 1];
        printf("eval           loss %.6g", e->loss);
        if (!isnan(e->metric))
            printf(", %s %.6g", str_or(ampdiag_trace_attr_str(r, AMPDIAG_ATTR_EVAL_METRIC), "metric"),
                   e->metric);
        printf(" at step %" PRId64 " (%zu evaluation%s)\n", e->step, in->nevals,
               in->nevals == 1 ? "" : "s");
    }

    /* loss scale */
    if (in->nsteps) {
        if (!s.scaled) {
            printf("loss scale     none (1 throughout)\n");
        } else {
            char a[32], b[32], c[32];
            fmt_scale(a, sizeof a, s.scale_init);
            fmt_scale(b, sizeof b, s.scale_min);
            fmt_scale(c, sizeof c, s.scale_final);
            printf("loss scale     %s initial, min %s (step %" PRId64 "), final %s; %zu backoffs, %zu "
                   "growths\n",
                   a, b, s.scale_min_step, c, s.backoffs, s.growths);
        }
    }
    /* skipped */
    if (s.skipped)
        printf("skipped steps  %zu (%.3g%%), first at step %" PRId64 ": %s\n", s.skipped,
               100.0 * (double)s.skipped / (double)in->nsteps, s.first_skip_step,
               str_or(s.first_skip_reason, "(no reason recorded)"));
    else if (in->nsteps)
        printf("skipped steps  0\n");

    /* events */
    printf("events         %zu", in->nevents);
    int firstc = 1;
    for (int c = 0; c < AMPDIAG_NEVENT_CODES; c++)
        if (s.by_code[c]) {
            printf("%s%s %zu", firstc ? ": " : ", ", ampdiag_event_name(c), s.by_code[c]);
            firstc = 0;
        }
    if (s.unknown_events)
        printf("%sunknown %zu", firstc ? ": " : ", ", s.unknown_events);
    printf("\n");
    for (size_t i = 0; i < in->nevents && i < top; i++) {
        const ampdiag_trace_event *e = &in->events[i];
        const char *ln = layer_name(in, e->layer);
        printf("  step %-6" PRId64 " %-14s %-12s %s\n", e->step,
               str_or(ampdiag_event_name(e->code), "unknown"), ln ? ln : "(global)", e->message);
    }
    if (in->nevents > top)
        printf("  ... %zu more\n", in->nevents - top);

    /* headroom */
    print_headroom(in, 0, top);
    print_headroom(in, 1, top);

    /* what-if */
    printf("what if stored in fp16 / bf16 (values summed over the trace; %% of all values of that "
           "kind):\n");
    printf("  %-16s %12s  %-18s %-18s %-18s\n", "kind", "values", "overflow", "underflow", "subnormal");
    struct agg all;
    agg_init(&all);
    for (int k = 0; k < AMPDIAG_NKINDS; k++)
        agg_merge(&all, &in->kind_tot[k]);
    for (int f = 0; f < 2; f++) {
        printf(" %s\n", f == 0 ? "fp16" : "bf16");
        for (int k = 0; k <= AMPDIAG_NKINDS; k++) {
            const struct agg *a = k < AMPDIAG_NKINDS ? &in->kind_tot[k] : &all;
            if (k < AMPDIAG_NKINDS && a->records == 0)
                continue;
            char o[40], u[40], sb[40];
            fmt_pct(o, sizeof o, f ? a->b16o : a->f16o, a->count);
            fmt_pct(u, sizeof u, f ? a->b16u : a->f16u, a->count);
            fmt_pct(sb, sizeof sb, f ? a->b16s : a->f16s, a->count);
            printf("  %-16s %12" PRIu64 "  %-18s %-18s %-18s\n",
                   k < AMPDIAG_NKINDS ? ampdiag_kind_name(k) : "all", a->count, o, u, sb);
        }
    }
    uint64_t nonfin = all.nan + all.posinf + all.neginf;
    if (nonfin)
        printf("non-finite     %" PRIu64 " NaN, %" PRIu64 " +inf, %" PRIu64 " -inf values recorded\n",
               all.nan, all.posinf, all.neginf);
    if (in->kind_tot[AMPDIAG_KIND_UPDATE].lost)
        printf("lost updates   %" PRIu64 " (%.3g%% of update values)\n",
               in->kind_tot[AMPDIAG_KIND_UPDATE].lost,
               100.0 * (double)in->kind_tot[AMPDIAG_KIND_UPDATE].lost /
                   (double)(in->kind_tot[AMPDIAG_KIND_UPDATE].count
                                ? in->kind_tot[AMPDIAG_KIND_UPDATE].count : 1));
    const struct agg *u = &in->kind_tot[AMPDIAG_KIND_UPDATE];
    uint64_t unz = u->count - u->zero;
    if (in->have_lost_if && unz > 0)
        printf("lost updates if weights were stored in fp16 / bf16: %.3g%% / %.3g%% of updates "
               "(%" PRIu64 " / %" PRIu64 " of %" PRIu64 " non-zero update values)\n",
               100.0 * (double)u->lost_if16 / (double)unz, 100.0 * (double)u->lost_ifb16 / (double)unz,
               u->lost_if16, u->lost_ifb16, unz);
    else if (!in->have_lost_if && u->records > 0)
        printf("lost updates if weights were stored in fp16 / bf16: not recorded in this trace\n");
}

/* ------------------------------------------------------------------------------------------
 * JSON output
 * ------------------------------------------------------------------------------------------ */

static void json_str(const char *s)
{
    if (!s) {
        fputs("null", stdout);
        return;
    }
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", stdout); break;
        case '\\': fputs("\\\\", stdout); break;
        case '\n': fputs("\\n", stdout); break;
        case '\r': fputs("\\r", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        default:
            if (*p < 0x20)
                printf("\\u%04x", *p);
            else
                putchar(*p);
        }
    }
    putchar('"');
}

static void json_num(double v)
{
    if (isfinite(v))
        printf("%.17g", v);
    else
        fputs("null", stdout);
}

static void json_key(const char *k, int *first)
{
    if (!*first)
        putchar(',');
    *first = 0;
    json_str(k);
    putchar(':');
}

static void json_headroom(const struct info *in, int f, int side)
{
    const struct headroom *h = in->h[f][side];
    putchar('[');
    for (size_t i = 0; i < in->nh; i++) {
        int k = 1;
        if (i)
            putchar(',');
        putchar('{');
        json_key("layer", &k);
        json_str(layer_name(in, h[i].layer));
        json_key("kind", &k);
        json_str(ampdiag_kind_name(h[i].kind));
        json_key("binades", &k);
        json_num(side ? h[i].under : h[i].over);
        json_key(side ? "absmin_nz" : "absmax", &k);
        json_num(side ? h[i].absmin_nz : h[i].absmax);
        json_key("step", &k);
        printf("%" PRId64, side ? h[i].absmin_step : h[i].absmax_step);
        putchar('}');
    }
    putchar(']');
}

static void json_whatif_entry(const struct agg *a, int bf)
{
    int f = 1;
    double n = a->count ? (double)a->count : NAN;
    uint64_t o = bf ? a->b16o : a->f16o, u = bf ? a->b16u : a->f16u, s = bf ? a->b16s : a->f16s;
    putchar('{');
    json_key("values", &f);
    printf("%" PRIu64, a->count);
    json_key("overflow", &f);
    printf("%" PRIu64, o);
    json_key("overflow_fraction", &f);
    json_num((double)o / n);
    json_key("underflow", &f);
    printf("%" PRIu64, u);
    json_key("underflow_fraction", &f);
    json_num((double)u / n);
    json_key("subnormal", &f);
    printf("%" PRIu64, s);
    json_key("subnormal_fraction", &f);
    json_num((double)s / n);
    putchar('}');
}

static void print_json(const struct info *in)
{
    struct summary s;
    summarise(in, &s);
    ampdiag_trace_reader *r = in->r;
    int f = 1;
    putchar('{');
    json_key("file", &f);
    json_str(in->path);
    json_key("format_version", &f);
    printf("%d", ampdiag_trace_format_version(r));
    json_key("status", &f);
    json_str(ampdiag_trace_status_text(r));
    json_key("cut_off", &f);
    fputs(ampdiag_trace_cut_off(r) ? "true" : "false", stdout);
    json_key("repaired", &f);
    fputs(ampdiag_trace_was_repaired(r) ? "true" : "false", stdout);

    json_key("attributes", &f);
    putchar('{');
    int fa = 1;
    for (size_t i = 0; i < ampdiag_trace_nattrs(r); i++) {
        const ampdiag_trace_attr *a = ampdiag_trace_attr_at(r, i);
        json_key(a->name, &fa);
        if (a->type == AMPDIAG_ATTR_STR)
            json_str(a->s);
        else if (a->type == AMPDIAG_ATTR_INT)
            printf("%" PRId64, a->i);
        else if (a->type == AMPDIAG_ATTR_DOUBLE)
            json_num(a->d);
        else
            fputs("null", stdout);
    }
    putchar('}');

    json_key("counts", &f);
    printf("{\"layers\":%zu,\"steps\":%zu,\"tensors\":%zu,\"histograms\":%zu,\"events\":%zu,"
           "\"evals\":%zu}",
           in->c.layers, in->c.steps, in->c.tensors, in->c.hists, in->c.events, in->c.evals);

    json_key("layers", &f);
    putchar('[');
    for (size_t i = 0; i < in->nlayers; i++) {
        int fl = 1;
        if (i)
            putchar(',');
        putchar('{');
        json_key("index", &fl);
        printf("%d", (int)in->layers[i].index);
        json_key("name", &fl);
        json_str(in->layers[i].name);
        json_key("op", &fl);
        json_str(in->layers[i].op);
        json_key("shape", &fl);
        json_str(in->layers[i].shape);
        json_key("params", &fl);
        printf("%" PRIu64, in->layers[i].params);
        putchar('}');
    }
    putchar(']');
    json_key("params", &f);
    printf("%" PRIu64, s.params);

    json_key("loss", &f);
    if (s.have_loss) {
        int fl = 1;
        putchar('{');
        json_key("first", &fl);
        json_num(s.loss_first);
        json_key("first_step", &fl);
        printf("%" PRId64, s.step_first);
        json_key("last", &fl);
        json_num(s.loss_last);
        json_key("last_step", &fl);
        printf("%" PRId64, s.step_last);
        json_key("min", &fl);
        json_num(s.loss_min);
        json_key("min_step", &fl);
        if (isnan(s.loss_min))
            fputs("null", stdout);
        else
            printf("%" PRId64, s.loss_min_step);
        json_key("nonfinite", &fl);
        printf("%zu", s.loss_nonfinite);
        putchar('}');
    } else {
        fputs("null", stdout);
    }

    json_key("eval", &f);
    if (in->nevals) {
        const ampdiag_trace_eval *e = &in->evals[in->nevals - 1];
        int fe = 1;
        putchar('{');
        json_key("count", &fe);
        printf("%zu", in->nevals);
        json_key("last_step", &fe);
        printf("%" PRId64, e->step);
        json_key("loss", &fe);
        json_num(e->loss);
        json_key("metric", &fe);
        json_num(e->metric);
        putchar('}');
    } else {
        fputs("null", stdout);
    }

    json_key("loss_scale", &f);
    if (in->nsteps) {
        int fs = 1;
        putchar('{');
        json_key("scaled", &fs);
        fputs(s.scaled ? "true" : "false", stdout);
        json_key("initial", &fs);
        json_num(s.scale_init);
        json_key("min", &fs);
        json_num(s.scale_min);
        json_key("min_step", &fs);
        printf("%" PRId64, s.scale_min_step);
        json_key("final", &fs);
        json_num(s.scale_final);
        json_key("backoffs", &fs);
        printf("%zu", s.backoffs);
        json_key("growths", &fs);
        printf("%zu", s.growths);
        putchar('}');
    } else {
        fputs("null", stdout);
    }

    json_key("skipped", &f);
    {
        int fs = 1;
        putchar('{');
        json_key("count", &fs);
        printf("%zu", s.skipped);
        json_key("fraction", &fs);
        json_num(in->nsteps ? (double)s.skipped / (double)in->nsteps : NAN);
        json_key("first_step", &fs);
        if (s.skipped)
            printf("%" PRId64, s.first_skip_step);
        else
            fputs("null", stdout);
        json_key("first_reason", &fs);
        json_str(s.skipped ? s.first_skip_reason : NULL);
        putchar('}');
    }

    json_key("events", &f);
    {
        int fe = 1;
        putchar('{');
        json_key("count", &fe);
        printf("%zu", in->nevents);
        json_key("by_code", &fe);
        putchar('{');
        int fc = 1;
        for (int c = 0; c < AMPDIAG_NEVENT_CODES; c++)
            if (s.by_code[c]) {
                json_key(ampdiag_event_name(c), &fc);
                printf("%zu", s.by_code[c]);
            }
        if (s.unknown_events) {
            json_key("unknown", &fc);
            printf("%zu", s.unknown_events);
        }
        putchar('}');
        json_key("list", &fe);
        putchar('[');
        for (size_t i = 0; i < in->nevents; i++) {
            const ampdiag_trace_event *e = &in->events[i];
            int fi = 1;
            if (i)
                putchar(',');
            putchar('{');
            json_key("step", &fi);
            printf("%" PRId64, e->step);
            json_key("layer", &fi);
            json_str(layer_name(in, e->layer));
            json_key("code", &fi);
            json_str(ampdiag_event_name(e->code));
            json_key("value", &fi);
            json_num(e->value);
            json_key("message", &fi);
            json_str(e->message);
            putchar('}');
        }
        putchar(']');
        putchar('}');
    }

    json_key("headroom", &f);
    {
        int fh = 1;
        putchar('{');
        for (int fm = 0; fm < 2; fm++) {
            int fs = 1;
            json_key(fm ? "bf16" : "fp16", &fh);
            putchar('{');
            json_key("overflow", &fs);
            json_headroom(in, fm, 0);
            json_key("underflow", &fs);
            json_headroom(in, fm, 1);
            putchar('}');
        }
        putchar('}');
    }

    json_key("what_if", &f);
    {
        struct agg all;
        agg_init(&all);
        for (int k = 0; k < AMPDIAG_NKINDS; k++)
            agg_merge(&all, &in->kind_tot[k]);
        int fw = 1;
        putchar('{');
        for (int bf = 0; bf < 2; bf++) {
            json_key(bf ? "bf16" : "fp16", &fw);
            putchar('{');
            int fk = 1;
            for (int k = 0; k < AMPDIAG_NKINDS; k++) {
                if (in->kind_tot[k].records == 0)
                    continue;
                json_key(ampdiag_kind_name(k), &fk);
                json_whatif_entry(&in->kind_tot[k], bf);
            }
            json_key("all", &fk);
            json_whatif_entry(&all, bf);
            putchar('}');
        }
        putchar('}');
        json_key("nonfinite", &f);
        printf("{\"nan\":%" PRIu64 ",\"posinf\":%" PRIu64 ",\"neginf\":%" PRIu64 "}", all.nan,
               all.posinf, all.neginf);
        json_key("lost_updates", &f);
        printf("%" PRIu64, in->kind_tot[AMPDIAG_KIND_UPDATE].lost);
        json_key("lost_if_weights", &f);
        const struct agg *u = &in->kind_tot[AMPDIAG_KIND_UPDATE];
        uint64_t unz = u->count - u->zero;
        if (!in->have_lost_if) {
            printf("null");
        } else {
            int fl = 1;
            putchar('{');
            json_key("nonzero_updates", &fl);
            printf("%" PRIu64, unz);
            json_key("fp16", &fl);
            printf("%" PRIu64, u->lost_if16);
            json_key("fp16_fraction", &fl);
            json_num(unz ? (double)u->lost_if16 / (double)unz : NAN);
            json_key("bf16", &fl);
            printf("%" PRIu64, u->lost_ifb16);
            json_key("bf16_fraction", &fl);
            json_num(unz ? (double)u->lost_ifb16 / (double)unz : NAN);
            putchar('}');
        }
    }
    json_key("unknown_tensor_rows", &f);
    printf("%" PRIu64, in->bad_rows);
    puts("}");
}

/* ------------------------------------------------------------------------------------------
 * Command
 * ------------------------------------------------------------------------------------------ */

static int exit_for(int err) { return ampdiag_trace_err_is_io(err) ? EXIT_IO : EXIT_USAGE; }

enum { O_FORMAT = 1, O_TOP, O_HELP };

static const cli_opt options[] = {
    {"--format", 0, CLI_ARG, O_FORMAT}, {"--top", 0, CLI_ARG, O_TOP}, {"--help", 'h', CLI_NOARG, O_HELP},
    CLI_OPT_END};

int cmd_info(int argc, char **argv)
{
    const char *path = NULL, *format = "text";
    long top = 5;
    cli_parser p;
    if (cli_parser_init(&p, "info", options, argc, argv, 0))
        return EXIT_USAGE;
    for (int id; (id = cli_next(&p)) != CLI_DONE;) {
        const char *a = p.arg;
        if (id == O_HELP) {
            usage(stdout);
            return 0;
        } else if (id == O_FORMAT) {
            format = a;
            if (strcmp(format, "text") != 0 && strcmp(format, "json") != 0) {
                fprintf(stderr, "ampdiag info: unknown --format '%s' (expected text or json)\n",
                        format);
                return EXIT_USAGE;
            }
        } else if (id == O_TOP) {
            char *end;
            errno = 0;
            top = strtol(a, &end, 10);
            if (end == a || *end || errno || top < 0 || top > 1000000) {
                fprintf(stderr, "ampdiag info: --top needs a count (0..1000000), got '%s'\n", a);
                return EXIT_USAGE;
            }
        } else if (id != CLI_POS) {
            return EXIT_USAGE;
        } else if (path) {
            fprintf(stderr, "ampdiag info: one trace at a time ('%s' and '%s'); to compare traces "
                            "use ampdiag compare\n", path, a);
            return EXIT_USAGE;
        } else {
            path = a;
        }
    }
    if (!path) {
        fprintf(stderr, "ampdiag info: no trace given (usage: ampdiag info TRACE.h5 [--format "
                        "text|json])\n");
        return EXIT_USAGE;
    }

    struct info in;
    memset(&in, 0, sizeof in);
    in.path = path;
    int rc = ampdiag_trace_open(path, 0, &in.r);
    if (rc) {
        fprintf(stderr, "ampdiag info: %s\n", ampdiag_trace_errmsg());
        return exit_for(rc);
    }
    rc = load(&in);
    if (rc) {
        if (rc == AMPDIAG_TRACE_ENOMEM)
            fprintf(stderr, "ampdiag info: out of memory reading '%s'\n", path);
        else
            fprintf(stderr, "ampdiag info: %s\n", ampdiag_trace_errmsg());
        info_free(&in);
        return exit_for(rc);
    }
    if (strcmp(format, "json") == 0)
        print_json(&in);
    else
        print_text(&in, (size_t)top);
    info_free(&in);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "ampdiag info: cannot write the output: %s\n", strerror(errno));
        return EXIT_IO;
    }
    return 0;
}
