/*
 * t_tstats.c - the fused statistics kernel against the slow reference (tstats_ref.c), field by
 * field, on random, adversarial and edge inputs; merging; both SIMD paths.
 */
#include "ampdiag.h"
#include "tap.h"
#include "tstats_ref.h"

#include <float.h>
#include <math.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd32(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static double rnd_unit(void) { return (rnd32() + 0.5) / 4294967296.0; }
static float rnd_normal(void) { return (float)(sqrt(-2 * log(rnd_unit())) * cos(6.283185307179586 * rnd_unit())); }
static float fbits(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
static uint32_t fbits_of(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }

static int fsame(float a, float b) { return same_bits(a, b) || (a == 0 && b == 0 && signbit(a) == signbit(b)); }

/* The sums of the record are exact to within AMPDIAG_TSTATS_SUM_RTOL of the sum of the
 * magnitudes (squares) plus the double accumulation's count x 2^-53 (ampdiag.h); two records
 * each within it differ by at most twice that. The bounds for x[0..n) into *tol_sum, *tol_sq. */
static void sum_bounds(const float *x, size_t n, double *tol_sum, double *tol_sq)
{
    double sabs = 0, ssq = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i])) {
            sabs += fabs((double)x[i]);
            ssq += (double)x[i] * (double)x[i];
        }
    double r = 2 * AMPDIAG_TSTATS_SUM_RTOL + 4 * (double)n * 0x1p-53;
    *tol_sum = r * sabs + 1e-300;
    *tol_sq = r * ssq + 1e-300;
}

/* Compare every field; returns the name of the first field that differs, or NULL. x[0..n) are
 * the values (their sums within the documented bound, sum_bounds); x NULL: the sums must be
 * equal bit for bit. */
static const char *diff_stats(const ampdiag_tstats *a, const ampdiag_tstats *b, const float *x, size_t n)
{
#define CNT(f) if (a->f != b->f) return #f
    CNT(count); CNT(n_nan); CNT(n_posinf); CNT(n_neginf); CNT(n_zero); CNT(n_neg); CNT(n_pos);
#undef CNT
    static const char *const cls[AMPDIAG_WHATIF_NCLASSES] = {"overflow", "underflow", "subnormal"};
    static char name[48];
    for (int f = 0; f < AMPDIAG_NFORMATS; f++)
        for (int j = 0; j < AMPDIAG_WHATIF_NCLASSES; j++)
            if (a->whatif[f][j] != b->whatif[f][j]) {
                snprintf(name, sizeof name, "%s_%s (%llu vs %llu)", ampdiag_format_get((ampdiag_format)f)->name, cls[j],
                         (unsigned long long)a->whatif[f][j], (unsigned long long)b->whatif[f][j]);
                return name;
            }
    if (!fsame(a->min, b->min)) return "min";
    if (!fsame(a->max, b->max)) return "max";
    if (!fsame(a->absmax, b->absmax)) return "absmax";
    if (!fsame(a->absmin_nz, b->absmin_nz)) return "absmin_nz";
    if (!x) {
        if (memcmp(&a->sum, &b->sum, sizeof a->sum) != 0) return "sum (bits)";
        if (memcmp(&a->sumsq, &b->sumsq, sizeof a->sumsq) != 0) return "sumsq (bits)";
        return NULL;
    }
    double ts, tq;
    sum_bounds(x, n, &ts, &tq);
    static char sname[96];
    if (!(fabs(a->sum - b->sum) <= ts) && !(isinf(a->sum) && a->sum == b->sum)) {
        snprintf(sname, sizeof sname, "sum (%.17g vs %.17g, bound %.3g)", a->sum, b->sum, ts);
        return sname;
    }
    if (!(fabs(a->sumsq - b->sumsq) <= tq) && !(isinf(a->sumsq) && a->sumsq == b->sumsq)) {
        snprintf(sname, sizeof sname, "sumsq (%.17g vs %.17g, bound %.3g)", a->sumsq, b->sumsq, tq);
        return sname;
    }
    return NULL;
}

static const char *diff_hist(const ampdiag_hist *a, const ampdiag_hist *b)
{
    static char buf[64];
    for (int i = 0; i < AMPDIAG_HIST_BINS; i++)
        if (a->bin[i] != b->bin[i]) {
            snprintf(buf, sizeof buf, "bin %d: %llu vs %llu", i, (unsigned long long)a->bin[i],
                     (unsigned long long)b->bin[i]);
            return buf;
        }
    return NULL;
}

/* Kernel vs reference on x[0..n), with and without the histogram, both kernels. */
static void check_case(const char *what, const float *x, size_t n)
{
    ampdiag_tstats ref, got, got2;
    ampdiag_hist href, hgot;
    tstats_ref(x, n, &ref, &href);
    ampdiag_tstats_compute(x, n, &got, &hgot);
    ampdiag_tstats_compute(x, n, &got2, NULL);
    const char *d = diff_stats(&got, &ref, x, n);
    const char *dh = diff_hist(&hgot, &href);
    const char *d2 = diff_stats(&got2, &got, NULL, 0);
    if (d) diag("%s: field %s differs", what, d);
    if (dh) diag("%s: histogram %s", what, dh);
    ok(!d && !dh && !d2, "%s (n=%zu): every field and histogram bin equals the reference", what, n);
}

static float *alloc_f(size_t n) { float *p = malloc((n ? n : 1) * sizeof *p); if (!p) abort(); return p; }

static void test_cases(void)
{
    size_t n = 100003;
    float *x = alloc_f(n);
    for (size_t i = 0; i < n; i++) x[i] = rnd_normal();
    check_case("normal(0,1)", x, n);

    for (size_t i = 0; i < n; i++) x[i] = rnd_normal() * ldexpf(1.0f, (int)(rnd32() % 80) - 50);
    check_case("normal scaled by 2^-50..2^29 (all FP16 classes)", x, n);

    for (size_t i = 0; i < n; i++) x[i] = fbits(rnd32());
    check_case("random bit patterns (NaN, inf, subnormal, huge)", x, n);

    for (size_t i = 0; i < n; i++) x[i] = NAN;
    check_case("all NaN", x, n);

    for (size_t i = 0; i < n; i++) x[i] = (i & 1) ? INFINITY : -INFINITY;
    check_case("all +-inf", x, n);

    for (size_t i = 0; i < n; i++) x[i] = fbits((rnd32() & 0x807fffffu) | 1u);
    check_case("all float32 subnormal", x, n);

    for (size_t i = 0; i < n; i++) x[i] = (i % 3 == 0) ? -0.0f : 0.0f;
    check_case("all zeros (+0 and -0)", x, n);

    for (size_t i = 0; i < n; i++) x[i] = (i & 1 ? -1 : 1) * FLT_MAX * (float)(0.5 + 0.5 * rnd_unit());
    check_case("huge values near FLT_MAX (float sums would overflow)", x, n);

    /* every class threshold of every row of the format table (docs/numerics.md), its
     * neighbours, both signs: once all together, once in blocks of their own (each threshold
     * inside an otherwise clean block of 4096 ones) */
    size_t m = 0;
    for (int f = 0; f < AMPDIAG_NFORMATS; f++) {
        const ampdiag_format_info *fi = ampdiag_format_get((ampdiag_format)f);
        const float at[3] = {fi->overflow_at, fi->normal_at, fi->underflow_at};
        for (int j = 0; j < 3; j++)
            for (int d = -3; d <= 3; d++) {
                x[m++] = fbits(tap_fbits(at[j]) + (uint32_t)d);
                x[m++] = -fbits(tap_fbits(at[j]) + (uint32_t)d);
            }
    }
    check_case("values at and around every threshold of every format", x, m);
    size_t nedge = m;
    int ebad = 0;
    for (size_t e = 0; e < nedge; e++) {
        float *blk = x + nedge;
        for (size_t i = 0; i < 4096 * 2; i++) blk[i] = (i & 1) ? -1.0f : 1.0f;
        blk[rnd32() % 4096] = x[e];
        blk[4096 + rnd32() % 4096] = x[e] * 0.75f;
        ampdiag_tstats a, b;
        ampdiag_hist ha, hb;
        tstats_ref(blk, 4096 * 2, &a, &ha);
        ampdiag_tstats_compute(blk, 4096 * 2, &b, &hb);
        const char *d = diff_stats(&b, &a, blk, 4096 * 2), *dh = diff_hist(&hb, &ha);
        if (d || dh) {
            ebad++;
            diag("threshold neighbour 0x%08x alone in a block: %s", tap_fbits(x[e]), d ? d : dh);
        }
    }
    ok(ebad == 0, "each of %zu threshold neighbours alone in a block of ones: every field equals the reference (%d bad)",
       nedge, ebad);

    /* blocks of 4096 values: clean ones (counted from the histogram) next to blocks that hold
     * one special value each (redone by the full kernel), then a tail */
    static const uint32_t specials[] = {0x7fc00000u, 0xff800000u, 0x00000001u, 0x807fffffu, 0x7f7f8000u,
                                        0xff7fffffu, 0x7f800000u, 0x00400000u};
    size_t nspec = sizeof specials / sizeof specials[0];
    for (size_t k = 0; k < nspec; k++) {
        size_t len = 4096 * 6 + 13;
        for (size_t i = 0; i < len; i++) {
            float v = rnd_normal() * ldexpf(1.0f, (int)(rnd32() % 40) - 30);
            x[i] = (i % 97 == 0) ? 0.0f : (i % 89 == 0) ? -0.0f : v;
        }
        x[4096 * (k % 6) + rnd32() % 4096] = fbits(specials[k]);
        char what[96];
        snprintf(what, sizeof what, "clean blocks and one block holding 0x%08x", specials[k]);
        check_case(what, x, len);
    }
    for (size_t i = 0; i < 4096 * 3; i++) x[i] = 1.0f;
    x[5000] = 65520.0f; x[5001] = -65504.0f; x[9000] = 0x1p-25f; x[9001] = -0x1.ffcp-15f;
    check_case("FP16 thresholds inside clean blocks", x, 4096 * 3);
    for (size_t i = 0; i < 4096 * 4; i++) x[i] = 1.0f;
    x[100] = 448.0f; x[101] = -464.0f; x[102] = fbits(0x43e80001u); x[103] = -500.0f;  /* E4M3 top */
    x[4200] = 0x1p-10f; x[4201] = -fbits(0x3a800001u); x[4202] = 0x1.ep-7f; x[4203] = -fbits(0x3c6fffffu);
    x[8300] = 0x1p-17f; x[8301] = -fbits(0x37000001u); x[8302] = 0x1.cp-15f; x[8303] = fbits(0x385fffffu);
    x[12400] = 57344.0f; x[12401] = -61439.996f; x[12402] = 61440.0f; /* E5M2 overflow: not a clean block */
    check_case("FP8 thresholds inside clean blocks", x, 4096 * 4);

    /* clean blocks (no NaN/inf, no float32 subnormal, below 61440, the clean kernel's limit) of
     * many lengths: the histogram's bit-sliced passes, their padding to 16 vectors and the tails; exponent
     * windows of 6, 40 and 140 binades (the widest exceeds the 64 counted by the passes, so
     * the values below are counted one by one) */
    static const size_t lens[] = {8, 16, 24, 32, 40, 56, 480, 512, 520, 1000, 4088, 4095, 4096, 4104, 8191, 12345};
    static const int spans[] = {6, 40, 140};
    int cbad = 0, ncase = 0;
    for (size_t si = 0; si < sizeof spans / sizeof spans[0]; si++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            size_t len = lens[li];
            for (size_t i = 0; i < len; i++) {
                /* |x| in [2^(15 - span), 2^16) or 0: every field from 142 down */
                float v = ldexpf(1.0f + (float)rnd_unit(), 15 - (int)(rnd32() % (uint32_t)spans[si]));
                if (v >= 61440.0f) v = 61439.996f; /* the largest float32 below 61440 */
                x[i] = (rnd32() % 61 == 0) ? 0.0f : (rnd32() & 1) ? -v : v;
            }
            ampdiag_tstats a, b;
            ampdiag_hist ha, hb;
            tstats_ref(x, len, &a, &ha);
            ampdiag_tstats_compute(x, len, &b, &hb);
            const char *d = diff_stats(&b, &a, x, len), *dh = diff_hist(&hb, &ha);
            if (d || dh) {
                cbad++;
                diag("clean data, %d binades, n=%zu: %s", spans[si], len, d ? d : dh);
            }
            ncase++;
        }
    ok(cbad == 0, "clean data in %d lengths and exponent windows: every field and bin equals the reference (%d bad)", ncase, cbad);

    /* the extremes of one-signed blocks: min and max from the bit-pattern extremes (-0 below +0) */
    static const struct { const char *what; float zero; int sign; } onesided[] = {
        {"negative values and +0", 0.0f, -1}, {"negative values and -0", -0.0f, -1},
        {"negative values only", 1.0f, -1}, {"positive values and -0", -0.0f, 1},
        {"positive values and +0", 0.0f, 1}, {"positive values only", 1.0f, 1},
    };
    for (size_t k = 0; k < sizeof onesided / sizeof onesided[0]; k++) {
        for (size_t i = 0; i < 4096 + 64; i++) {
            float v = (float)onesided[k].sign * ldexpf(1.0f + (float)rnd_unit(), (int)(rnd32() % 20) - 10);
            x[i] = (onesided[k].zero != 1.0f && i % 37 == 5) ? onesided[k].zero : v;
        }
        check_case(onesided[k].what, x, 4096 + 64);
    }

    check_case("empty tensor", x, 0);
    x[0] = -3.5f;
    check_case("one value", x, 1);

    int bad = 0;
    for (size_t len = 1; len <= 70; len++) {
        for (size_t i = 0; i < len; i++) x[i] = (rnd32() % 7 == 0) ? NAN : rnd_normal();
        ampdiag_tstats a, b;
        ampdiag_hist ha, hb;
        tstats_ref(x, len, &a, &ha);
        ampdiag_tstats_compute(x, len, &b, &hb);
        if (diff_stats(&b, &a, x, len) || diff_hist(&hb, &ha)) bad++;
    }
    ok(bad == 0, "lengths 1..70 (lane tails, mixed NaN): %d mismatches", bad);

    /* 32-bit per-block counters must not wrap: > 2^32 is too big to test here, but a block
     * boundary and many blocks are covered by n = 100003; check counts of one class over
     * 5 million values */
    free(x);
    n = 5000000;
    x = alloc_f(n);
    for (size_t i = 0; i < n; i++) x[i] = 1e-30f;
    ampdiag_tstats s;
    ampdiag_tstats_compute(x, n, &s, NULL);
    ok(s.fp16_underflow == n && s.bf16_underflow == 0 && s.n_pos == n, "5M values of 1e-30: all FP16 underflow, none in BF16");
    ok(s.e4m3_underflow == n && s.e5m2_underflow == n && s.whatif[AMPDIAG_E4M3][AMPDIAG_WHATIF_UNDERFLOW] == n,
       "5M values of 1e-30: all E4M3 and E5M2 underflow (the named fields alias whatif[][])");
    free(x);
}

static void test_accuracy(void)
{
    /* 2^25 copies of 0.1f: a float accumulator stops growing at 2^24 * 0.1 * 2^-24 per add;
     * the record must keep the mean within the documented bound (AMPDIAG_TSTATS_SUM_RTOL plus
     * the double accumulation's rounding), whatever the count. */
    size_t n = (size_t)1 << 25;
    float *x = alloc_f(n);
    for (size_t i = 0; i < n; i++) x[i] = 0.1f;
    ampdiag_tstats s;
    ampdiag_tstats_compute(x, n, &s, NULL);
    double r = AMPDIAG_TSTATS_SUM_RTOL + (double)n * 0x1p-53;
    ok_close(ampdiag_tstats_mean(&s), (double)0.1f, r, 0, "mean of 2^25 x 0.1f within %.3g of it", r);
    ok_close(ampdiag_tstats_rms(&s), (double)0.1f, r, 0, "rms of 2^25 x 0.1f within %.3g of it", r);
    /* large offset + small variation: mean must keep the small part (relative to 1000) */
    for (size_t i = 0; i < n; i++) x[i] = (i & 1) ? 1000.0f + 0.5f : 1000.0f - 0.5f;
    ampdiag_tstats_compute(x, n, &s, NULL);
    ok_close(ampdiag_tstats_mean(&s), 1000.0, r, 0, "mean of 1000 +- 0.5 over 2^25 values within %.3g", r);
    /* the bound is tight enough to mean something: float sums of 16 values a lane are off by
     * less than 2^-20; one float accumulator over all 2^25 values stalls at 2^21 (off by 37%) */
    for (size_t i = 0; i < n; i++) x[i] = 0.1f;
    float acc = 0;
    for (size_t i = 0; i < n; i++) acc += x[i];
    ok(fabs((double)acc / (double)n - (double)0.1f) > 1000 * r * 0.1, "a single float accumulator misses the bound by far (mean %.4g)",
       (double)acc / (double)n);
    free(x);
}

static void test_merge(void)
{
    size_t n = 50021;
    float *x = alloc_f(n);
    for (size_t i = 0; i < n; i++) x[i] = (rnd32() % 50 == 0) ? fbits(rnd32()) : rnd_normal() * 1e-4f;
    ampdiag_tstats whole, a, b;
    ampdiag_hist hw, ha, hb;
    ampdiag_tstats_compute(x, n, &whole, &hw);
    int bad = 0;
    for (int t = 0; t < 20; t++) {
        size_t cut = rnd32() % (n + 1);
        ampdiag_tstats_compute(x, cut, &a, &ha);
        ampdiag_tstats_compute(x + cut, n - cut, &b, &hb);
        ampdiag_tstats_merge(&a, &b);
        ampdiag_hist_merge(&ha, &hb);
        if (diff_stats(&a, &whole, x, n) || diff_hist(&ha, &hw)) bad++;
    }
    ok(bad == 0, "two halves merged give the whole, at 20 random cut points (%d bad)", bad);
    ampdiag_tstats e;
    ampdiag_tstats_init(&e);
    ampdiag_tstats_merge(&e, &whole);
    ok(!diff_stats(&e, &whole, NULL, 0), "the empty record is the identity of merging");
    ampdiag_tstats_init(&a);
    ampdiag_tstats_accumulate(&a, NULL, x, 1000);
    ampdiag_tstats_accumulate(&a, NULL, x + 1000, n - 1000);
    ok(!diff_stats(&a, &whole, x, n), "accumulate in two calls equals one call (sums within the bound)");
    free(x);
}

static void test_accessors(void)
{
    float v[3] = {NAN, INFINITY, -INFINITY};
    ampdiag_tstats s;
    ampdiag_tstats_compute(v, 3, &s, NULL);
    ok(ampdiag_tstats_finite(&s) == 0 && isnan(ampdiag_tstats_mean(&s)) && isnan(ampdiag_tstats_rms(&s)),
       "no finite values: mean and rms are NaN");
    ok(s.min == INFINITY && s.max == -INFINITY && s.absmin_nz == INFINITY, "no finite values: min/max keep their identities");
    float w[4] = {3, -4, 0, NAN};
    ampdiag_tstats_compute(w, 4, &s, NULL);
    ok(ampdiag_tstats_finite(&s) == 3 && ampdiag_tstats_mean(&s) == -1.0 / 3 &&
       fabs(ampdiag_tstats_rms(&s) - sqrt(25.0 / 3)) < 1e-15, "mean -1/3 and rms sqrt(25/3) of {3,-4,0,NaN}");
    ok(ampdiag_hist_bin_of(1.0f) == AMPDIAG_HIST_BIN(0) && ampdiag_hist_bin_of(-0.75f) == AMPDIAG_HIST_BIN(-1) &&
       ampdiag_hist_bin_of(0x1p-149f) == 0 && ampdiag_hist_bin_of(FLT_MAX) == AMPDIAG_HIST_NEXP - 1 &&
       ampdiag_hist_bin_of(65504.0f) == AMPDIAG_HIST_BIN(15) && ampdiag_hist_bin_of(0x1.8p-140f) == AMPDIAG_HIST_BIN(-140) &&
       ampdiag_hist_bin_of(-0.0f) == AMPDIAG_HIST_ZERO && ampdiag_hist_bin_of(-INFINITY) == AMPDIAG_HIST_NEGINF &&
       ampdiag_hist_bin_of(NAN) == AMPDIAG_HIST_NAN, "histogram bins of known values");
}

/* Scaled what-if counts against casting fl(x * scale) value by value. */
static void test_scaled(void)
{
    size_t n = 60001;
    float *x = alloc_f(n);
    for (size_t i = 0; i < n; i++)
        x[i] = (i % 7 == 0) ? fbits(rnd32()) : (i % 11 == 0) ? 0.0f : rnd_normal() * ldexpf(1.0f, (int)(rnd32() % 60) - 40);
    const float scales[] = {1.0f, 128.0f, 448.0f / 3.0f, 57344.0f / 5.5f, 0x1p-20f, 3.0e30f, 1e-30f};
    int bad = 0, ncase = 0;
    for (int f = 0; f < AMPDIAG_NFORMATS; f++)
        for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) {
            uint64_t got[3], want[3] = {0, 0, 0};
            for (size_t i = 0; i < n; i++) {
                if (!isfinite(x[i]))
                    continue;
                float y = x[i] * scales[k];
                ampdiag_class c = ampdiag_classify((ampdiag_format)f, y);
                want[AMPDIAG_WHATIF_OVERFLOW] += c == AMPDIAG_CLASS_OVERFLOW || c == AMPDIAG_CLASS_INF;
                want[AMPDIAG_WHATIF_UNDERFLOW] += (x[i] != 0) & (c == AMPDIAG_CLASS_UNDERFLOW || c == AMPDIAG_CLASS_ZERO);
                want[AMPDIAG_WHATIF_SUBNORMAL] += c == AMPDIAG_CLASS_SUBNORMAL;
            }
            ncase++;
            if (ampdiag_whatif_scaled((ampdiag_format)f, scales[k], x, n, got) != 0 || memcmp(got, want, sizeof got)) {
                bad++;
                diag("%s scale %g: got %llu/%llu/%llu want %llu/%llu/%llu", ampdiag_format_get((ampdiag_format)f)->name,
                     (double)scales[k], (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)got[2],
                     (unsigned long long)want[0], (unsigned long long)want[1], (unsigned long long)want[2]);
            }
        }
    ok(bad == 0, "scaled what-if counts equal casting fl(x * scale) value by value (%d formats x scales, %d bad)", ncase, bad);
    /* several formats in one pass (pairs): the same counts as one call per format */
    {
        const ampdiag_format fm[5] = {AMPDIAG_E4M3, AMPDIAG_E5M2, AMPDIAG_FP16, AMPDIAG_E4M3, AMPDIAG_BF16};
        const float sc5[5] = {448.0f / 3.0f, 0x1p-20f, 3.0e30f, 1.0f, 1e-30f};
        uint64_t many[5][3], one[5][3];
        int same = ampdiag_whatif_scaled_n(5, fm, sc5, x, n, many) == 0;
        for (int i = 0; i < 5; i++)
            same = same && ampdiag_whatif_scaled(fm[i], sc5[i], x, n, one[i]) == 0;
        ok(same && memcmp(many, one, sizeof one) == 0, "ampdiag_whatif_scaled_n: 5 formats at once equal 5 single passes");
        const float bad2[2] = {1.0f, 0.0f};
        ok(ampdiag_whatif_scaled_n(2, fm, bad2, x, n, many) == -1, "ampdiag_whatif_scaled_n refuses a bad scale");
    }
    /* counts at least thresholds, 1 to 8 of them, against the definition value by value */
    {
        const uint32_t th[8] = {1u, 0x00800000u, 0x3f800000u, 0x7f800000u, 0x3a000001u, 0x43e00000u, 0x00000007u,
                                0x7f7fffffu};
        int good = 1;
        for (size_t k = 1; k <= 8; k++) {
            uint64_t got[8], want[8] = {0};
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < k; j++)
                    want[j] += (fbits_of(x[i]) & 0x7fffffffu) >= th[j];
            good = good && ampdiag_count_at_least(x, n, k, th, got) == 0 && memcmp(got, want, k * sizeof *got) == 0;
        }
        const uint32_t out_of_range[2] = {0u, 0x7f800001u};
        uint64_t got[2];
        ok(good && ampdiag_count_at_least(x, n, 9, th, got) == -1 && ampdiag_count_at_least(x, n, 1, out_of_range, got) == -1 &&
               ampdiag_count_at_least(x, n, 1, out_of_range + 1, got) == -1,
           "ampdiag_count_at_least: 1 to 8 thresholds equal counting value by value; k > 8 and thresholds outside [1, inf] refused");
    }
    /* scale 1 is the unscaled record */
    ampdiag_tstats s;
    ampdiag_tstats_compute(x, n, &s, NULL);
    uint64_t c1[3];
    ampdiag_whatif_scaled(AMPDIAG_E4M3, 1.0f, x, n, c1);
    ok(memcmp(c1, s.whatif[AMPDIAG_E4M3], sizeof c1) == 0, "scale 1: the same counts as the statistics record");
    uint32_t t[3];
    ok(ampdiag_scaled_thresholds(AMPDIAG_E4M3, 2.0f, t) == 0 && t[0] == 0x43680001u && t[1] == 0x3bf00000u && t[2] == 0x3a000000u,
       "e4m3 at scale 2: the thresholds halve (232 + ulp, 2^-7 - 2^-11, 2^-11)");
    ok(ampdiag_whatif_scaled(AMPDIAG_E4M3, 0.0f, x, n, c1) == -1 && ampdiag_whatif_scaled(AMPDIAG_E4M3, NAN, x, n, c1) == -1 &&
       ampdiag_whatif_scaled((ampdiag_format)9, 1.0f, x, n, c1) == -1, "a scale <= 0 or NaN, or an unknown format, is refused");
    /* a delayed-scaling step as a caller would run it: history of the last amaxes -> scale -> counts */
    float hist[3] = {0.5f, 4.0f, 2.0f};
    float sc = ampdiag_delayed_scale(AMPDIAG_E4M3, hist, 3, 0, 1.0f);
    uint64_t cs[3];
    for (size_t i = 0; i < 1000; i++) x[i] = (float)i * 0.0045f; /* amax 4.4955 > 4: a few overflow */
    ampdiag_whatif_scaled(AMPDIAG_E4M3, sc, x, 1000, cs);
    size_t over = 0;
    for (size_t i = 0; i < 1000; i++) over += x[i] * sc > 464.0f;
    ok(sc == 112.0f && cs[AMPDIAG_WHATIF_OVERFLOW] == over && over > 0,
       "delayed scaling: history max 4 -> scale 112; values above 464 / 112 overflow (%zu)", over);
    free(x);
}

/* ampdiag_tstats_compute_ge: the record of ampdiag_tstats_compute (the same bits) and the counts
 * of ampdiag_count_at_least, in one pass: on mixed data with NaN, inf, zeros and subnormals, on
 * clean blocks, and with thresholds on every kind of key (16 low bits zero in g or g - 1, or
 * neither), inside and outside each block's range. */
static void test_ge(void)
{
    size_t n = 3 * 4096 + 77;
    float *x = alloc_f(n);
    int bad = 0, nk = 0;
    for (int round = 0; round < 6; round++) {
        for (size_t i = 0; i < n; i++) {
            float v = rnd_normal() * ldexpf(1.0f, (int)(rnd32() % 40) - 30);
            x[i] = round < 3 ? v : (rnd32() % 13 == 0) ? fbits(rnd32()) : (rnd32() % 11 == 0) ? 0.0f : v;
        }
        if (round == 1) /* one block of weight-like values only */
            for (size_t i = 4096; i < 8192; i++) x[i] = 0.02f * rnd_normal();
        uint32_t ge[8] = {1u, 0x3a000000u, 0x3a000001u, 0x387fe000u, 0x43e80000u, 0x7f800000u, 0x00400000u,
                          (rnd32() & 0x7fffffffu) % 0x7f800000u + 1u};
        size_t k = (size_t)(round % 2 ? 8 : 5 + round % 3);
        ampdiag_tstats a, b;
        ampdiag_hist ha, hb;
        uint64_t cg[8], cr[8];
        ampdiag_tstats_compute(x, n, &a, &ha);
        int rc = ampdiag_tstats_compute_ge(x, n, &b, &hb, k, ge, cg);
        ampdiag_count_at_least(x, n, k, ge, cr);
        nk += (int)k;
        if (rc != 0 || diff_stats(&b, &a, NULL, 0) || diff_hist(&hb, &ha) || memcmp(cg, cr, k * sizeof cg[0]) != 0) {
            bad++;
            diag("compute_ge round %d: rc %d, %s", round, rc, diff_stats(&b, &a, NULL, 0) ? diff_stats(&b, &a, NULL, 0) : "counts");
        }
    }
    ok(bad == 0, "compute_ge: the same record as compute and the counts of count_at_least (6 rounds, %d thresholds)", nk);
    uint32_t bad_ge[2] = {0u, 0x7f800001u};
    uint64_t c[9];
    uint32_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    ampdiag_tstats t;
    ok(ampdiag_tstats_compute_ge(x, n, &t, NULL, 1, bad_ge, c) == -1 &&
           ampdiag_tstats_compute_ge(x, n, &t, NULL, 1, bad_ge + 1, c) == -1 &&
           ampdiag_tstats_compute_ge(x, n, &t, NULL, 9, nine, c) == -1,
       "compute_ge refuses a threshold 0 or above inf, and more than 8");
    free(x);
}

int main(int argc, char **argv)
{
    (void)argc; (void)argv;
    diag("kernel: %s", ampdiag_tstats_impl());
    test_cases();
    test_accuracy();
    test_merge();
    test_accessors();
    test_scaled();
    test_ge();
    /* the lesser kernels must give the same answers as the best one */
    const char *caps[2] = {"avx2", "generic"};
    const char *prev = ampdiag_tstats_impl();
    for (int k = 0; k < 2; k++) {
        setenv("AMPDIAG_TSTATS_IMPL", caps[k], 1);
        const char *impl = ampdiag_tstats_impl();
        if (strcmp(impl, prev) == 0)
            continue;
        prev = impl;
        diag("again with kernel: %s", impl);
        ok(strcmp(impl, caps[k]) == 0, "AMPDIAG_TSTATS_IMPL=%s selects that kernel", caps[k]);
        test_cases();
        test_merge();
        test_ge();
    }
    return done_testing();
}
