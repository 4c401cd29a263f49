/*
 * whatif.c - the what-if sections beyond FP16 and BF16 in text and JSON (whatif.h), and which
 * columns a --what-if list shows (report.h).
 */
#include "report/whatif.h"
#include "report/recipe.h"
#include "messages/messages.h"
#include "report/report.h"
#include "util/escape.h"
#include "util/wrap.h"

#include <math.h>
#include <string.h>
#include <strings.h>

/* name is one of the comma-separated names of list (case-insensitive). */
static int named(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, ",");
        if (k == len && strncasecmp(p, name, len) == 0)
            return 1;
        p += k + (p[k] == ',');
    }
    return 0;
}

int report_whatif_shown(const an_run *r, int col, const char *list)
{
    if (col < 0 || col >= r->nwcol)
        return 0;
    return col == AN_WI_FP16 || col == AN_WI_BF16 || an_whatif_own(r, col) || an_whatif_named(r, col, list);
}

void report_whatif_hidden_names(char *buf, size_t n, const an_run *runs, size_t nruns, const char *list)
{
    buf[0] = 0;
    for (size_t i = 0; i < nruns; i++)
        for (int col = 0; col < runs[i].nwcol; col++) {
            const char *nm = runs[i].wcol[col].name;
            if (report_whatif_shown(&runs[i], col, list) || named(buf, nm) || an_whatif_is_quant(&runs[i], col))
                continue; /* the /quant columns: report_recipes_line */
            size_t len = strlen(buf);
            if (len + strlen(nm) + 3 < n)
                snprintf(buf + len, n - len, "%s%s", len ? "," : "", nm);
        }
}

void report_recipes_line(char *buf, size_t n, const an_run *runs, size_t nruns, const char *list, int tables)
{
    char names[200];
    int quant = 0;
    for (size_t i = 0; tables && i < nruns; i++)
        for (int col = 0; col < runs[i].nwcol; col++)
            quant |= an_whatif_is_quant(&runs[i], col) && !report_whatif_shown(&runs[i], col, list);
    report_recipes_counted(names, sizeof names, runs, nruns);
    msg_recipes_counted(buf, n, names, quant);
}

/* The recipe's columns (E4M3 and E5M2 under delayed scaling) are shown. */
static int recipe_shown(const an_run *r, const char *list)
{
    int a = an_whatif_find(r, AMPDIAG_E4M3, AMPDIAG_SCALING_DELAYED);
    int b = an_whatif_find(r, AMPDIAG_E5M2, AMPDIAG_SCALING_DELAYED);
    return report_whatif_shown(r, a, list) || report_whatif_shown(r, b, list);
}

static void line(FILE *f, int indent, const char *text, int width)
{
    wrap_para(f, "", indent, text, width);
}

void report_text_whatif_hurt(FILE *f, const an_run *r, const char *list, int indent, int width)
{
    const an_finding_list *L = an_run_findings(r);
    msg_ctx m = msg_ctx_run(r);
    char buf[800];
    int ind2 = indent + 2;
    for (int col = 0; col < r->nwcol; col++) {
        if (col == AN_WI_FP16 || col == AN_WI_BF16 || r->wcol[col].key.scaling != AMPDIAG_SCALING_NONE ||
            an_whatif_is_quant(r, col) || !report_whatif_shown(r, col, list))
            continue;
        int any = 0;
        for (size_t i = 0; i < L->n; i++)
            any |= L->v[i].id == F_WHATIF_HURT && L->v[i].s.col == col && L->v[i].v[8] == 0;
        msg_whatif_header(buf, sizeof buf, r, col, 0, !any);
        line(f, indent, buf, width);
        for (size_t i = 0; i < L->n; i++)
            if (L->v[i].id == F_WHATIF_HURT && L->v[i].s.col == col && L->v[i].v[8] == 0) {
                msg_whatif_row(buf, sizeof buf, r, &L->v[i]);
                line(f, ind2, buf, width);
            }
    }
    if (!r->find || !r->find->recipe || !recipe_shown(r, list))
        return;
    size_t nhurt = 0;
    for (size_t i = 0; i < L->n; i++)
        nhurt += L->v[i].id == F_WHATIF_HURT && L->v[i].v[8] != 0;
    msg_whatif_header(buf, sizeof buf, r, -1, 1, nhurt == 0);
    line(f, indent, buf, width);
    for (size_t i = 0; i < L->n; i++)
        if (L->v[i].id == F_WHATIF_HURT && L->v[i].v[8] != 0) {
            msg_finding(buf, sizeof buf, &m, &L->v[i]);
            line(f, ind2, buf, width);
        }
    if (r->find->recipe_hurt_all > nhurt) {
        msg_whatif_more(buf, sizeof buf, r->find->recipe_hurt_all - nhurt);
        line(f, ind2, buf, width);
    }
}

static const char *const reason_name[] = {
    [AN_HURT_RANGE] = "range", [AN_HURT_ABOVE] = "above", [AN_HURT_BELOW] = "below",
    [AN_HURT_AMAX] = "amax_growth", [AN_HURT_HISTORY] = "history", [AN_HURT_MARGIN] = "margin",
};

static double fv(const an_finding *f, const char *name)
{
    int k = an_finding_fig(f->id, name);
    return k >= 0 ? f->v[k] : NAN;
}

static void json_hurt(jw *w, const an_run *r, const an_finding *h)
{
    char why[480];
    msg_hurt_why(why, sizeof why, r, h);
    const an_whatif_col *c = &r->wcol[h->s.col];
    jw_open(w, NULL, '{');
    jw_str(w, "layer", an_layer_name(r, h->s.layer));
    jw_str(w, "kind", ampdiag_kind_name(h->s.kind));
    jw_str(w, "format", c->format);
    jw_str(w, "scaling", ampdiag_scaling_name(c->key.scaling));
    jw_u64(w, "values", (uint64_t)fv(h, "values"));
    jw_u64(w, "overflow", (uint64_t)fv(h, "overflow"));
    jw_num(w, "overflow_fraction", fv(h, "overflow_share"));
    jw_u64(w, "underflow", (uint64_t)fv(h, "underflow"));
    jw_num(w, "underflow_fraction", fv(h, "underflow_share"));
    jw_num(w, "absmin_nz", fv(h, "absmin_nz"));
    jw_num(w, "absmax", fv(h, "absmax"));
    jw_str(w, "reason", reason_name[(int)fv(h, "reason")]);
    jw_str(w, "why", why);
    jw_close(w, '}');
}

void report_json_fp8(jw *w, const an_run *r)
{
    if (!r->find || !r->find->recipe) {
        jw_null(w, "fp8");
        return;
    }
    const an_finding_list *L = an_run_findings(r);
    jw_open(w, "fp8", '{');
    jw_open(w, "recipe", '{');
    jw_str(w, "scaling", "delayed");
    jw_opt_int(w, "amax_history", r->fp8_history);
    jw_int(w, "margin", r->fp8_margin);
    jw_str(w, "amax_compute_algo", "max");
    jw_open(w, "formats", '{');
    for (int k = 0; k < AMPDIAG_NKINDS; k++)
        if (k != AMPDIAG_KIND_UPDATE)
            jw_str(w, ampdiag_kind_name(k), ampdiag_format_get(an_recipe_format(k))->name);
    jw_close(w, '}');
    jw_close(w, '}');
    jw_u64(w, "hurt_count", r->find->recipe_hurt_all);
    jw_open(w, "hurt", '[');
    for (size_t i = 0; i < L->n; i++)
        if (L->v[i].id == F_WHATIF_HURT && L->v[i].v[8] != 0)
            json_hurt(w, r, &L->v[i]);
    jw_close(w, ']');
    jw_close(w, '}');
}

void report_json_hurt_most(jw *w, const an_run *r, int col)
{
    const an_whatif_col *c = &r->wcol[col];
    if (col == AN_WI_FP16 || col == AN_WI_BF16 || c->key.scaling != AMPDIAG_SCALING_NONE || c->source == AN_WS_QUANT)
        return;
    const an_finding_list *L = an_run_findings(r);
    jw_open(w, "hurt_most", '[');
    for (size_t i = 0; i < L->n; i++) {
        const an_finding *h = &L->v[i];
        if (h->id != F_WHATIF_HURT || h->s.col != col || h->v[8] != 0)
            continue;
        jw_open(w, NULL, '{');
        jw_str(w, "layer", an_layer_name(r, h->s.layer));
        jw_str(w, "kind", ampdiag_kind_name(h->s.kind));
        jw_num(w, "overflow_fraction", fv(h, "overflow_share"));
        jw_num(w, "underflow_fraction", fv(h, "underflow_share"));
        jw_close(w, '}');
    }
    jw_close(w, ']');
}
