/*
 * fp8.c - the FP8 findings in text and JSON (fp8.h).
 */
#include "report/fp8.h"
#include "analysis/fp8.h"
#include "util/escape.h"

static const char *const reason_name[] = {
    [AN_FP8_RANGE] = "range", [AN_FP8_ABOVE] = "above", [AN_FP8_BELOW] = "below",
    [AN_FP8_AMAX] = "amax_growth", [AN_FP8_HISTORY] = "history", [AN_FP8_MARGIN] = "margin",
};

static const char *layer_name(const an_run *r, int layer)
{
    return layer >= 0 && (size_t)layer < r->nlayers ? r->layers[layer].name : "?";
}

void report_text_fp8(FILE *f, const an_run *r, const an_fp8_findings *x, const char *indent)
{
    if (!x->delayed)
        return;
    char hist[64] = "";
    if (x->history >= 0)
        snprintf(hist, sizeof hist, ", amax history %d, margin %d", x->history, x->margin);
    fprintf(f, "%sfp8 recipe (Transformer Engine delayed scaling%s; e4m3 activations and weights, e5m2 "
               "gradients) would hurt:%s\n", indent, hist, x->nhurt ? "" : " nothing (under 0.1% of any tensor)");
    for (int i = 0; i < x->nhurt; i++) {
        char tl[160], why[320];
        an_fp8_why(&x->hurt[i], why, sizeof why);
        fprintf(f, "%s  %s %s: %s\n", indent, str_escape_ctl(tl, sizeof tl, layer_name(r, x->hurt[i].layer)),
                ampdiag_kind_name(x->hurt[i].kind), why);
    }
    if (x->nhurt_all > (size_t)x->nhurt)
        fprintf(f, "%s  (and %zu more tensors)\n", indent, x->nhurt_all - (size_t)x->nhurt);
}

static void json_hurt(jw *w, const an_run *r, const an_fp8_hurt *h)
{
    char why[320];
    an_fp8_why(h, why, sizeof why);
    jw_open(w, NULL, '{');
    jw_str(w, "layer", layer_name(r, h->layer));
    jw_str(w, "kind", ampdiag_kind_name(h->kind));
    jw_str(w, "format", ampdiag_format_get((ampdiag_format)h->format)->name);
    jw_str(w, "scaling", ampdiag_scaling_name(h->scaling));
    jw_u64(w, "values", h->values);
    jw_u64(w, "overflow", h->overflow);
    jw_num(w, "overflow_fraction", h->overflow_fraction);
    jw_u64(w, "underflow", h->underflow);
    jw_num(w, "underflow_fraction", h->underflow_fraction);
    jw_num(w, "absmin_nz", h->absmin_nz);
    jw_num(w, "absmax", h->absmax);
    jw_str(w, "reason", reason_name[h->reason]);
    jw_str(w, "why", why);
    jw_close(w, '}');
}

void report_json_fp8(jw *w, const an_run *r, const an_fp8_findings *x)
{
    if (!x->delayed) {
        jw_null(w, "fp8");
        return;
    }
    jw_open(w, "fp8", '{');
    jw_open(w, "recipe", '{');
    jw_str(w, "scaling", "delayed");
    jw_opt_int(w, "amax_history", x->history);
    jw_int(w, "margin", x->margin);
    jw_str(w, "amax_compute_algo", "max");
    jw_open(w, "formats", '{');
    for (int k = 0; k < AMPDIAG_NKINDS; k++)
        if (k != AMPDIAG_KIND_UPDATE)
            jw_str(w, ampdiag_kind_name(k), ampdiag_format_get(an_fp8_recipe_format(k))->name);
    jw_close(w, '}');
    jw_close(w, '}');
    jw_u64(w, "hurt_count", x->nhurt_all);
    jw_open(w, "hurt", '[');
    for (int i = 0; i < x->nhurt; i++)
        json_hurt(w, r, &x->hurt[i]);
    jw_close(w, ']');
    jw_close(w, '}');
}
