/*
 * info.c - `ampdiag info` (text, JSON) and `ampdiag run`'s closing summary, rendered from the
 * loaded run and its findings (info.h).
 */
#include "report/info.h"
#include "report/fp8.h"
#include "analysis/recommend.h"
#include "util/escape.h"
#include "util/json.h"
#include "util/util.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

const char *fmt_metric(char *buf, size_t n, const an_findings *fd, double v)
{
    if (fd->eval_is_accuracy && isfinite(v))
        snprintf(buf, n, "%.1f%%", 100.0 * v);
    else
        fmt_num(buf, n, v, 6);
    return buf;
}

static const char *str_or(const char *s, const char *dflt) { return s && *s ? s : dflt; }

static const char *lname(const an_run *r, int layer)
{
    if (layer < 0)
        return NULL;
    return (size_t)layer < r->nlayers ? r->layers[layer].name : "?";
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

/* ------------------------------------------------------------------------------------------
 * info, text
 * ------------------------------------------------------------------------------------------ */

static void text_headline(FILE *f, const an_run *r)
{
    fprintf_text(f, "%s: ", r->path);
    switch (r->status) {
    case AMPDIAG_STATUS_RUNNING:
        fprintf(f, "cut off (status still 'running': the writer was killed or is still writing), "
                   "%zu steps up to the last flush", r->nsteps);
        break;
    case AMPDIAG_STATUS_INTERRUPTED:
        fprintf(f, "interrupted after %zu steps", r->nsteps);
        break;
    case AMPDIAG_STATUS_DIVERGED:
        fprintf(f, "diverged after %zu steps", r->nsteps);
        break;
    case AMPDIAG_STATUS_COMPLETE:
        fprintf(f, "complete, %zu step%s", r->nsteps, r->nsteps == 1 ? "" : "s");
        break;
    default:
        fprintf_text(f, "status '%s' (unknown), %zu steps", r->status_text, r->nsteps);
        break;
    }
    if (r->nsteps)
        fprintf(f, " (%" PRId64 "..%" PRId64 ")", r->first_step, r->last_step);
    fprintf_text(f, ", %s\n", str_or(r->precision, "?"));
}

static void text_run(FILE *f, const an_run *r)
{
    fprintf_text(f, "  model        %s, %zu layer%s, %" PRIu64 " parameters\n", str_or(r->model, "?"),
                 r->nlayers, r->nlayers == 1 ? "" : "s", r->params);
    fprintf_text(f, "  data         %s\n", str_or(r->data, "?"));
    if (r->optimizer[0] || !isnan(r->lr)) {
        fprintf_text(f, "  optimizer    %s", str_or(r->optimizer, "?"));
        if (!isnan(r->lr))
            fprintf(f, ", lr %g", r->lr);
        if (r->schedule[0])
            fprintf_text(f, " (%s)", r->schedule);
        if (!isnan(r->clip)) {
            if (r->clip > 0)
                fprintf(f, ", clip %g", r->clip);
            else
                fprintf(f, ", clip off");
        }
        fprintf(f, "\n");
    }
    if (r->device[0])
        fprintf_text(f, "  device       %s%s%s%s\n", r->device, r->device_name[0] ? " (" : "",
                     r->device_name, r->device_name[0] ? ")" : "");
    fprintf_text(f, "  trace        format %d, tool_version %s, started %s", r->format_version,
                 str_or(r->tool_version, "?"), str_or(r->start_time, "?"));
    if (r->end_time[0])
        fprintf_text(f, ", ended %s", r->end_time);
    fprintf(f, "\n");
    if (r->repaired)
        fprintf(f, "  note         the file's open-for-write mark was cleared to read it\n");
    if (r->bad_rows)
        fprintf(f, "  warning      %" PRIu64 " tensor records name an unknown layer or kind (ignored)\n",
                r->bad_rows);
}

static void text_loss_scale(FILE *f, const an_run *r, const an_findings *fd)
{
    char a[32], b[32], c[32];
    if (r->nsteps) {
        fprintf(f, "loss           %s (step %" PRId64 ") -> %s (step %" PRId64 ")",
                fmt_num(a, sizeof a, r->loss_first, 6), r->first_step,
                fmt_num(b, sizeof b, r->loss_last, 6), r->last_step);
        if (!isnan(r->loss_min))
            fprintf(f, "; min %s at step %" PRId64, fmt_num(a, sizeof a, r->loss_min, 6),
                    r->loss_min_step);
        if (r->loss_nonfinite)
            fprintf(f, "; %zu non-finite", r->loss_nonfinite);
        fprintf(f, "\n");
    } else {
        fprintf(f, "loss           no steps recorded\n");
    }
    if (fd->last_eval) {
        const ampdiag_trace_eval *e = fd->last_eval;
        fprintf(f, "eval           loss %s", fmt_num(a, sizeof a, e->loss, 6));
        if (isfinite(e->loss_se))
            fprintf(f, " (standard error %s)", fmt_num(b, sizeof b, e->loss_se, 3));
        if (!isnan(e->metric))
            fprintf_text(f, ", %s %s", str_or(r->eval_metric, "metric"),
                         fmt_metric(b, sizeof b, fd, e->metric));
        fprintf(f, " at step %" PRId64 " (%zu evaluation%s)\n", e->step, r->nevals,
                r->nevals == 1 ? "" : "s");
    }
    if (r->nsteps) {
        if (!r->scaled) {
            fprintf(f, "loss scale     none (1 throughout)\n");
        } else {
            rec_fmt_scale(a, sizeof a, r->scale_init);
            rec_fmt_scale(b, sizeof b, r->scale_min);
            rec_fmt_scale(c, sizeof c, r->scale_final);
            fprintf(f, "loss scale     %s initial, min %s (step %" PRId64 "), final %s; %zu backoffs, "
                       "%zu growths", a, b, r->scale_min_step, c, r->backoffs, r->growths);
            if (r->overflows_at_min)
                fprintf(f, ", %zu overflows at the minimum scale", r->overflows_at_min);
            fprintf(f, "\n");
        }
    }
    if (r->skipped)
        fprintf_text(f, "skipped steps  %zu (%.3g%%), first at step %" PRId64 ": %s\n", r->skipped,
                     100.0 * (double)r->skipped / (double)r->nsteps, r->first_skip_step,
                     str_or(r->first_skip_reason, "(no reason recorded)"));
    else if (r->nsteps)
        fprintf(f, "skipped steps  0\n");
}

static void text_events(FILE *f, const an_run *r, size_t top)
{
    fprintf(f, "events         %zu", r->nevents);
    int firstc = 1;
    for (int c = 0; c < AMPDIAG_NEVENT_CODES; c++)
        if (r->by_code[c]) {
            fprintf(f, "%s%s %zu", firstc ? ": " : ", ", ampdiag_event_name(c), r->by_code[c]);
            firstc = 0;
        }
    if (r->unknown_events)
        fprintf(f, "%sunknown %zu", firstc ? ": " : ", ", r->unknown_events);
    fprintf(f, "\n");
    for (size_t i = 0; i < r->nevents && i < top; i++) {
        const ampdiag_trace_event *e = &r->events[i];
        const char *ln = lname(r, e->layer);
        fprintf_text(f, "  step %-6" PRId64 " %-14s %-12s %s\n", e->step,
                     str_or(ampdiag_event_name(e->code), "unknown"), ln ? ln : "(global)", e->message);
    }
    if (r->nevents > top)
        fprintf(f, "  ... %zu more\n", r->nevents - top);
}

static void text_headroom(FILE *f, const an_run *r, const an_findings *fd, int fm, size_t top)
{
    static const char *const rule[2][2] = {
        {"log2(65504 / largest |x|)", "log2(smallest non-zero |x| / 2^-14)"},
        {"log2(3.39e38 / largest |x|)", "log2(smallest non-zero |x| / 2^-126)"},
    };
    /* below the smallest normal, a value has mant_bits binades of subnormals before it rounds
     * to zero */
    double subnormal_binades = ampdiag_format_get(fm ? AMPDIAG_BF16 : AMPDIAG_FP16)->mant_bits;
    for (int side = 0; side < 2; side++) {
        fprintf(f, "%s %s headroom, least first (%s, binades):\n", fm ? "bf16" : "fp16",
                side ? "underflow" : "overflow", rule[fm][side]);
        if (fd->nheadroom == 0) {
            fprintf(f, "  (no finite non-zero values recorded)\n");
            continue;
        }
        const an_headroom *h = fd->by_headroom[fm][side];
        for (size_t i = 0; i < fd->nheadroom && i < top; i++) {
            double b = side ? h[i].under[fm] : h[i].over[fm];
            const char *note = "";
            if (!side && b < 0)
                note = "  overflows";
            else if (side && b < -subnormal_binades)
                note = "  underflows to 0";
            else if (side && b < 0)
                note = "  subnormal";
            fprintf_text(f, "  %-20s %-16s %+7.1f  %s %-10.3g at step %" PRId64 "%s\n",
                         lname(r, h[i].layer), ampdiag_kind_name(h[i].kind), b,
                         side ? "absmin_nz" : "absmax   ", side ? h[i].absmin_nz : h[i].absmax,
                         side ? h[i].absmin_step : h[i].absmax_step, note);
        }
    }
}

/* The what-if counts of a cell for format fm: 0 fp16, 1 bf16, 2 e4m3, 3 e5m2 (unscaled), 4 e4m3,
 * 5 e5m2 under delayed scaling; returns the number of values they are of. */
static uint64_t cell_whatif(const an_cell *a, int fm, uint64_t *o, uint64_t *u, uint64_t *s)
{
    if (fm >= 2) {
        const uint64_t *v = fm >= 4 ? a->f8d[fm - 4] : a->f8[fm - 2];
        *o = v[AMPDIAG_WHATIF_OVERFLOW];
        *u = v[AMPDIAG_WHATIF_UNDERFLOW];
        *s = v[AMPDIAG_WHATIF_SUBNORMAL];
        return fm >= 4 ? a->f8d_values[fm - 4] : a->count;
    }
    *o = fm ? a->b16o : a->f16o;
    *u = fm ? a->b16u : a->f16u;
    *s = fm ? a->b16s : a->f16s;
    return a->count;
}

static const char *const whatif_name[6] = {"fp16", "bf16", "e4m3", "e5m2", "e4m3_delayed", "e5m2_delayed"};

/* Whether the trace has what-if counts for format fm (as cell_whatif numbers them): FP16 and
 * BF16 always, the FP8 ones where it records them. */
static int whatif_has(const an_run *r, int fm) { return fm < 2 || (fm < 4 ? r->fp8_fields : r->fp8_delayed); }

static void text_fp8_hurt(FILE *f, const an_run *r, const an_findings *fd)
{
    const an_fp8_findings *x = &fd->fp8;
    for (int fm = 0; x->unscaled && fm < 2; fm++) {
        int n = x->n_unscaled[fm];
        fprintf(f, "%s (unscaled) would hurt most:%s\n", whatif_name[fm + 2], n ? "" : " nothing (under 0.1% of any tensor)");
        for (int i = 0; i < n; i++) {
            const an_fp8_hurt *h = &x->hurt_unscaled[fm][i];
            char tl[160];
            fprintf(f, "  %-12s %-16s %.3g%% overflow, %.3g%% flush to zero\n",
                    str_escape_ctl(tl, sizeof tl, lname(r, h->layer)), ampdiag_kind_name(h->kind),
                    100.0 * h->overflow_fraction, 100.0 * h->underflow_fraction);
        }
    }
    report_text_fp8(f, r, x, "");
}

static void text_whatif(FILE *f, const an_run *r, const an_findings *fd)
{
    fprintf(f, "what if stored in fp16 / bf16%s%s (values summed over the trace; %% of all values of "
               "that kind):\n", r->fp8_fields ? " / e4m3 / e5m2 (FP8 unscaled)" : "",
            r->fp8_delayed ? " / e4m3 / e5m2 under delayed scaling" : "");
    fprintf(f, "  %-16s %12s  %-18s %-18s %-18s\n", "kind", "values", "overflow", "underflow",
            "subnormal");
    for (int fm = 0; fm < 6; fm++) {
        if (!whatif_has(r, fm))
            continue;
        fprintf(f, " %s\n", whatif_name[fm]);
        for (int k = 0; k <= AMPDIAG_NKINDS; k++) {
            const an_cell *a = k < AMPDIAG_NKINDS ? &fd->kind[k] : &fd->all;
            char o[40], u[40], sb[40];
            uint64_t co, cu, cs, nv = cell_whatif(a, fm, &co, &cu, &cs);
            if (k < AMPDIAG_NKINDS && (a->records == 0 || nv == 0))
                continue;
            fmt_pct(o, sizeof o, co, nv);
            fmt_pct(u, sizeof u, cu, nv);
            fmt_pct(sb, sizeof sb, cs, nv);
            fprintf(f, "  %-16s %12" PRIu64 "  %-18s %-18s %-18s\n",
                    k < AMPDIAG_NKINDS ? ampdiag_kind_name(k) : "all", nv, o, u, sb);
        }
    }
    const an_cell *all = &fd->all;
    if (all->nan + all->posinf + all->neginf)
        fprintf(f, "non-finite     %" PRIu64 " NaN, %" PRIu64 " +inf, %" PRIu64 " -inf values recorded\n",
                all->nan, all->posinf, all->neginf);
    if (r->lost)
        fprintf(f, "lost updates   %" PRIu64 " (%.3g%% of the %" PRIu64 " non-zero update values)\n",
                r->lost, 100.0 * fd->lost_fraction, fd->update_nonzero);
    if (r->lost_if_fields && fd->update_nonzero > 0)
        fprintf(f, "lost updates if weights were stored in fp16 / bf16: %.3g%% / %.3g%% of updates "
                   "(%" PRIu64 " / %" PRIu64 " of %" PRIu64 " non-zero update values)\n",
                100.0 * fd->lost_if_fp16, 100.0 * fd->lost_if_bf16, r->lost_if16, r->lost_ifb16,
                fd->update_nonzero);
    else if (!r->lost_if_fields && fd->kind[AMPDIAG_KIND_UPDATE].records > 0)
        fprintf(f, "lost updates if weights were stored in fp16 / bf16: not recorded in this trace\n");
}

int report_info_text(FILE *f, const an_run *r, const an_findings *fd, size_t top)
{
    text_headline(f, r);
    text_run(f, r);
    text_loss_scale(f, r, fd);
    text_events(f, r, top);
    text_headroom(f, r, fd, 0, top);
    text_headroom(f, r, fd, 1, top);
    text_whatif(f, r, fd);
    text_fp8_hurt(f, r, fd);
    return ferror(f) ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------
 * info, JSON
 * ------------------------------------------------------------------------------------------ */

/* The last evaluation: info's top level names its step last_step and adds the count. */
static void json_eval(jw *w, const an_run *r, int info_keys)
{
    const ampdiag_trace_eval *e = r->find.last_eval;
    if (!e) {
        jw_null(w, "eval");
        return;
    }
    jw_open(w, "eval", '{');
    if (info_keys)
        jw_u64(w, "count", r->nevals);
    jw_int(w, info_keys ? "last_step" : "step", e->step);
    jw_num(w, "loss", e->loss);
    jw_num(w, "loss_se", e->loss_se);
    jw_num(w, "metric", e->metric);
    jw_str(w, "metric_name", r->eval_metric[0] ? r->eval_metric : NULL);
    jw_close(w, '}');
}

static void json_headroom(jw *w, const char *k, const an_run *r, const an_findings *fd, int fm,
                          int side)
{
    const an_headroom *h = fd->by_headroom[fm][side];
    jw_open(w, k, '[');
    for (size_t i = 0; i < fd->nheadroom; i++) {
        jw_open(w, NULL, '{');
        jw_str(w, "layer", lname(r, h[i].layer));
        jw_str(w, "kind", ampdiag_kind_name(h[i].kind));
        jw_num(w, "binades", side ? h[i].under[fm] : h[i].over[fm]);
        jw_num(w, side ? "absmin_nz" : "absmax", side ? h[i].absmin_nz : h[i].absmax);
        jw_int(w, "step", side ? h[i].absmin_step : h[i].absmax_step);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

static void json_whatif_entry(jw *w, const char *k, const an_cell *a, int fm)
{
    uint64_t o, u, s, nv = cell_whatif(a, fm, &o, &u, &s);
    double n = nv ? (double)nv : NAN;
    jw_open(w, k, '{');
    jw_u64(w, "values", nv);
    jw_u64(w, "overflow", o);
    jw_num(w, "overflow_fraction", (double)o / n);
    jw_u64(w, "underflow", u);
    jw_num(w, "underflow_fraction", (double)u / n);
    jw_u64(w, "subnormal", s);
    jw_num(w, "subnormal_fraction", (double)s / n);
    jw_close(w, '}');
}

static void json_attrs(jw *w, const an_run *r)
{
    jw_open(w, "attributes", '{');
    for (size_t i = 0; i < r->nattrs; i++) {
        const an_attr *a = &r->attrs[i];
        if (a->type == AMPDIAG_ATTR_STR)
            jw_str(w, a->name, a->s);
        else if (a->type == AMPDIAG_ATTR_INT)
            jw_int(w, a->name, a->i);
        else if (a->type == AMPDIAG_ATTR_DOUBLE)
            jw_num(w, a->name, a->d);
        else
            jw_null(w, a->name);
    }
    jw_close(w, '}');
    jw_open(w, "counts", '{');
    jw_u64(w, "layers", r->counts.layers);
    jw_u64(w, "steps", r->counts.steps);
    jw_u64(w, "tensors", r->counts.tensors);
    jw_u64(w, "histograms", r->counts.hists);
    jw_u64(w, "events", r->counts.events);
    jw_u64(w, "evals", r->counts.evals);
    jw_close(w, '}');
    jw_open(w, "layers", '[');
    for (size_t i = 0; i < r->nlayers; i++) {
        jw_open(w, NULL, '{');
        jw_int(w, "index", (int64_t)i);
        jw_str(w, "name", r->layers[i].name);
        jw_str(w, "op", r->layers[i].op);
        jw_str(w, "shape", r->layers[i].shape);
        jw_u64(w, "params", r->layers[i].params);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_u64(w, "params", r->params);
}

static void json_loss_scale(jw *w, const an_run *r)
{
    if (r->nsteps) {
        jw_open(w, "loss", '{');
        jw_num(w, "first", r->loss_first);
        jw_int(w, "first_step", r->first_step);
        jw_num(w, "last", r->loss_last);
        jw_int(w, "last_step", r->last_step);
        jw_num(w, "min", r->loss_min);
        if (isnan(r->loss_min))
            jw_null(w, "min_step");
        else
            jw_int(w, "min_step", r->loss_min_step);
        jw_u64(w, "nonfinite", r->loss_nonfinite);
        jw_close(w, '}');
    } else {
        jw_null(w, "loss");
    }
    json_eval(w, r, 1);
    if (r->nsteps) {
        jw_open(w, "loss_scale", '{');
        report_json_scale_keys(w, r);
        jw_close(w, '}');
    } else {
        jw_null(w, "loss_scale");
    }
    jw_open(w, "skipped", '{');
    jw_u64(w, "count", r->skipped);
    jw_num(w, "fraction", r->nsteps ? (double)r->skipped / (double)r->nsteps : NAN);
    jw_opt_int(w, "first_step", r->skipped ? r->first_skip_step : -1);
    jw_str(w, "first_reason", r->skipped ? r->first_skip_reason : NULL);
    jw_close(w, '}');
}

static void json_events(jw *w, const an_run *r)
{
    jw_open(w, "events", '{');
    jw_u64(w, "count", r->nevents);
    jw_open(w, "by_code", '{');
    for (int c = 0; c < AMPDIAG_NEVENT_CODES; c++)
        if (r->by_code[c])
            jw_u64(w, ampdiag_event_name(c), r->by_code[c]);
    if (r->unknown_events)
        jw_u64(w, "unknown", r->unknown_events);
    jw_close(w, '}');
    jw_open(w, "list", '[');
    for (size_t i = 0; i < r->nevents; i++) {
        const ampdiag_trace_event *e = &r->events[i];
        jw_open(w, NULL, '{');
        jw_int(w, "step", e->step);
        jw_str(w, "layer", lname(r, e->layer));
        jw_str(w, "code", ampdiag_event_name(e->code));
        jw_num(w, "value", e->value);
        jw_str(w, "message", e->message);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
}

static void json_whatif(jw *w, const an_run *r, const an_findings *fd)
{
    jw_open(w, "headroom", '{');
    for (int fm = 0; fm < 2; fm++) {
        jw_open(w, fm ? "bf16" : "fp16", '{');
        json_headroom(w, "overflow", r, fd, fm, 0);
        json_headroom(w, "underflow", r, fd, fm, 1);
        jw_close(w, '}');
    }
    jw_close(w, '}');
    jw_open(w, "what_if", '{');
    for (int fm = 0; fm < 6; fm++) {
        if (!whatif_has(r, fm))
            continue;
        jw_open(w, whatif_name[fm], '{');
        for (int k = 0; k < AMPDIAG_NKINDS; k++) {
            uint64_t o, u, s;
            if (fd->kind[k].records && cell_whatif(&fd->kind[k], fm, &o, &u, &s))
                json_whatif_entry(w, ampdiag_kind_name(k), &fd->kind[k], fm);
        }
        json_whatif_entry(w, "all", &fd->all, fm);
        if (fm == 2 || fm == 3) {
            jw_open(w, "hurt_most", '[');
            for (int i = 0; i < fd->fp8.n_unscaled[fm - 2]; i++) {
                const an_fp8_hurt *h = &fd->fp8.hurt_unscaled[fm - 2][i];
                jw_open(w, NULL, '{');
                jw_str(w, "layer", lname(r, h->layer));
                jw_str(w, "kind", ampdiag_kind_name(h->kind));
                jw_num(w, "overflow_fraction", h->overflow_fraction);
                jw_num(w, "underflow_fraction", h->underflow_fraction);
                jw_close(w, '}');
            }
            jw_close(w, ']');
        }
        jw_close(w, '}');
    }
    jw_close(w, '}');
    report_json_fp8(w, r, &fd->fp8);
    jw_open(w, "nonfinite", '{');
    jw_u64(w, "nan", fd->all.nan);
    jw_u64(w, "posinf", fd->all.posinf);
    jw_u64(w, "neginf", fd->all.neginf);
    jw_close(w, '}');
    jw_u64(w, "lost_updates", r->lost);
    jw_u64(w, "nonzero_updates", fd->update_nonzero);
    jw_num(w, "lost_fraction", fd->lost_fraction);
    if (!r->lost_if_fields) {
        jw_null(w, "lost_if_weights");
    } else {
        jw_open(w, "lost_if_weights", '{');
        jw_u64(w, "nonzero_updates", fd->update_nonzero);
        jw_u64(w, "fp16", r->lost_if16);
        jw_num(w, "fp16_fraction", fd->lost_if_fp16);
        jw_u64(w, "bf16", r->lost_ifb16);
        jw_num(w, "bf16_fraction", fd->lost_if_bf16);
        jw_close(w, '}');
    }
}

static void json_layer_value(jw *w, const char *k, const an_run *r, int layer, const char *vk,
                             double v)
{
    if (layer < 0) {
        jw_null(w, k);
        return;
    }
    jw_open(w, k, '{');
    jw_str(w, "layer", lname(r, layer));
    jw_num(w, vk, v);
    jw_close(w, '}');
}

void report_json_scale_keys(jw *w, const an_run *r)
{
    jw_bool(w, "scaled", r->scaled);
    jw_num(w, "initial", r->scale_init);
    jw_num(w, "min", r->scale_min);
    jw_opt_int(w, "min_step", r->nsteps ? r->scale_min_step : -1);
    jw_num(w, "final", r->scale_final);
    jw_u64(w, "backoffs", r->backoffs);
    jw_u64(w, "growths", r->growths);
    jw_u64(w, "overflows_at_min", r->overflows_at_min);
}

void report_json_findings(jw *w, const char *k, const an_run *r)
{
    const an_findings *fd = &r->find;
    jw_open(w, k, '{');
    jw_str(w, "status", r->status_text);
    jw_u64(w, "steps", r->nsteps);
    jw_open(w, "loss_scale", '{');
    report_json_scale_keys(w, r);
    jw_close(w, '}');
    jw_open(w, "skipped", '{');
    jw_u64(w, "count", r->skipped);
    jw_opt_int(w, "first_step", r->skipped ? r->first_skip_step : -1);
    jw_str(w, "first_reason", r->skipped ? r->first_skip_reason : NULL);
    jw_close(w, '}');
    jw_bool(w, "diverged", r->diverged);
    jw_opt_int(w, "divergence_step", r->diverged ? r->divergence_step : -1);
    json_eval(w, r, 0);
    json_layer_value(w, "fp16_activation_headroom", r, fd->act_headroom_layer, "binades",
                     fd->act_headroom);
    if (fd->nonfinite_act_layer >= 0) {
        jw_open(w, "first_nonfinite_forward", '{');
        jw_int(w, "step", fd->nonfinite_act_step);
        jw_str(w, "layer", lname(r, fd->nonfinite_act_layer));
        jw_u64(w, "values", fd->nonfinite_act_count);
        jw_close(w, '}');
    } else {
        jw_null(w, "first_nonfinite_forward");
    }
    if (fd->nonfinite_weight_layer >= 0) {
        jw_open(w, "nonfinite_weights", '{');
        jw_int(w, "step", fd->nonfinite_weight_step);
        jw_str(w, "layer", lname(r, fd->nonfinite_weight_layer));
        jw_close(w, '}');
    } else {
        jw_null(w, "nonfinite_weights");
    }
    json_layer_value(w, "zero_weight_gradients", r, fd->zero_grad_layer, "fraction",
                     fd->zero_grad_fraction);
    json_layer_value(w, "fp16_weight_gradient_flush", r, fd->flush_layer, "fraction",
                     fd->flush_fraction);
    jw_open(w, "updates", '{');
    jw_u64(w, "nonzero", fd->update_nonzero);
    jw_u64(w, "lost", r->lost);
    jw_num(w, "lost_fraction", fd->lost_fraction);
    jw_num(w, "lost_if_fp16_fraction", fd->lost_if_fp16);
    jw_num(w, "lost_if_bf16_fraction", fd->lost_if_bf16);
    jw_close(w, '}');
    jw_close(w, '}');
}

int report_info_json(FILE *f, const an_run *r, const an_findings *fd)
{
    jw w;
    jw_begin(&w, f);
    jw_open(&w, NULL, '{');
    jw_str(&w, "format", "ampdiag-info");
    jw_int(&w, "format_version", INFO_JSON_VERSION);
    jw_str(&w, "file", r->path);
    jw_int(&w, "trace_format_version", r->format_version);
    jw_str(&w, "status", r->status_text);
    jw_bool(&w, "cut_off", r->cut_off);
    jw_bool(&w, "repaired", r->repaired);
    json_attrs(&w, r);
    json_loss_scale(&w, r);
    json_events(&w, r);
    json_whatif(&w, r, fd);
    jw_u64(&w, "unknown_tensor_rows", r->bad_rows);
    report_json_findings(&w, "findings", r);
    jw_close(&w, '}');
    return jw_end(&w);
}

/* ------------------------------------------------------------------------------------------
 * The run summary
 * ------------------------------------------------------------------------------------------ */

static void summary_head(FILE *f, const an_run *r, const report_run_extra *x)
{
    long t = (long)(x->wall_s + 0.5);
    double kb = (double)x->trace_bytes / 1024.0;
    fprintf_text(f, "run %s: %zu steps in %ld:%02ld:%02ld -> %s (%.1f %s)\n", r->status_text, r->nsteps,
                 t / 3600, (t / 60) % 60, t % 60, r->path, kb >= 1024 ? kb / 1024.0 : kb,
                 kb >= 1024 ? "MB" : "KB");
    if (x->traced) {
        fprintf(f, "  full tensor records at %ld of %zu steps", x->full_steps, r->nsteps);
        if (x->cadence > 0)
            fprintf(f, " (every %d steps", x->cadence);
        if (x->cadence > 0 && isfinite(x->trace_budget))
            fprintf(f, ", chosen for a budget of %g%% of the CPU time", x->trace_budget);
        fprintf(f, "%s", x->cadence > 0 ? ")" : "");
        if (x->event_steps > 0)
            fprintf(f, "; %ld for events of their own", x->event_steps);
        fprintf(f, "\n");
    }
    if (x->traced && x->trace_threads && x->wall_s > 0)
        fprintf(f, "  tensor statistics on a second thread; training waited %.2f s for it (%.1f%% of "
                   "the run)\n", x->trace_wait_s, 100.0 * x->trace_wait_s / x->wall_s);
    size_t with_params = 0;
    for (size_t l = 0; l < r->nlayers; l++)
        with_params += r->layers[l].params > 0;
    fprintf_text(f, "  model %s (%zu layers with parameters, %.2fM params), %s, seed %" PRId64 "\n",
                 str_or(r->model, "?"), with_params, (double)r->params / 1e6, str_or(r->precision, "?"),
                 r->seed);
}

static void summary_loss(FILE *f, const an_run *r, const an_findings *fd)
{
    char a[32], b[32], c[32];
    fprintf(f, "  loss %s -> %s (min %s)", fmt_num(a, sizeof a, r->loss_first, 4),
            fmt_num(b, sizeof b, r->loss_last, 4), fmt_num(c, sizeof c, r->loss_min, 4));
    if (fd->last_eval) {
        fprintf(f, ", eval loss %s", fmt_num(a, sizeof a, fd->last_eval->loss, 4));
        if (!isnan(fd->last_eval->metric))
            fprintf_text(f, ", %s %s", str_or(r->eval_metric, "metric"),
                         fmt_metric(b, sizeof b, fd, fd->last_eval->metric));
    }
    fprintf(f, "\n");
    if (r->scaled) {
        rec_fmt_scale(a, sizeof a, r->scale_init);
        rec_fmt_scale(b, sizeof b, r->scale_final);
        rec_fmt_scale(c, sizeof c, r->scale_min);
        fprintf(f, "  loss scale %s -> %s (min %s at step %" PRId64 "), %zu backoffs, %zu growths",
                a, b, c, r->scale_min_step, r->backoffs, r->growths);
        if (r->overflows_at_min)
            fprintf(f, ", %zu overflows at the minimum scale", r->overflows_at_min);
        fprintf(f, "\n");
    }
    if (r->skipped)
        fprintf_text(f, "  %zu skipped steps (%.1f%%): first at step %" PRId64 ", %s\n", r->skipped,
                     100.0 * (double)r->skipped / (double)(r->nsteps ? r->nsteps : 1), r->first_skip_step,
                     str_or(r->first_skip_reason, "(no reason recorded)"));
    else
        fprintf(f, "  no skipped steps\n");
    if (r->diverged)
        fprintf_text(f, "  diverged from step %" PRId64 ": %s\n", r->divergence_step,
                     str_or(r->divergence_why, "the trace's status says so"));
}

static void summary_layers(FILE *f, const an_run *r, const an_findings *fd)
{
    const double fp16_log2max = log2(ampdiag_format_get(AMPDIAG_FP16)->max_finite);
    if (fd->nonfinite_act_layer >= 0)
        fprintf_text(f, "  non-finite activations: %s holds %" PRIu64 " NaN/inf values over the traced "
                        "steps, first at step %" PRId64 "\n", lname(r, fd->nonfinite_act_layer),
                     fd->nonfinite_act_count, fd->nonfinite_act_step);
    if (fd->act_headroom_layer >= 0) {
        if (fd->act_headroom >= 0)
            fprintf_text(f, "  fp16 range: finite activations peak in %s at 2^%.1f (%.1f binades below "
                            "65504)\n", lname(r, fd->act_headroom_layer),
                         fp16_log2max - fd->act_headroom, fd->act_headroom);
        else
            fprintf_text(f, "  fp16 range: %s activations reach 2^%.1f, above FP16's 65504: FP16 "
                            "overflows there\n", lname(r, fd->act_headroom_layer),
                         fp16_log2max - fd->act_headroom);
    }
    if (fd->nonfinite_weight_layer >= 0)
        fprintf_text(f, "  non-finite weights: %s weights hold NaN/inf from step %" PRId64 " on (an "
                        "update made them so)\n", lname(r, fd->nonfinite_weight_layer),
                     fd->nonfinite_weight_step);
    if (fd->update_nonzero) {
        fprintf(f, "  lost updates: %.3g%% of non-zero updates rounded away in %s weight storage",
                100.0 * fd->lost_fraction, r->weights_16bit ? "BF16" : "FP32 master");
        if (!r->weights_16bit && !isnan(fd->lost_if_bf16))
            fprintf(f, "; with BF16 weights %.3g%%, with FP16 weights %.3g%%",
                    100.0 * fd->lost_if_bf16, 100.0 * fd->lost_if_fp16);
        fprintf(f, "\n");
    }
    if (fd->zero_grad_layer >= 0 && fd->zero_grad_fraction >= 0.05)
        fprintf_text(f, "  zero gradients: %.3g%% of %s weight-gradient values are exactly 0\n",
                     100.0 * fd->zero_grad_fraction, lname(r, fd->zero_grad_layer));
    if (fd->flush_layer >= 0 && fd->flush_fraction > 0)
        fprintf_text(f, "  fp16 underflow: %.2g%% of %s weight gradients (as held) flush to zero in "
                        "FP16\n", 100.0 * fd->flush_fraction, lname(r, fd->flush_layer));
}

int report_run_summary(FILE *f, const an_run *r, const an_findings *fd, const report_run_extra *x)
{
    summary_head(f, r, x);
    summary_loss(f, r, fd);
    summary_layers(f, r, fd);
    fprintf_text(f, "  next: ampdiag info %s\n", r->path);
    return ferror(f) ? -1 : 0;
}
