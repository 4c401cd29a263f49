/*
 * plot_hist.c - exponent histograms of a layer's gradients at a few steps (plot_internal.h):
 * per run, the histograms' layers; the exponents FP16 and BF16 represent shaded, and in the
 * legend only where the chart's exponent range shows them; for a loss-scaled run as held and
 * unscaled.
 */
#include "plot/plot_internal.h"
#include "analysis/hist.h"
#include "util/escape.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int hist_kind[2] = {AMPDIAG_KIND_ACTIVATION_GRAD, AMPDIAG_KIND_WEIGHT_GRAD};

/* The histogram steps to draw: the nearest recorded one to each asked for, or up to 4 spread
 * over the run. */
static size_t pick_hist_steps(const struct ctx *c, const struct run *r, int64_t *out)
{
    size_t n = 0;
    if (!r->nhsteps)
        return 0;
    if (c->opt->hist_steps && c->opt->nhist_steps) {
        for (size_t i = 0; i < c->opt->nhist_steps && n < MAX_HIST_STEPS; i++) {
            int64_t want = c->opt->hist_steps[i];
            size_t best = 0;
            for (size_t k = 1; k < r->nhsteps; k++)
                if (llabs(r->hsteps[k] - want) < llabs(r->hsteps[best] - want))
                    best = k;
            int dup = 0;
            for (size_t j = 0; j < n; j++)
                if (out[j] == r->hsteps[best])
                    dup = 1;
            if (!dup)
                out[n++] = r->hsteps[best];
        }
        /* ascending */
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && out[j - 1] > out[j]; j--) {
                int64_t t = out[j];
                out[j] = out[j - 1];
                out[j - 1] = t;
            }
        return n;
    }
    size_t want = r->nhsteps < 4 ? r->nhsteps : 4;
    for (size_t i = 0; i < want; i++) {
        size_t k = want > 1 ? (size_t)llround((double)i * (double)(r->nhsteps - 1) /
                                              (double)(want - 1)) : 0;
        if (!n || out[n - 1] != r->hsteps[k])
            out[n++] = r->hsteps[k];
    }
    return n;
}


struct hists {
    int layer;                          /* in the run */
    int64_t steps[MAX_HIST_STEPS];
    size_t ns;
    ampdiag_trace_hist h[2][MAX_HIST_STEPS];
    int have[2][MAX_HIST_STEPS];
    int panels[2];
    size_t np;
    double shift[MAX_HIST_STEPS];       /* log2 of each step's loss scale (0: unscaled) */
    int any_scaled, same_shift;
    double xlo, xhi, ymin;
    char stt[2 * MAX_HIST_STEPS][128];  /* the steps' legend titles */
};

/* The histograms of the layer's gradients at the chosen steps. 0, CHART_SKIPPED or an error. */
static int hist_read(struct ctx *c, const struct run *r, struct hists *H)
{
    ampdiag_trace_hist got[2 * MAX_HIST_STEPS];
    int gh[2 * MAX_HIST_STEPS];
    char err[512] = "";
    int rc = an_read_hists(r->a, H->layer, hist_kind, 2, H->steps, H->ns, got, gh, err, sizeof err);
    if (rc)
        return plot_fail(c, rc == AMPDIAG_TRACE_ENOMEM ? PLOT_ENOMEM : ampdiag_trace_err_is_io(rc) ? PLOT_EIO
                         : PLOT_EINPUT, "%s", err);
    for (int p = 0; p < 2; p++)
        for (size_t k = 0; k < H->ns; k++)
            if (gh[(size_t)p * H->ns + k]) {
                H->h[p][k] = got[(size_t)p * H->ns + k];
                H->have[p][k] = 1;
            }
    for (int p = 0; p < 2; p++)
        for (size_t k = 0; k < H->ns; k++)
            if (H->have[p][k]) {
                H->panels[H->np++] = p;
                break;
            }
    H->same_shift = 1;
    for (size_t k = 0; k < H->ns; k++) {
        const an_step *st = find_step(r, H->steps[k]);
        double sc = st ? st->loss_scale : 1;
        H->shift[k] = r->scaled && isfinite(sc) && sc > 0 && sc != 1 ? log2(sc) : 0;
        H->any_scaled |= H->shift[k] != 0;
        H->same_shift &= H->shift[k] == H->shift[0];
    }
    return H->np ? 0 : CHART_SKIPPED;
}

/* One block "x fraction" of a histogram, as held (sh 0) or unscaled (1): every bin from one
 * below the first non-empty one to one above the last, empty ones as 0. */
static void hist_block(FILE *f, struct hists *H, const ampdiag_trace_hist *hh, int have, uint64_t total,
                       double shift, int sh)
{
    size_t rows = 0;
    int b0 = AMPDIAG_HIST_NEXP, b1 = -1;
    for (int b = 0; b < AMPDIAG_HIST_NEXP; b++)
        if (hh->bin[b]) {
            b0 = b < b0 ? b : b0;
            b1 = b;
        }
    if (have && total && b1 >= 0 && (sh == 0 || shift != 0))
        for (int b = b0 - 1; b <= b1 + 1; b++) {
            double x = (double)(b + AMPDIAG_HIST_EMIN) + 0.5 - (sh ? shift : 0);
            double fr = b >= 0 && b < AMPDIAG_HIST_NEXP ? (double)hh->bin[b] / (double)total : 0;
            fprintf(f, "%.6g %.9g\n", x, fr);
            if (fr > 0) {
                H->xlo = fmin(H->xlo, x - 2.5);
                H->xhi = fmax(H->xhi, x + 2.5);
                H->ymin = fmin(H->ymin, fr);
            }
            rows++;
        }
    if (!rows)
        fputs("NaN NaN\n", f);
    fputs("\n\n", f);
}

static int hist_data(struct ctx *c, const struct run *r, int u, struct hists *H, const char *dname)
{
    struct out d = {0};
    int rc = out_open(c, &d, dname, "w");
    if (rc)
        return rc;
    fprintf_text(d.f, "# log2 exponent histograms of %s in %s (%s): index ((panel - 1) * nsteps + "
                      "step_number - 1) * 2 + {0: as held, 1: unscaled}; columns: x = e + 0.5 (bin "
                      "centre, |x| in [2^e, 2^(e+1))), fraction of the tensor's values (0: empty bin)\n",
                 c->lname[u], r->label, r->path);
    H->xlo = -26, H->xhi = 17, H->ymin = 1;
    for (size_t pi = 0; pi < H->np; pi++) {
        int p = H->panels[pi];
        for (size_t k = 0; k < H->ns; k++) {
            const ampdiag_trace_hist *hh = &H->h[p][k];
            uint64_t total = 0;
            for (int b = 0; b < AMPDIAG_HIST_BINS; b++)
                total += hh->bin[b];
            for (int sh = 0; sh < 2; sh++) {
                fprintf(d.f, "# %s, step %" PRId64 ", %s\n", kind_name(hist_kind[p]), H->steps[k],
                        sh ? "unscaled (divided by the loss scale)" : "as held");
                hist_block(d.f, H, hh, H->have[p][k], total, H->shift[k], sh);
            }
            double zero = total ? (double)hh->bin[AMPDIAG_HIST_ZERO] / (double)total : 0;
            uint64_t nf = hh->bin[AMPDIAG_HIST_POSINF] + hh->bin[AMPDIAG_HIST_NEGINF] + hh->bin[AMPDIAG_HIST_NAN];
            char *t = H->stt[pi * MAX_HIST_STEPS + k];
            if (!H->have[p][k])
                snprintf(t, sizeof H->stt[0], "step %" PRId64 ": not recorded", H->steps[k]);
            else
                snprintf(t, sizeof H->stt[0], "step %" PRId64 " (zeros %.2g%%, inf/NaN %.2g%%)", H->steps[k],
                         100 * zero, total ? 100 * (double)nf / (double)total : 0);
        }
    }
    return out_close(c, &d);
}

/* The exponent windows the chart's x range shows (FP16 normal, subnormal, BF16 normal,
 * subnormal): drawn, and in the legend, only those. */
static void hist_windows(FILE *f, double xmin, double xmax)
{
    const ampdiag_format_info *h = ampdiag_format_get(AMPDIAG_FP16), *b = ampdiag_format_get(AMPDIAG_BF16);
    double w[4][2] = {{log2(h->min_normal), log2(h->max_finite) + 1}, {log2(h->min_subnormal), log2(h->min_normal)},
                      {log2(b->min_normal), log2(b->max_finite) + 1}, {log2(b->min_subnormal), log2(b->min_normal)}};
    double shown[4];
    for (int i = 0; i < 4; i++)
        shown[i] = fmax(w[i][0], xmin) < fmin(w[i][1], xmax);
    fprintf(f, "fp16_emin = %g\nfp16_emax = %g\nfp16_esub = %g\nbf16_emin = %g\nbf16_emax = %g\nbf16_esub = %g\n",
            w[0][0], floor(w[0][1]) - 1, w[1][0], w[2][0], floor(w[2][1]) - 1, w[3][0]);
    gp_array_num(f, "window_shown", shown, 4);
}

static void hist_words(const struct ctx *c, const struct run *r, int u, const struct hists *H, chart *ch)
{
    snprintf(ch->what, sizeof ch->what, "Exponent histograms of %s's gradients", c->lname[u]);
    if (H->any_scaled && H->same_shift)
        snprintf(ch->subtitle, sizeof ch->subtitle, "solid: as held in the run (times the loss scale, %.6g = "
                 "2^%g), dashed: unscaled; shaded: what FP16 and BF16 represent", exp2(H->shift[0]), H->shift[0]);
    else if (H->any_scaled)
        snprintf(ch->subtitle, sizeof ch->subtitle, "solid: as held in the run (times the loss scale of that "
                 "step), dashed: unscaled; shaded: what FP16 and BF16 represent");
    else
        snprintf(ch->subtitle, sizeof ch->subtitle, "shaded: the exponents FP16 and BF16 represent (normal and "
                 "subnormal)");
    snprintf(ch->desc, sizeof ch->desc, "log2 exponent histograms of layer %s's gradients in %s at %zu steps, "
             "FP16/BF16 windows shaded%s", c->lname[u], r->label, H->ns,
             H->any_scaled ? ", as held (loss-scaled) and unscaled" : "");
}

int chart_hist(struct ctx *c, chart *ch)
{
    const struct run *r = &c->runs[ch->run];
    int u = ch->sub;
    struct hists *H = calloc(1, sizeof *H);
    if (!H)
        return plot_fail(c, PLOT_ENOMEM, "out of memory");
    H->layer = -1;
    for (size_t i = 0; i < r->nlayers; i++)
        if (r->lmap[i] == u)
            H->layer = (int)i;
    H->ns = H->layer >= 0 ? pick_hist_steps(c, r, H->steps) : 0;
    int rc = H->ns ? hist_read(c, r, H) : CHART_SKIPPED;
    char dname[260];
    snprintf(ch->name, sizeof ch->name, "exponent-histogram-%s-", r->tag);
    layer_file_part(c, u, ch->name + strlen(ch->name), sizeof ch->name - strlen(ch->name));
    snprintf(dname, sizeof dname, "%s.dat", ch->name);
    if (!rc)
        rc = hist_data(c, r, u, H, dname);
    if (!rc && vec_push(&ch->runs, ch->run))
        rc = plot_fail(c, PLOT_ENOMEM, "out of memory");
    if (!rc) {
        hist_words(c, r, u, H, ch);
        FILE *f = ch->vars;
        const char *ptitle[2], *stitle[2 * MAX_HIST_STEPS];
        size_t nt = 0;
        for (size_t pi = 0; pi < H->np; pi++) {
            ptitle[pi] = H->panels[pi] == 0 ? "activation gradients" : "weight gradients";
            for (size_t k = 0; k < H->ns; k++)
                stitle[nt++] = H->stt[pi * MAX_HIST_STEPS + k];
        }
        gp_var_str(f, "datafile", dname, 0);
        fprintf(f, "npanels = %zu\nnsteps = %zu\nscaled = %d\n", H->np, H->ns, H->any_scaled);
        gp_array_str(f, "panel_title", ptitle, H->np, 1);
        gp_array_str(f, "step_title", stitle, nt, 1);
        gp_array_num(f, "step_shift", H->shift, H->ns);
        gp_var_num(f, "xmin", floor(H->xlo));
        gp_var_num(f, "xmax", ceil(H->xhi));
        gp_var_num(f, "ymin", pow(10, floor(log10(H->ymin)) - 0.3));
        gp_var_num(f, "ymax", 2.0);
        hist_windows(f, floor(H->xlo), ceil(H->xhi));
    }
    free(H);
    return rc;
}
