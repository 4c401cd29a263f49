/*
 * json_evidence.c - the JSON every document shares (info.h): findings with their ids, figures,
 * units, constants and words; a run's headline figures; the "findings" object of info and
 * compare (the same keys and values in both); the loss-scale keys.
 */
#include "report/info.h"
#include "messages/messages.h"

#include <math.h>
#include <string.h>

static void jw_layer(jw *w, const char *k, const an_run *r, int layer)
{
    if (!r || layer < 0 || (size_t)layer >= r->nlayers)
        jw_null(w, k);
    else
        jw_str(w, k, r->layers[layer].name);
}

void report_json_finding(jw *w, const an_finding *f, const msg_ctx *m)
{
    const an_finding_def *d = an_finding_def_get(f->id);
    const an_run *r = m->runs && f->s.run >= 0 && (size_t)f->s.run < m->nruns ? &m->runs[f->s.run] : NULL;
    char text[2400];
    jw_open(w, NULL, '{');
    jw_str(w, "id", d->key);
    jw_opt_int(w, "run", f->s.run);
    jw_opt_int(w, "against_run", f->s.run2);
    jw_layer(w, "layer", r, f->s.layer);
    jw_str(w, "kind", f->s.kind >= 0 ? ampdiag_kind_name(f->s.kind) : NULL);
    jw_str(w, "format", r && f->s.col >= 0 && f->s.col < r->nwcol ? r->wcol[f->s.col].name : NULL);
    jw_opt_int(w, "from_step", f->s.from);
    jw_opt_int(w, "to_step", f->s.to);
    jw_open(w, "figures", '{');
    for (int i = 0; i < AN_MAXFIG && d->fig[i].name; i++) {
        jw_open(w, d->fig[i].name, '{');
        jw_num(w, "value", f->v[i]);
        jw_str(w, "unit", an_unit_key(d->fig[i].unit));
        jw_close(w, '}');
    }
    for (int i = 0; i < AN_MAXSTR && d->str[i]; i++) {
        jw_open(w, d->str[i], '{');
        jw_str(w, "value", f->str[i] ? f->str[i] : "");
        jw_str(w, "unit", "text");
        jw_close(w, '}');
    }
    jw_close(w, '}');
    jw_open(w, "constants", '{');
    for (int i = 0; i < d->nk; i++)
        jw_num(w, an_const_get(d->k[i])->key, an_const_get(d->k[i])->value);
    jw_close(w, '}');
    msg_finding(text, sizeof text, m, f);
    jw_str(w, "text", text);
    jw_close(w, '}');
}

void report_json_finding_list(jw *w, const char *k, const an_finding_list *l, const msg_ctx *m)
{
    jw_open(w, k, '[');
    for (size_t i = 0; i < l->n; i++)
        report_json_finding(w, &l->v[i], m);
    jw_close(w, ']');
}

void report_json_figures(jw *w, const char *k, const an_run *r)
{
    char text[200];
    jw_open(w, k, '{');
    for (int i = 0; i < AN_NFIGS; i++) {
        an_figval v = an_fig(r, (an_figid)i);
        const an_fig_row *row = an_fig_row_get((an_figid)i);
        jw_open(w, row->key, '{');
        jw_str(w, "name", msg_fig_name((an_figid)i));
        jw_num(w, "value", v.v);
        jw_str(w, "unit", an_unit_key(row->unit));
        jw_layer(w, "layer", r, v.layer);
        jw_str(w, "kind", v.kind >= 0 ? ampdiag_kind_name(v.kind) : NULL);
        jw_opt_int(w, "step", v.step);
        jw_bool(w, "not_applicable", v.na);
        msg_fig_value(text, sizeof text, r, (an_figid)i);
        jw_str(w, "text", text);
        jw_close(w, '}');
    }
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

/* The last evaluation: info's top level names its step last_step and adds the count. */
void report_json_eval(jw *w, const an_run *r, int info_keys)
{
    const ampdiag_trace_eval *e = r->find ? r->find->last_eval : NULL;
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

static void layer_value(jw *w, const char *k, const an_run *r, an_figid id, const char *vk)
{
    an_figval v = an_fig(r, id);
    if (v.layer < 0) {
        jw_null(w, k);
        return;
    }
    jw_open(w, k, '{');
    jw_layer(w, "layer", r, v.layer);
    jw_num(w, vk, v.v);
    jw_close(w, '}');
}

/* The legacy objects of the findings: the first NaN/inf in the forward pass, non-finite weights. */
static void nonfinite_objects(jw *w, const an_run *r)
{
    an_figval a = an_fig(r, FIG_NONFINITE_ACT), wt = an_fig(r, FIG_NONFINITE_WEIGHTS);
    if (a.layer >= 0) {
        jw_open(w, "first_nonfinite_forward", '{');
        jw_int(w, "step", a.step);
        jw_layer(w, "layer", r, a.layer);
        jw_u64(w, "values", (uint64_t)a.v);
        jw_close(w, '}');
    } else {
        jw_null(w, "first_nonfinite_forward");
    }
    if (wt.layer >= 0) {
        jw_open(w, "nonfinite_weights", '{');
        jw_int(w, "step", wt.step);
        jw_layer(w, "layer", r, wt.layer);
        jw_close(w, '}');
    } else {
        jw_null(w, "nonfinite_weights");
    }
}

void report_json_findings(jw *w, const char *k, const an_run *r)
{
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
    report_json_eval(w, r, 0);
    layer_value(w, "fp16_activation_headroom", r, FIG_FP16_ACT_HEADROOM, "binades");
    nonfinite_objects(w, r);
    layer_value(w, "zero_weight_gradients", r, FIG_ZERO_GRAD, "fraction");
    layer_value(w, "fp16_weight_gradient_flush", r, FIG_FP16_WGRAD_FLUSH, "fraction");
    layer_value(w, "fp16_flush_share", r, FIG_FP16_FLUSH, "fraction");
    jw_open(w, "updates", '{');
    jw_u64(w, "nonzero", r->update_nonzero);
    jw_u64(w, "lost", r->lost);
    jw_num(w, "lost_fraction", an_fig(r, FIG_LOST).v);
    jw_num(w, "lost_if_fp16_fraction", an_fig(r, FIG_LOST_IF_FP16).v);
    jw_num(w, "lost_if_bf16_fraction", an_fig(r, FIG_LOST_IF_BF16).v);
    jw_close(w, '}');
    jw_close(w, '}');
}
