/*
 * hist.c - exponent histograms (hist.h).
 */
#include "analysis/hist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t errlen, int rc, const char *path, const char *what)
{
    if (rc == AMPDIAG_TRACE_ENOMEM)
        snprintf(err, errlen, "out of memory reading '%s' (%s)", path, what);
    else
        snprintf(err, errlen, "%s", ampdiag_trace_errmsg());
    return rc;
}

#define HIST_BLOCK 4096

double an_hist_fp16_flushed_norm(const uint64_t *hist, int shift)
{
    /* each bin's values weighed by the square of its geometric centre, 2^(e + 1/2); relative
     * to the largest bin so that no power of two overflows */
    int top = -1;
    for (int b = AMPDIAG_HIST_NEXP - 1; b >= 0 && top < 0; b--)
        if (hist[b])
            top = b;
    if (top < 0)
        return 0;
    double all = 0, fl = 0;
    for (int b = 0; b <= top; b++) {
        if (!hist[b])
            continue;
        double w = (double)hist[b] * ldexp(1.0, 2 * (b - top));
        all += w;
        if (b + AMPDIAG_HIST_EMIN + shift <= -26)
            fl += w;
    }
    return all > 0 ? fl / all : 0;
}

void an_hist_fp16_at_scale(const uint64_t *hist, int shift, double *flushed, double *subnormal,
                           uint64_t *nonzero)
{
    uint64_t nz = 0, fl = 0, sub = 0;
    for (int b = 0; b < AMPDIAG_HIST_NEXP; b++) {
        uint64_t c = hist[b];
        if (!c)
            continue;
        int e = b + AMPDIAG_HIST_EMIN + shift; /* magnitudes in [2^e, 2^(e+1)) after scaling */
        nz += c;
        if (e <= -26)
            fl += c; /* at most 2^-25: rounds to zero */
        else if (e <= -15)
            sub += c; /* below 2^-14: an FP16 subnormal */
    }
    if (flushed)
        *flushed = nz ? (double)fl / (double)nz : 0;
    if (subnormal)
        *subnormal = nz ? (double)sub / (double)nz : 0;
    if (nonzero)
        *nonzero = nz;
}

double an_hist_quantile_log2(const uint64_t *hist, double p)
{
    uint64_t tot = 0;
    for (int b = 0; b < AMPDIAG_HIST_NEXP; b++)
        tot += hist[b];
    if (!tot)
        return NAN;
    double want = p * (double)tot;
    uint64_t cum = 0;
    for (int b = 0; b < AMPDIAG_HIST_NEXP; b++) {
        cum += hist[b];
        if ((double)cum >= want && hist[b])
            return (double)(b + AMPDIAG_HIST_EMIN);
    }
    return (double)(AMPDIAG_HIST_EMAX);
}

/* The histograms a request asks for: one layer, kinds[0..nkinds) at steps[0..nsteps). */
struct hist_req {
    int layer;
    const int *kinds;
    size_t nkinds;
    const int64_t *steps;
    size_t nsteps;
    ampdiag_trace_hist *out;
    int *have;
};

/* The rows of b[0..n) a request asks for into it (a later row of a (kind, step) wins). */
static void hists_take(const struct hist_req *q, const ampdiag_trace_hist *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (b[i].layer != q->layer)
            continue;
        for (size_t k = 0; k < q->nkinds; k++)
            if (b[i].kind == q->kinds[k])
                for (size_t j = 0; j < q->nsteps; j++)
                    if (q->steps[j] == b[i].step) {
                        q->out[k * q->nsteps + j] = b[i];
                        q->have[k * q->nsteps + j] = 1;
                    }
    }
}

/* Every row, read in blocks. */
static int hists_scan(ampdiag_trace_reader *rd, size_t nh, const struct hist_req *q)
{
    for (size_t first = 0; first < nh; first += HIST_BLOCK) {
        ampdiag_trace_hist *b = NULL;
        size_t n = 0;
        int rc = ampdiag_trace_read_hists(rd, first, HIST_BLOCK, &b, &n);
        if (rc)
            return rc;
        hists_take(q, b, n);
        free(b);
        if (n == 0)
            break;
    }
    return 0;
}

/* The first row whose step is not below step, in a table in step order: a binary search that
 * reads single rows. */
static int hist_lower_bound(ampdiag_trace_reader *rd, size_t nh, int64_t step, size_t *at)
{
    size_t lo = 0, hi = nh;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2, n = 0;
        ampdiag_trace_hist *h = NULL;
        int rc = ampdiag_trace_read_hists(rd, mid, 1, &h, &n);
        if (rc)
            return rc;
        int64_t s = n ? h->step : INT64_MAX;
        free(h);
        if (s < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    *at = lo;
    return 0;
}

/* The rows of each asked-for step, where a binary search finds them (a writer appends in step
 * order): the rows from the first of the step on, while they hold it. */
static int hists_search(ampdiag_trace_reader *rd, size_t nh, const struct hist_req *q)
{
    enum { RUN = 64 };
    for (size_t j = 0; j < q->nsteps; j++) {
        size_t first;
        int rc = hist_lower_bound(rd, nh, q->steps[j], &first);
        for (int more = 1; !rc && more && first < nh; first += RUN) {
            ampdiag_trace_hist *b = NULL;
            size_t n = 0;
            if ((rc = ampdiag_trace_read_hists(rd, first, RUN, &b, &n)))
                break;
            size_t k = 0;
            while (k < n && b[k].step == q->steps[j])
                k++;
            hists_take(q, b, k);
            more = n > 0 && k == n;
            free(b);
        }
        if (rc)
            return rc;
    }
    return 0;
}

int an_read_hists(const an_run *r, int layer, const int *kinds, size_t nkinds, const int64_t *steps,
                  size_t nsteps, ampdiag_trace_hist *out, int *have, char *err, size_t errlen)
{
    memset(have, 0, nkinds * nsteps * sizeof *have);
    ampdiag_trace_reader *rd = NULL;
    int rc = ampdiag_trace_open(r->path, AMPDIAG_TRACE_READ_QUIET, &rd);
    if (rc)
        return fail(err, errlen, rc, r->path, "open");
    ampdiag_trace_counts cnt;
    ampdiag_trace_get_counts(rd, &cnt);
    struct hist_req q = {layer, kinds, nkinds, steps, nsteps, out, have};
    rc = hists_search(rd, cnt.hists, &q);
    size_t found = 0;
    for (size_t i = 0; i < nkinds * nsteps; i++)
        found += (size_t)have[i];
    /* a table out of step order, or a (kind, step) without a row: read every row */
    if (!rc && found < nkinds * nsteps) {
        memset(have, 0, nkinds * nsteps * sizeof *have);
        rc = hists_scan(rd, cnt.hists, &q);
    }
    if (rc)
        fail(err, errlen, rc, r->path, "histograms");
    ampdiag_trace_reader_close(rd);
    return rc;
}

