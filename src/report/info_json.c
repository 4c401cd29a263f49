/*
 * info_json.c - `ampdiag info --format json` (info.h; traces/FORMAT.md): the trace's
 * attributes, tables' counts, loss, scale, events, headroom and what-if columns, and its
 * findings and figures.
 */
#include "report/info.h"
#include "report/whatif.h"
#include "report/recipe.h"

#include <math.h>
#include <string.h>

static const char *lname(const an_run *r, int layer)
{
    if (layer < 0)
        return NULL;
    return (size_t)layer < r->nlayers ? r->layers[layer].name : "?";
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

static void json_whatif_entry(jw *w, const char *k, const an_cell *a, int col)
{
    uint64_t o, u, s, nv = an_cell_whatif(a, col, &o, &u, &s);
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
    report_json_eval(w, r, 1);
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
    for (int col = 0; col < r->nwcol; col++) {
        jw_open(w, r->wcol[col].name, '{');
        for (int k = 0; k < AMPDIAG_NKINDS; k++) {
            uint64_t o, u, s;
            if (fd->kind[k].records && an_cell_whatif(&fd->kind[k], col, &o, &u, &s))
                json_whatif_entry(w, ampdiag_kind_name(k), &fd->kind[k], col);
        }
        json_whatif_entry(w, "all", &fd->all, col);
        report_json_hurt_most(w, r, col);
        jw_close(w, '}');
    }
    jw_close(w, '}');
    report_json_fp8(w, r);
    report_json_recipes(w, r);
    report_json_quant(w, r);
    jw_open(w, "nonfinite", '{');
    jw_u64(w, "nan", fd->all.nan);
    jw_u64(w, "posinf", fd->all.posinf);
    jw_u64(w, "neginf", fd->all.neginf);
    jw_close(w, '}');
    jw_u64(w, "lost_updates", r->lost);
    jw_u64(w, "nonzero_updates", r->update_nonzero);
    jw_num(w, "lost_fraction", an_fig(r, FIG_LOST).v);
    if (!r->lost_if_fields) {
        jw_null(w, "lost_if_weights");
    } else {
        jw_open(w, "lost_if_weights", '{');
        jw_u64(w, "nonzero_updates", r->update_nonzero);
        jw_u64(w, "fp16", r->lost_if[0]);
        jw_num(w, "fp16_fraction", an_fig(r, FIG_LOST_IF_FP16).v);
        jw_u64(w, "bf16", r->lost_if[1]);
        jw_num(w, "bf16_fraction", an_fig(r, FIG_LOST_IF_BF16).v);
        jw_close(w, '}');
    }
}

/* What the run's findings suggest setting, in the vocabulary of its writer (messages.h,
 * msg_apply_finding): {vocabulary, lines}. */
static void json_apply(jw *w, const an_run *r, const msg_ctx *m)
{
    const an_finding_list *L = an_run_findings(r);
    msg_vocab v = msg_run_vocab(r);
    char buf[1800];
    jw_open(w, "apply", '{');
    jw_str(w, "vocabulary", msg_vocab_key(v));
    jw_open(w, "lines", '[');
    for (size_t i = 0; i < L->n; i++) {
        int dup = 0;
        for (size_t k = 0; k < i && !dup; k++)
            dup = L->v[k].id == L->v[i].id;
        if (!dup && msg_apply_finding(buf, sizeof buf, m, &L->v[i], v))
            jw_str(w, NULL, buf);
    }
    jw_close(w, ']');
    jw_close(w, '}');
}

int report_info_json(FILE *f, const an_run *r)
{
    const an_findings *fd = r->find;
    msg_ctx m = msg_ctx_run(r);
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
    report_json_ranks(&w, "ranks", r, &m);
    report_json_findings(&w, "findings", r);
    report_json_figures(&w, "figures", r);
    jw_str(&w, "peak_memory_source", r->peak_memory_source[0] ? r->peak_memory_source : NULL);
    report_json_finding_list(&w, "evidence", an_run_findings(r), &m);
    json_apply(&w, r, &m);
    jw_close(&w, '}');
    return jw_end(&w);
}

