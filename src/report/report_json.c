/*
 * report_json.c - a comparison as JSON for scripts (report.h; docs/compare-json.md): every run
 * with its figures and findings, the comparison's findings, and the recommendation with its
 * decisions, items (ids, figures, words) and the older word lists.
 */
#include "report/info.h"
#include "report/report_internal.h"
#include "report/whatif.h"
#include "report/recipe.h"
#include "analysis/recipe.h"

#include <math.h>
#include <string.h>

static void jw_layer(jw *w, const char *k, const an_run *r, int layer)
{
    if (layer < 0 || (size_t)layer >= r->nlayers)
        jw_str(w, k, NULL);
    else
        jw_str(w, k, r->layers[layer].name);
}

static void json_whatif_counts(jw *w, const char *k, const an_cell_figs *h)
{
    jw_open(w, k, '{');
    jw_u64(w, "overflow", h->overflow);
    jw_u64(w, "underflow", h->underflow);
    jw_u64(w, "subnormal", h->subnormal);
    jw_num(w, "overflow_fraction", h->overflow_share);
    jw_num(w, "underflow_fraction", h->underflow_nonzero_share);
    jw_num(w, "subnormal_fraction", h->subnormal_share);
    jw_close(w, '}');
}

static void json_cell(jw *w, const an_run *r, const an_cell *c, int kind)
{
    an_cell_figs h[2];
    an_cell_figs_of(r, c, AN_WI_FP16, &h[0]);
    an_cell_figs_of(r, c, AN_WI_BF16, &h[1]);
    jw_open(w, ampdiag_kind_name(kind), '{');
    jw_u64(w, "records", c->records);
    jw_u64(w, "values", c->count);
    jw_u64(w, "nonzero", an_cell_nonzero(c));
    jw_u64(w, "nan", c->nan);
    jw_u64(w, "posinf", c->posinf);
    jw_u64(w, "neginf", c->neginf);
    jw_num(w, "absmax", c->absmax >= 0 ? c->absmax : NAN);
    jw_opt_int(w, "absmax_step", c->absmax >= 0 ? c->absmax_step : -1);
    jw_num(w, "absmin_nz", c->absmin_nz);
    jw_num(w, "absmax_unscaled", c->absmax_u >= 0 ? c->absmax_u : NAN);
    jw_num(w, "fp16_headroom_over", h[0].over_headroom);
    jw_num(w, "fp16_headroom_under", h[0].under_headroom);
    jw_num(w, "bf16_headroom_over", h[1].over_headroom);
    jw_num(w, "bf16_headroom_under", h[1].under_headroom);
    json_whatif_counts(w, "fp16", &h[0]);
    json_whatif_counts(w, "bf16", &h[1]);
    jw_open(w, "what_if", '{'); /* every column of the run, FP16 and BF16 included */
    for (int col = 0; col < r->nwcol; col++) {
        an_cell_figs x;
        an_cell_figs_of(r, c, col, &x);
        if (x.values)
            json_whatif_counts(w, r->wcol[col].name, &x);
    }
    jw_close(w, '}');
    if (kind == AMPDIAG_KIND_UPDATE) {
        jw_u64(w, "lost_updates", c->lost);
        jw_num(w, "lost_fraction", h[0].lost_share);
    }
    jw_opt_int(w, "first_nonfinite_step", c->first_nonfinite_step);
    jw_close(w, '}');
}

static void json_event(jw *w, const char *k, const an_run *r, const an_event_ref *e)
{
    if (e->step < 0) {
        jw_null(w, k);
        return;
    }
    jw_open(w, k, '{');
    jw_int(w, "step", e->step);
    jw_layer(w, "layer", r, e->layer);
    jw_str(w, "code", ampdiag_event_name(e->code));
    jw_num(w, "value", e->value);
    jw_str(w, "message", e->message);
    jw_close(w, '}');
}

static double fv(const an_finding *f, const char *name)
{
    int k = f ? an_finding_fig(f->id, name) : -1;
    return k >= 0 ? f->v[k] : NAN;
}

static void json_gap(jw *w, const report_in *in, size_t i)
{
    const an_finding *g = an_finding_find(&in->c->list, F_CMP_GAP, (int)i);
    if (!g) {
        jw_null(w, "gap");
        return;
    }
    double rel = fv(g, "rel");
    jw_open(w, "gap", '{');
    jw_str(w, "metric", fv(g, "eval") != 0 ? "eval_loss" : "final_window_training_loss");
    jw_int(w, "step", (int64_t)fv(g, "step"));
    jw_num(w, "baseline", fv(g, "base"));
    jw_num(w, "value", fv(g, "value"));
    jw_num(w, "relative", rel);
    jw_bool(w, "within_band", isfinite(rel) && rel <= fv(g, "band"));
    jw_num(w, "band", fv(g, "band"));
    jw_bool(w, "paired", fv(g, "paired") != 0);
    jw_num(w, "paired_band", fv(g, "paired_band"));
    jw_opt_int(w, "examples", fv(g, "paired") != 0 ? (int64_t)fv(g, "examples") : -1);
    jw_num(w, "curve_max_relative", fv(g, "curve_rel"));
    jw_opt_int(w, "curve_max_from", (int64_t)fv(g, "curve_from"));
    jw_opt_int(w, "curve_max_to", (int64_t)fv(g, "curve_to"));
    jw_close(w, '}');
}

static void json_loss(jw *w, const an_run *r)
{
    jw_open(w, "loss", '{');
    jw_num(w, "first", r->loss_first);
    jw_num(w, "last", r->loss_last);
    jw_num(w, "min", r->loss_min);
    jw_opt_int(w, "min_step", isnan(r->loss_min) ? -1 : r->loss_min_step);
    jw_num(w, "final_window_mean", r->tail_mean);
    jw_num(w, "final_window_sd", r->tail_sd);
    jw_int(w, "final_window_steps", (int64_t)r->tail_w);
    jw_int(w, "nonfinite_steps", (int64_t)r->loss_nonfinite);
    jw_opt_int(w, "first_nonfinite_step", r->first_nonfinite_loss_step);
    jw_close(w, '}');
    const ampdiag_trace_eval *e = an_final_eval(r), *e0 = an_initial_eval(r);
    if (e) {
        jw_open(w, "eval", '{');
        jw_int(w, "step", e->step);
        jw_num(w, "loss", e->loss);
        jw_num(w, "metric", e->metric);
        jw_int(w, "count", (int64_t)r->nevals);
        jw_num(w, "initial_loss", e0 ? e0->loss : NAN);
        jw_num(w, "initial_metric", e0 ? e0->metric : NAN);
        jw_u64(w, "examples", r->nex1);
        jw_close(w, '}');
    } else {
        jw_null(w, "eval");
    }
}

static void json_stability(jw *w, const an_run *r)
{
    jw_open(w, "stability", '{');
    jw_int(w, "nonfinite_events", (int64_t)an_fig(r, FIG_NONFINITE_EVENTS).v);
    json_event(w, "first_nonfinite_event", r, &r->first_nonfinite);
    json_event(w, "first_forward_event", r, &r->first_forward);
    json_event(w, "eval_forward_event", r, &r->eval_forward);
    jw_opt_int(w, "forward_nonfinite_step", r->fwd_nonfinite_step);
    jw_layer(w, "forward_nonfinite_layer", r, r->fwd_nonfinite_layer);
    jw_u64(w, "nan_values", r->nan_values);
    jw_int(w, "skipped", (int64_t)r->skipped);
    jw_int(w, "calibration_steps", (int64_t)r->calib);
    jw_int(w, "skipped_after_calibration", (int64_t)r->skipped_after);
    jw_num(w, "skip_rate_after_calibration",
           r->steps_after ? (double)r->skipped_after / (double)r->steps_after : NAN);
    jw_opt_int(w, "first_skip_step", r->first_skip_step);
    jw_str(w, "first_skip_reason", r->skipped ? r->first_skip_reason : NULL);
    jw_open(w, "loss_scale", '{');
    report_json_scale_keys(w, r);
    jw_num(w, "scaler_min", r->scaler_min > 0 ? r->scaler_min : NAN);
    jw_int(w, "steps_at_min", (int64_t)r->steps_at_min);
    jw_bool(w, "collapsed", r->collapsed);
    jw_close(w, '}');
    jw_bool(w, "diverged", r->diverged);
    jw_opt_int(w, "divergence_step", r->divergence_step);
    jw_int(w, "loss_spikes", (int64_t)r->loss_spikes);
    jw_open(w, "loss_spike_steps", '[');
    for (size_t k = 0; k < r->n_spike_listed; k++)
        jw_int(w, NULL, r->spike_steps[k]);
    jw_close(w, ']');
    jw_close(w, '}');
}

static void json_grad_norm(jw *w, const an_run *r)
{
    const an_clip *k = &r->gn;
    jw_open(w, "grad_norm", '{');
    jw_int(w, "count", (int64_t)k->n);
    jw_int(w, "warmup", (int64_t)k->warmup);
    jw_num(w, "median", k->median);
    jw_num(w, "mad", k->mad);
    jw_num(w, "p10", k->p10);
    jw_num(w, "p99", k->p99);
    jw_num(w, "median_plus_3mad", k->robust);
    jw_num(w, "clip_value", k->value);
    jw_num(w, "clip_fraction", k->n ? (double)k->n_over / (double)k->n : NAN);
    jw_open(w, "clip_steps", '[');
    for (size_t j = 0; j < k->n_over_listed; j++)
        jw_int(w, NULL, k->over_steps[j]);
    jw_close(w, ']');
    jw_int(w, "clipped_by_run", (int64_t)k->actually_clipped);
    jw_close(w, '}');
    jw_open(w, "updates", '{');
    jw_num(w, "ratio_median", r->ratio_median);
    jw_num(w, "step_ratio_median", r->step_ratio_median);
    jw_u64(w, "lost", r->lost);
    jw_u64(w, "nonzero", r->update_nonzero);
    jw_num(w, "lost_fraction", an_fig(r, FIG_LOST).v);
    /* what-if: null for traces without the lost_if_* fields */
    jw_num(w, "lost_if_fp16_fraction", an_fig(r, FIG_LOST_IF_FP16).v);
    jw_num(w, "lost_if_bf16_fraction", an_fig(r, FIG_LOST_IF_BF16).v);
    jw_bool(w, "weights_16bit", r->weights_16bit);
    jw_close(w, '}');
}

static void json_layers(jw *w, const report_in *in, size_t i)
{
    const an_run *r = &in->runs[i];
    const an_comparison *c = in->c;
    jw_open(w, "layers", '[');
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_layer *L = &r->layers[l];
        jw_open(w, NULL, '{');
        jw_str(w, "name", L->name);
        jw_str(w, "op", L->op);
        jw_u64(w, "params", L->params);
        jw_bool(w, "fp32_op", L->fp32_op);
        jw_bool(w, "fp32_island", L->island);
        int m = c->layer_map && c->layer_map[i] ? c->layer_map[i][l] : -1;
        jw_bool(w, "matched", m >= 0);
        jw_num(w, "update_ratio_median", L->ratio_median);
        double dev = NAN;
        if (c->dev && c->dev[i])
            for (size_t d = 0; d < c->ndev[i]; d++)
                if (c->dev[i][d].layer == (int)l)
                    dev = c->dev[i][d].rel;
        jw_num(w, "activation_deviation", dev);
        jw_open(w, "kinds", '{');
        for (int kk = 0; kk < AMPDIAG_NKINDS; kk++)
            if (L->cell[kk].records)
                json_cell(w, r, &L->cell[kk], kk);
        jw_close(w, '}');
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

static void json_run(jw *w, const report_in *in, size_t i)
{
    const an_run *r = &in->runs[i];
    jw_open(w, NULL, '{');
    jw_int(w, "index", (int64_t)i);
    jw_str(w, "label", r->label);
    jw_str(w, "path", r->path);
    jw_bool(w, "baseline", i == in->c->baseline);
    jw_str(w, "precision", r->precision);
    jw_str(w, "model", r->model);
    jw_str(w, "data", r->data);
    jw_opt_int(w, "seed", r->seed);
    jw_str(w, "optimizer", r->optimizer);
    jw_num(w, "lr", r->lr);
    jw_num(w, "clip", r->clip);
    jw_str(w, "loss_scale_mode", r->loss_scale_mode);
    jw_str(w, "fp32_layers", r->fp32_layers);
    jw_str(w, "status", r->status_text);
    jw_bool(w, "cut_off", r->cut_off);
    jw_int(w, "steps", (int64_t)r->nsteps);
    jw_opt_int(w, "steps_planned", r->steps_planned);
    jw_u64(w, "params", r->params);
    /* (the value: figures.peak_memory_bytes) */
    jw_str(w, "peak_memory_source", r->peak_memory_source[0] ? r->peak_memory_source : NULL);
    json_loss(w, r);
    json_gap(w, in, i);
    json_stability(w, r);
    json_grad_norm(w, r);
    report_json_fp8(w, r);
    report_json_recipes(w, r);
    json_layers(w, in, i);
    report_json_findings(w, "findings", r);
    report_json_figures(w, "figures", r);
    report_json_finding_list(w, "evidence", an_run_findings(r), &in->m);
    report_json_ranks(w, "ranks", r, &in->m);
    jw_close(w, '}');
}

/* ------------------------------------------------------------------------------------------
 * The recommendation
 * ------------------------------------------------------------------------------------------ */

static void json_section(jw *w, const char *k, const report_in *in, rec_sec sec)
{
    char buf[2400];
    jw_open(w, k, '[');
    for (size_t i = 0; i < in->R->items.n; i++)
        if (in->R->items.v[i].sec == sec) {
            msg_item(buf, sizeof buf, &in->m, &in->R->items.v[i]);
            jw_str(w, NULL, buf);
        }
    jw_close(w, ']');
}

static void json_format(jw *w, const char *k, const report_in *in, const rec_format *f, rec_sec against,
                        rec_sec pro)
{
    char buf[600];
    jw_open(w, k, '{');
    jw_bool(w, "supported", f->supported);
    jw_bool(w, "observed", f->observed);
    jw_bool(w, "viable", f->viable);
    jw_bool(w, "ruled_out", f->decisive);
    jw_bool(w, "needs_loss_scaling", f->needs_scaling != 0);
    json_section(w, "issues", in, against);
    json_section(w, "evidence", in, pro);
    if (f->summary >= 0) {
        msg_item_short(buf, sizeof buf, &in->m, &in->R->items.v[f->summary]);
        jw_str(w, "summary", buf);
    } else {
        jw_null(w, "summary");
    }
    jw_close(w, '}');
}

static void json_fp32_layers(jw *w, const char *list)
{
    jw_open(w, "fp32_layers", '[');
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        char name[AMPDIAG_TRACE_NAME_LEN];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        jw_str(w, NULL, name);
        p += len;
        if (*p == ',')
            p++;
    }
    jw_close(w, ']');
}

static void json_precision(jw *w, const report_in *in)
{
    const recommendation *R = in->R;
    char v[2400];
    jw_open(w, "precision", '{');
    jw_str(w, "verdict", rec_precision_name(R->precision));
    msg_section(v, sizeof v, &in->m, SEC_VERDICT, "; ");
    jw_str(w, "text", v);
    jw_bool(w, "predicted", R->predicted);
    jw_bool(w, "master_weights", (R->precision == REC_BF16 && !R->keep_pure) || R->master_weights);
    json_fp32_layers(w, R->fp32_layers);
    jw_open(w, "islands", '{');
    jw_str(w, "layers", R->islands[0] ? R->islands : NULL);
    jw_num(w, "params_share", R->islands_param_share);
    jw_num(w, "flops_share", R->islands_flop_share);
    if (R->islands_forward_finite < 0)
        jw_null(w, "forward_finite");
    else
        jw_bool(w, "forward_finite", R->islands_forward_finite);
    jw_close(w, '}');
    json_section(w, "reasons", in, SEC_WHY);
    /* the evidence that decided, first: the first reason (baseline sanity and format causes are
     * ranked before the rest) */
    const rec_item *first = rec_find_item(R, SEC_WHY, R_NONE, F_NONE);
    if (first) {
        msg_item(v, sizeof v, &in->m, first);
        jw_str(w, "decisive_evidence", v);
    } else {
        jw_null(w, "decisive_evidence");
    }
    json_format(w, "fp16", in, &R->fp16, SEC_FP16_AGAINST, SEC_FP16_FOR);
    json_format(w, "bf16", in, &R->bf16, SEC_BF16_AGAINST, SEC_BF16_FOR);
    jw_close(w, '}');
}

/* The loss scale: F_LOSS_SCALE of the run it comes from, and what flushes at it. */
static void json_loss_scale(jw *w, const report_in *in)
{
    const recommendation *R = in->R;
    const an_finding *S = R->scale;
    if (!S) {
        jw_null(w, "loss_scale");
        return;
    }
    const an_run *sr = &in->runs[R->scale_run];
    const an_finding *fl = an_run_finding(sr, F_FLUSH_AT_SCALE), *sub = an_run_finding(sr, F_SUBNORMAL_AT_SCALE);
    const an_finding *f1 = an_run_finding(sr, F_FLUSH_UNSCALED), *sp = an_run_finding(sr, F_GRAD_SPAN);
    jw_open(w, "loss_scale", '{');
    jw_num(w, "value", ldexp(1.0, (int)fv(S, "log2")));
    jw_int(w, "log2", (int64_t)fv(S, "log2"));
    jw_int(w, "from_run", (int64_t)R->scale_run);
    jw_num(w, "max_gradient", fv(S, "max_grad"));
    jw_layer(w, "max_gradient_layer", sr, S->s.layer);
    jw_str(w, "max_gradient_kind", ampdiag_kind_name(S->s.kind));
    jw_opt_int(w, "max_gradient_step", (int64_t)fv(S, "step"));
    jw_bool(w, "from_histograms", fv(S, "from_hist") != 0);
    jw_num(w, "flushed_fraction", fl ? fv(fl, "share") : 0);
    jw_layer(w, "flushed_layer", sr, fl ? fl->s.layer : -1);
    jw_num(w, "subnormal_fraction", sub ? fv(sub, "share") : 0);
    jw_layer(w, "subnormal_layer", sr, sub ? sub->s.layer : -1);
    jw_num(w, "unscaled_flushed_fraction", f1 ? fv(f1, "share") : 0);
    jw_layer(w, "unscaled_flushed_layer", sr, f1 ? f1->s.layer : -1);
    jw_num(w, "gradient_range_log2", sp ? fv(sp, "range_log2") : NAN);
    jw_close(w, '}');
}

static void json_remedies(jw *w, const report_in *in)
{
    const rec_decision *d[16];
    size_t n = rec_remedies(in->R, d, 16);
    char why[800];
    jw_open(w, "remedies", '[');
    for (size_t i = 0; i < n; i++) {
        msg_decision_why(why, sizeof why, &in->m, d[i]);
        jw_open(w, NULL, '{');
        jw_str(w, "option", d[i]->option);
        jw_str(w, "value", d[i]->option_value);
        jw_str(w, "scope", rec_scope_name(d[i]->scope));
        jw_str(w, "why", why);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

static void json_ref(jw *w, const char *k, const an_finding *f);

/* A decision's confidence and the ids of the findings behind it (null and [] without one). */
static void json_decided(jw *w, const recommendation *R, rec_what what)
{
    const rec_decision *d = NULL;
    for (size_t i = 0; i < R->decisions.n && !d; i++)
        if (R->decisions.v[i].what == what)
            d = &R->decisions.v[i];
    jw_str(w, "confidence", d ? rec_conf_key(d->conf) : NULL);
    jw_open(w, "because", '[');
    for (size_t k = 0; d && k < d->nbecause; k++)
        json_ref(w, NULL, d->because[k]);
    jw_close(w, ']');
}

static void json_lr_clip(jw *w, const report_in *in)
{
    const recommendation *R = in->R;
    char line[1200];
    jw_open(w, "lr", '{');
    jw_str(w, "verdict", rec_lr_name(R->lr));
    msg_section(line, sizeof line, &in->m, SEC_LR_LINE, "; ");
    jw_str(w, "text", line);
    jw_num(w, "current", R->lr_current);
    jw_num(w, "factor", R->lr_factor);
    jw_num(w, "suggested", R->lr_suggested);
    json_decided(w, R, WHAT_LR);
    json_section(w, "reasons", in, SEC_LR);
    jw_close(w, '}');
    jw_open(w, "clip", '{');
    jw_bool(w, "offered", R->clip_have);
    json_decided(w, R, WHAT_CLIP);
    jw_num(w, "value", R->clip_have ? R->clip_value : NAN);
    jw_num(w, "fraction_clipped", R->clip_have ? R->clip_frac : NAN);
    jw_num(w, "autoclip_p10", R->clip_have ? R->clip_autoclip : NAN);
    msg_section(line, sizeof line, &in->m, SEC_CLIP_LINE, "; ");
    jw_str(w, "text", line);
    json_section(w, "reasons", in, SEC_CLIP);
    jw_close(w, '}');
}

/* The finding an item or decision reads: {id, run}. */
static void json_ref(jw *w, const char *k, const an_finding *f)
{
    if (!f) {
        jw_null(w, k);
        return;
    }
    jw_open(w, k, '{');
    jw_str(w, "id", an_finding_def_get(f->id)->key);
    jw_opt_int(w, "run", f->s.run);
    jw_close(w, '}');
}

static void json_decisions(jw *w, const report_in *in)
{
    char text[800], why[800];
    jw_open(w, "decisions", '[');
    for (size_t i = 0; i < in->R->decisions.n; i++) {
        const rec_decision *d = &in->R->decisions.v[i];
        msg_decision(text, sizeof text, &in->m, d);
        msg_decision_why(why, sizeof why, &in->m, d);
        jw_open(w, NULL, '{');
        jw_str(w, "what", rec_what_key(d->what));
        if (d->what == WHAT_RECIPE_BF16)
            jw_str(w, "recipe", an_recipe_name((int)d->value));
        jw_str(w, "to", d->to[0] ? d->to : NULL);
        jw_num(w, "value", d->value);
        jw_str(w, "confidence", rec_conf_key(d->conf));
        jw_open(w, "because", '[');
        for (size_t k = 0; k < d->nbecause; k++)
            json_ref(w, NULL, d->because[k]);
        jw_close(w, ']');
        jw_str(w, "option", d->option[0] ? d->option : NULL);
        jw_str(w, "option_value", d->option[0] ? d->option_value : NULL);
        jw_str(w, "scope", d->option[0] ? rec_scope_name(d->scope) : NULL);
        jw_str(w, "text", text);
        jw_str(w, "why", why[0] ? why : NULL);
        jw_open(w, "apply", '{');
        for (int v = 0; v < MSG_NVOCABS; v++) {
            char how[1200];
            int has = msg_apply(how, sizeof how, &in->m, d, (msg_vocab)v);
            jw_str(w, msg_vocab_key((msg_vocab)v), has ? how : NULL);
        }
        jw_close(w, '}');
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

static void json_apply_line(const char *what, const char *how, void *arg)
{
    char line[1700];
    snprintf(line, sizeof line, "%s: %s", what, how);
    jw_str(arg, NULL, line);
}

/* The vocabulary the text's Apply section used, and its lines. */
static void json_apply(jw *w, const report_in *in)
{
    jw_str(w, "vocabulary", msg_vocab_key(report_vocab(in)));
    jw_open(w, "apply", '[');
    report_apply_lines(in, json_apply_line, w);
    jw_close(w, ']');
}

static void json_items(jw *w, const report_in *in)
{
    char text[2400];
    jw_open(w, "items", '[');
    for (size_t i = 0; i < in->R->items.n; i++) {
        const rec_item *it = &in->R->items.v[i];
        msg_item(text, sizeof text, &in->m, it);
        jw_open(w, NULL, '{');
        jw_str(w, "id", msg_item_key(it));
        jw_str(w, "section", rec_sec_key(it->sec));
        jw_opt_int(w, "run", it->run);
        json_ref(w, "finding", it->f);
        jw_str(w, "text", text);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

/* What the advice as a whole claims (rules_claim.c): decided only where it removes a cost that
 * was observed. */
static void json_claim(jw *w, const report_in *in)
{
    const recommendation *R = in->R;
    char line[1600];
    jw_open(w, "claim", '{');
    jw_str(w, "claim", rec_claim_key(R->claim));
    jw_bool(w, "decided", R->claim == CLAIM_FIX);
    msg_section(line, sizeof line, &in->m, SEC_CLAIM, "; ");
    jw_str(w, "text", line[0] ? line : NULL);
    jw_close(w, '}');
}

static void json_recommendation(jw *w, const report_in *in)
{
    jw_open(w, "recommendation", '{');
    json_claim(w, in);
    json_precision(w, in);
    json_loss_scale(w, in);
    json_remedies(w, in);
    json_lr_clip(w, in);
    json_section(w, "warnings", in, SEC_WARN);
    json_section(w, "speed", in, SEC_SPEED);
    json_apply(w, in);
    json_decisions(w, in);
    json_items(w, in);
    jw_close(w, '}');
}

/* --fail-on: what was asked for and what held, by the names --fail-on takes (a group's, or a
 * finding's key), the findings that held, their words. */
static void json_fail_on(jw *w, const report_in *in)
{
    const recommendation *R = in->R;
    const rec_fail_set groups[4] = {REC_FAIL_NAN, REC_FAIL_SKIPS, REC_FAIL_DIVERGENCE, REC_FAIL_OVERFLOW};
    static const char *const gname[4] = {"nan", "skips", "divergence", "overflow"};
    rec_fail_set sets[2] = {R->fail_mask, R->fail_held};
    static const char *const keys[2] = {"requested", "held"};
    jw_open(w, "fail_on", '{');
    for (int s = 0; s < 2; s++) {
        jw_open(w, keys[s], '[');
        rec_fail_set rest = sets[s];
        for (int g = 0; g < 4; g++)
            if (sets[s] & groups[g]) {
                jw_str(w, NULL, gname[g]);
                rest &= ~groups[g];
            }
        for (int id = 1; id < AN_NFINDINGS; id++)
            if (rest & REC_FAIL_BIT(id))
                jw_str(w, NULL, an_finding_def_get((an_fid)id)->key);
        jw_close(w, ']');
    }
    jw_open(w, "held_findings", '[');
    for (int id = 1; id < AN_NFINDINGS; id++)
        if (R->fail_held & REC_FAIL_BIT(id))
            jw_str(w, NULL, an_finding_def_get((an_fid)id)->key);
    jw_close(w, ']');
    jw_bool(w, "failed", (R->fail_held & R->fail_mask) != 0);
    char buf[2400], line[2500];
    jw_open(w, "reasons", '[');
    for (size_t i = 0; i < R->items.n; i++)
        if (R->items.v[i].sec == SEC_FAIL && R->items.v[i].f) {
            msg_item(buf, sizeof buf, &in->m, &R->items.v[i]);
            snprintf(line, sizeof line, "%s: %s", rec_fail_name(R->items.v[i].f->id), buf);
            jw_str(w, NULL, line);
        }
    jw_close(w, ']');
    jw_close(w, '}');
}

static void json_charts(jw *w, const report_opts *o)
{
    jw_open(w, "charts", '[');
    if (o && o->plots_dir)
        for (size_t i = 0; i < o->ncharts; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", o->plots_dir, o->charts[i].file);
            jw_open(w, NULL, '{');
            jw_str(w, "path", path);
            jw_str(w, "description", o->charts[i].desc);
            jw_bool(w, "drawn", o->charts[i].drawn);
            jw_close(w, '}');
        }
    jw_close(w, ']');
    jw_str(w, "charts_note", o ? o->charts_note : NULL);
}

static void json_noise_band(jw *w, const an_comparison *c)
{
    char text[600];
    jw_open(w, "noise_band", '{');
    jw_num(w, "relative", c->band);
    jw_str(w, "source", c->band_from_seeds ? "seeds" : c->band_from_eval ? "baseline_eval_standard_error"
                                                                        : "baseline_final_window");
    jw_int(w, "seeds", (int64_t)c->band_seeds);
    size_t np = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; c->gap && i < c->nruns; i++)
        if (c->gap[i].paired) {
            np++;
            lo = fmin(lo, c->gap[i].band);
            hi = fmax(hi, c->gap[i].band);
        }
    jw_int(w, "paired_runs", (int64_t)np);
    jw_num(w, "paired_min", np ? lo : NAN);
    jw_num(w, "paired_max", np ? hi : NAN);
    jw_num(w, "baseline_final_window_relative", c->tail_noise_rel);
    msg_noise_band(text, sizeof text, c);
    jw_str(w, "text", text);
    jw_close(w, '}');
}

int report_json(FILE *f, const an_run *runs, size_t n, const an_comparison *c, const recommendation *R,
                const report_opts *o)
{
    report_in in;
    report_in_init(&in, runs, n, c, R);
    jw w;
    jw_begin(&w, f);
    jw_open(&w, NULL, '{');
    jw_str(&w, "format", "ampdiag-compare");
    jw_int(&w, "format_version", REPORT_JSON_VERSION);
    jw_int(&w, "version", REPORT_JSON_VERSION); /* the name of format_version before 0.2 */
    jw_str(&w, "tool_version", ampdiag_version());
    jw_str(&w, "target", rec_target_name(R->target));
    jw_int(&w, "baseline", (int64_t)c->baseline);
    json_noise_band(&w, c);
    char buf[1200];
    jw_open(&w, "notes", '[');
    for (size_t i = 0; i < c->list.n; i++)
        if (report_is_note(&c->list.v[i])) {
            msg_finding(buf, sizeof buf, &in.m, &c->list.v[i]);
            jw_str(&w, NULL, buf);
        }
    jw_close(&w, ']');
    report_json_finding_list(&w, "evidence", &c->list, &in.m);
    jw_open(&w, "runs", '[');
    for (size_t i = 0; i < n; i++)
        json_run(&w, &in, i);
    jw_close(&w, ']');
    json_recommendation(&w, &in);
    json_fail_on(&w, &in);
    json_charts(&w, o);
    jw_close(&w, '}');
    return jw_end(&w);
}
