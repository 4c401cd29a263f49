/*
 * recipe.c - the low-precision recipe sections (recipe.h) in text, Markdown and JSON, and the
 * /quant columns' per-(layer, kind) figures info prints: what analysis computed (the findings
 * F_RECIPE_HURT, F_RECIPE_LAYER, F_RECIPE_PLAN and the cells' quant sums), words from the
 * message table.
 */
#include "report/recipe.h"
#include "analysis/recipe.h"
#include "messages/messages.h"
#include "report/report.h"
#include "util/escape.h"
#include "util/wrap.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static double fv(const an_finding *f, const char *name)
{
    int k = an_finding_fig(f->id, name);
    return k >= 0 ? f->v[k] : NAN;
}

/* The findings of id about recipe rc, in the order they were found (NULL: the first). */
static const an_finding *next_of(const an_run *r, an_fid id, int rc, const an_finding *prev)
{
    const an_finding_list *L = an_run_findings(r);
    for (const an_finding *f = prev; (f = an_finding_next(L, id, -1, f));)
        if ((int)fv(f, "recipe") == rc)
            return f;
    return NULL;
}

void report_recipes_counted(char *buf, size_t len, const an_run *runs, size_t n)
{
    buf[0] = 0;
    for (int rc = 0; rc < AN_NRECIPES; rc++) {
        int any = 0;
        for (size_t i = 0; i < n && !any; i++)
            any = an_recipe_counted(&runs[i], rc);
        size_t k = strlen(buf);
        if (any && k + strlen(an_recipe_name(rc)) + 3 < len)
            snprintf(buf + k, len - k, "%s%s", k ? ", " : "", an_recipe_name(rc));
    }
}

/* ------------------------------------------------------------------------------------------
 * Text
 * ------------------------------------------------------------------------------------------ */

void report_text_recipe(FILE *f, const an_run *r, int rc, int indent, int width)
{
    char buf[2400], counted[200];
    msg_ctx m = msg_ctx_run(r);
    const an_finding *plan = next_of(r, F_RECIPE_PLAN, rc, NULL);
    if (!plan) {
        report_recipes_counted(counted, sizeof counted, r, 1);
        msg_recipe_not_counted(buf, sizeof buf, rc, counted);
        wrap_para(f, "", indent, buf, width);
        return;
    }
    size_t listed = 0, hurt = (size_t)fv(plan, "hurt");
    msg_recipe_header(buf, sizeof buf, rc, hurt == 0);
    wrap_para(f, "", indent, buf, width);
    for (const an_finding *h = NULL; (h = next_of(r, F_RECIPE_HURT, rc, h)); listed++) {
        msg_finding(buf, sizeof buf, &m, h);
        wrap_para(f, "", indent + 2, buf, width);
    }
    if (hurt > listed) {
        msg_whatif_more(buf, sizeof buf, hurt - listed);
        wrap_para(f, "", indent + 2, buf, width);
    }
    msg_recipe_plan_header(buf, sizeof buf, rc);
    wrap_para(f, "", indent, buf, width);
    for (const an_finding *l = NULL; (l = next_of(r, F_RECIPE_LAYER, rc, l));) {
        msg_finding(buf, sizeof buf, &m, l);
        wrap_para(f, "", indent + 2, buf, width);
    }
    msg_finding(buf, sizeof buf, &m, plan);
    wrap_para(f, "", indent, buf, width);
}

/* ------------------------------------------------------------------------------------------
 * Markdown
 * ------------------------------------------------------------------------------------------ */

static void md(FILE *f, const char *s) { str_fputs(s, SINK_MD, f); }

static void md_pct(FILE *f, double v)
{
    char b[32];
    msg_pct(b, sizeof b, v);
    fprintf(f, " %s |", isnan(v) ? "-" : b);
}

static void md_db(FILE *f, double v)
{
    if (isnan(v))
        fprintf(f, " - |");
    else
        fprintf(f, " %.1f |", v);
}

/* The plan as a table: rank, layer, verdict, the worst tensor and its column, its figures. */
static void md_plan(FILE *f, const an_run *r, int rc)
{
    fprintf(f, "\n| rank | layer | verdict | worst tensor | column | flushed | normal values | saturated | "
               "normal values | SQNR dB | normal values |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const an_finding *l = NULL; (l = next_of(r, F_RECIPE_LAYER, rc, l));) {
        fprintf(f, "| %.0f | ", fv(l, "rank"));
        md(f, an_layer_name(r, l->s.layer));
        fprintf(f, " | %s%s | %s | ", fv(l, "keep") != 0 ? "**stay BF16**" : "take ", fv(l, "keep") != 0 ? "" : an_recipe_name(rc),
                msg_kind_words(l->s.kind));
        md(f, l->s.col >= 0 && l->s.col < r->nwcol ? r->wcol[l->s.col].name : "?");
        fputs(" |", f);
        md_pct(f, fv(l, "flush_share"));
        md_pct(f, fv(l, "ref_flush"));
        md_pct(f, fv(l, "saturated_share"));
        md_pct(f, fv(l, "ref_saturated"));
        md_db(f, fv(l, "sqnr_db"));
        md_db(f, fv(l, "ref_sqnr_db"));
        fputc('\n', f);
    }
}

void report_md_recipe(FILE *f, const an_run *r, int rc)
{
    char buf[2400], counted[200];
    msg_ctx m = msg_ctx_run(r);
    fprintf(f, "\n### Recipe %s in ", an_recipe_name(rc));
    md(f, r->label);
    fputs("\n\n", f);
    const an_finding *plan = next_of(r, F_RECIPE_PLAN, rc, NULL);
    if (!plan) {
        report_recipes_counted(counted, sizeof counted, r, 1);
        msg_recipe_not_counted(buf, sizeof buf, rc, counted);
        md(f, buf);
        fputc('\n', f);
        return;
    }
    size_t listed = 0, hurt = (size_t)fv(plan, "hurt");
    msg_recipe_header(buf, sizeof buf, rc, hurt == 0);
    md(f, buf);
    fputs("\n\n", f);
    for (const an_finding *h = NULL; (h = next_of(r, F_RECIPE_HURT, rc, h)); listed++) {
        msg_finding(buf, sizeof buf, &m, h);
        fputs("- ", f);
        md(f, buf);
        fputc('\n', f);
    }
    if (hurt > listed) {
        msg_whatif_more(buf, sizeof buf, hurt - listed);
        fputs("- ", f);
        md(f, buf);
        fputc('\n', f);
    }
    msg_recipe_plan_header(buf, sizeof buf, rc);
    fputc('\n', f);
    md(f, buf);
    fputc('\n', f);
    md_plan(f, r, rc);
    msg_finding(buf, sizeof buf, &m, plan);
    fputc('\n', f);
    md(f, buf);
    fputc('\n', f);
}

/* ------------------------------------------------------------------------------------------
 * JSON
 * ------------------------------------------------------------------------------------------ */

static const char *col_name(const an_run *r, int col)
{
    return col >= 0 && col < r->nwcol ? r->wcol[col].name : NULL;
}

static void json_hurt(jw *w, const an_run *r, const an_finding *h)
{
    char text[2400];
    msg_ctx m = msg_ctx_run(r);
    msg_finding(text, sizeof text, &m, h);
    jw_open(w, NULL, '{');
    jw_str(w, "layer", an_layer_name(r, h->s.layer));
    jw_str(w, "kind", ampdiag_kind_name(h->s.kind));
    jw_str(w, "column", col_name(r, h->s.col));
    static const char *const keys[][2] = {
        {"flush_share", "flushed_fraction"}, {"ref_flush", "normal_flushed_fraction"},
        {"saturated_share", "saturated_fraction"}, {"ref_saturated", "normal_saturated_fraction"},
        {"subnormal_share", "subnormal_fraction"}, {"sqnr_db", "sqnr_db"}, {"ref_sqnr_db", "normal_sqnr_db"},
        {"rel_mse", "relative_mse"}, {"max_rel_err", "max_relative_error"},
        {"scale_underflow", "scale_underflow_fraction"}, {"disagree_share", "disagree_fraction"},
        {"worst_sqnr_db", "worst_sqnr_db"}, {"excess", "excess"}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        jw_num(w, keys[i][1], fv(h, keys[i][0]));
    jw_opt_int(w, "worst_step", (int64_t)fv(h, "worst_step"));
    jw_str(w, "reason", msg_recipe_reason_key((int)fv(h, "reason")));
    jw_str(w, "text", text);
    jw_close(w, '}');
}

static void json_plan_layer(jw *w, const an_run *r, const an_finding *l)
{
    jw_open(w, NULL, '{');
    jw_int(w, "rank", (int64_t)fv(l, "rank"));
    jw_str(w, "layer", an_layer_name(r, l->s.layer));
    jw_int(w, "position", (int64_t)fv(l, "position"));
    jw_bool(w, "stay_bf16", fv(l, "keep") != 0);
    jw_str(w, "worst_kind", ampdiag_kind_name(l->s.kind));
    jw_str(w, "column", col_name(r, l->s.col));
    jw_num(w, "excess", fv(l, "excess"));
    jw_num(w, "flushed_fraction", fv(l, "flush_share"));
    jw_num(w, "normal_flushed_fraction", fv(l, "ref_flush"));
    jw_num(w, "saturated_fraction", fv(l, "saturated_share"));
    jw_num(w, "normal_saturated_fraction", fv(l, "ref_saturated"));
    jw_num(w, "sqnr_db", fv(l, "sqnr_db"));
    jw_num(w, "normal_sqnr_db", fv(l, "ref_sqnr_db"));
    jw_str(w, "reason", msg_recipe_reason_key((int)fv(l, "reason")));
    jw_close(w, '}');
}

/* The layers of the plan that stay BF16 (keep 1) or take the recipe (keep 0), in rank order. */
static void json_layer_names(jw *w, const char *k, const an_run *r, int rc, int keep)
{
    jw_open(w, k, '[');
    for (const an_finding *l = NULL; (l = next_of(r, F_RECIPE_LAYER, rc, l));)
        if ((fv(l, "keep") != 0) == keep)
            jw_str(w, NULL, an_layer_name(r, l->s.layer));
    jw_close(w, ']');
}

static void json_recipe(jw *w, const an_run *r, int rc, const an_finding *plan)
{
    char text[2400];
    msg_ctx m = msg_ctx_run(r);
    jw_open(w, an_recipe_name(rc), '{');
    jw_str(w, "what", an_recipe_what(rc));
    jw_int(w, "layers", (int64_t)fv(plan, "layers"));
    jw_int(w, "stay_bf16_count", (int64_t)fv(plan, "keep"));
    jw_num(w, "stay_bf16_fraction", fv(plan, "keep_share"));
    jw_int(w, "stay_bf16_last", (int64_t)fv(plan, "keep_last"));
    jw_int(w, "hurt_count", (int64_t)fv(plan, "hurt"));
    jw_int(w, "tensors", (int64_t)fv(plan, "tensors"));
    jw_bool(w, "nearest_columns", fv(plan, "nearest") != 0);
    json_layer_names(w, "stay_bf16", r, rc, 1);
    json_layer_names(w, "take_recipe", r, rc, 0);
    jw_open(w, "plan", '[');
    for (const an_finding *l = NULL; (l = next_of(r, F_RECIPE_LAYER, rc, l));)
        json_plan_layer(w, r, l);
    jw_close(w, ']');
    jw_open(w, "hurt_most", '[');
    for (const an_finding *h = NULL; (h = next_of(r, F_RECIPE_HURT, rc, h));)
        json_hurt(w, r, h);
    jw_close(w, ']');
    msg_finding(text, sizeof text, &m, plan);
    jw_str(w, "text", text);
    jw_close(w, '}');
}

void report_json_recipes(jw *w, const an_run *r)
{
    jw_open(w, "recipes", '{');
    jw_open(w, "counted", '[');
    for (int rc = 0; rc < AN_NRECIPES; rc++)
        if (next_of(r, F_RECIPE_PLAN, rc, NULL))
            jw_str(w, NULL, an_recipe_name(rc));
    jw_close(w, ']');
    jw_open(w, "plans", '{');
    for (int rc = 0; rc < AN_NRECIPES; rc++) {
        const an_finding *plan = next_of(r, F_RECIPE_PLAN, rc, NULL);
        if (plan)
            json_recipe(w, r, rc, plan);
    }
    jw_close(w, '}');
    jw_close(w, '}');
}

/* ------------------------------------------------------------------------------------------
 * The /quant columns' figures per (layer, kind)
 * ------------------------------------------------------------------------------------------ */

static void json_qcell(jw *w, const an_run *r, size_t l, int k, const an_qcell *q)
{
    an_qfigs g;
    an_qcell_figs(q, &g);
    jw_open(w, NULL, '{');
    jw_str(w, "layer", r->layers[l].name);
    jw_str(w, "kind", ampdiag_kind_name(k));
    jw_u64(w, "records", q->records);
    jw_u64(w, "values", q->count);
    jw_u64(w, "nonfinite", q->nonfinite);
    jw_u64(w, "flushed", q->flushed);
    jw_u64(w, "saturated", q->saturated);
    jw_u64(w, "subnormal", q->subnormal);
    jw_u64(w, "poisoned", q->poisoned);
    jw_u64(w, "blocks", q->blocks);
    jw_u64(w, "zero_blocks", q->zero_blocks);
    jw_u64(w, "scale_clamped", q->scale_clamped);
    jw_u64(w, "scale_underflow", q->scale_underflow);
    if (q->scale_emin <= q->scale_emax) {
        jw_int(w, "scale_emin", q->scale_emin);
        jw_int(w, "scale_emax", q->scale_emax);
    } else {
        jw_null(w, "scale_emin");
        jw_null(w, "scale_emax");
    }
    jw_num(w, "sqnr_db", g.sqnr_db);
    jw_num(w, "relative_mse", g.rel_mse);
    jw_num(w, "max_relative_error", g.max_rel_err);
    jw_opt_int(w, "max_relative_error_step", q->max_rel_step);
    jw_num(w, "worst_sqnr_db", g.worst_sqnr_db);
    jw_opt_int(w, "worst_step", g.worst_step);
    jw_u64(w, "disagree", q->disagree);
    jw_close(w, '}');
}

void report_json_quant(jw *w, const an_run *r)
{
    jw_open(w, "quant", '{');
    for (int col = 0; col < r->nwcol; col++) {
        ampdiag_qspec s;
        if (an_whatif_qspec(r, col, &s))
            continue;
        const an_whatif_col *c = &r->wcol[col];
        jw_open(w, c->name, '{');
        jw_str(w, "element", c->format);
        jw_str(w, "scheme", ampdiag_qscheme_name((int)s.scheme));
        jw_str(w, "rule", ampdiag_qrule_name((int)s.rule));
        jw_str(w, "direction", ampdiag_qdir_name((int)s.dir));
        jw_int(w, "block", s.block);
        jw_num(w, "normal_sqnr_db", c->ref_sqnr_db);
        jw_num(w, "normal_flushed_fraction", c->ref_flush);
        jw_num(w, "normal_saturated_fraction", c->ref_saturated);
        jw_open(w, "cells", '[');
        for (size_t l = 0; l < r->nlayers; l++)
            for (int k = 0; k < AMPDIAG_NKINDS; k++) {
                const an_qcell *q = an_cell_quant(&r->layers[l].cell[k], col);
                if (q)
                    json_qcell(w, r, l, k, q);
            }
        jw_close(w, ']');
        jw_close(w, '}');
    }
    jw_close(w, '}');
}

static void cell_pct(wrap_cells *t, double v)
{
    char b[32];
    msg_pct(b, sizeof b, v);
    wrap_cell(t, "%s", isnan(v) ? "-" : b);
}

/* One column's table: a row per (layer, kind) with its figures. */
static void quant_table(FILE *f, const an_run *r, int col, int width)
{
    const an_whatif_col *c = &r->wcol[col];
    char line[600], ref[40];
    msg_pct(ref, sizeof ref, c->ref_flush);
    snprintf(line, sizeof line, "%s per layer and kind (summed over the traced steps; on normal values it flushes %s, "
             "SQNR %.1f dB):", c->name, ref, c->ref_sqnr_db);
    wrap_para(f, "", 0, line, width);
    static const char *const hdr[10] = {"layer", "kind", "flushed", "saturated", "subnormal", "SQNR dB",
                                        "worst dB (step)", "max rel err", "row/col differ", "scale underflow"};
    wrap_cells t = {0};
    for (int i = 0; i < 10; i++)
        wrap_cell(&t, "%s", hdr[i]);
    for (size_t l = 0; l < r->nlayers; l++)
        for (int k = 0; k < AMPDIAG_NKINDS; k++) {
            an_qfigs g;
            const an_qcell *q = an_cell_quant(&r->layers[l].cell[k], col);
            if (!q)
                continue;
            an_qcell_figs(q, &g);
            wrap_cell(&t, "%s", r->layers[l].name);
            wrap_cell(&t, "%s", msg_kind_abbrev(k));
            cell_pct(&t, g.flush);
            cell_pct(&t, g.saturated);
            cell_pct(&t, g.subnormal);
            wrap_cell(&t, "%.1f", g.sqnr_db);
            wrap_cell(&t, "%.1f (%" PRId64 ")", g.worst_sqnr_db, g.worst_step);
            wrap_cell(&t, "%.3g", g.max_rel_err);
            cell_pct(&t, g.disagree);
            cell_pct(&t, g.scale_underflow);
        }
    wrap_cells_print(f, &t, 10, 2, width, 8);
}

void report_text_quant(FILE *f, const an_run *r, const char *list, int width)
{
    for (int col = 0; col < r->nwcol; col++)
        if (an_whatif_is_quant(r, col) && report_whatif_shown(r, col, list))
            quant_table(f, r, col, width);
}
