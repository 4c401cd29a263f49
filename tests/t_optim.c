/*
 * t_optim.c - optimizers against hand-computed and double-precision references; FP16 state
 * (Adam eps vanishing), BF16-stored weights (lost updates), unscaling, clipping, schedules.
 */
#include "train/optim.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static optim make(optim_kind k, size_t n, ampdiag_format sf, ampdiag_format wf)
{
    optim_config c;
    optim_config_default(&c, k);
    c.state_fmt = sf;
    c.weight_fmt = wf;
    if (k == OPT_SGD) c.momentum = 0.9;
    optim o;
    if (optim_init(&o, backend_cpu(), &c, n) != 0) abort();
    return o;
}

static void test_sgd(void)
{
    optim o = make(OPT_SGD, 1, AMPDIAG_FP32, AMPDIAG_FP32);
    float w = 1.0f, g = 0.5f;
    optim_begin(&o);
    optim_update(&o, &w, &g, 0, 1, 0.1, 1.0f, 1.0f, NULL, NULL, NULL, NULL);
    ok(w == 0.95f, "sgd step 1: buf = g, w = 1 - 0.1*0.5 = 0.95 (got %.9g)", w);
    optim_begin(&o);
    optim_update(&o, &w, &g, 0, 1, 0.1, 1.0f, 1.0f, NULL, NULL, NULL, NULL);
    ok(fabsf(w - 0.855f) < 1e-7f, "sgd step 2: buf = 0.9*0.5 + 0.5, w = 0.855 (got %.9g)", w);
    optim_free(&o);
    /* weight decay adds wd*w to the gradient */
    optim_config c;
    optim_config_default(&c, OPT_SGD);
    c.momentum = 0;
    c.weight_decay = 0.1;
    optim_init(&o, backend_cpu(), &c, 1);
    w = 2.0f; g = 0.0f;
    optim_begin(&o);
    optim_update(&o, &w, &g, 0, 1, 0.5, 1.0f, 1.0f, NULL, NULL, NULL, NULL);
    ok(w == 1.9f, "sgd weight decay: w = 2 - 0.5*0.1*2 = 1.9 (got %.9g)", w);
    optim_free(&o);
}

/* AdamW in double for comparison. */
static void adamw_ref(double *w, const double *g, double *m, double *v, int n, int t, double lr,
                      double b1, double b2, double eps, double wd)
{
    for (int i = 0; i < n; i++) {
        w[i] -= lr * wd * w[i];
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        double mh = m[i] / (1 - pow(b1, t)), vh = v[i] / (1 - pow(b2, t));
        w[i] -= lr * mh / (sqrt(vh) + eps);
    }
}

static void test_adamw(void)
{
    enum { N = 3000 };
    optim_config c;
    optim_config_default(&c, OPT_ADAMW);
    c.weight_decay = 0.01;
    optim o;
    optim_init(&o, backend_cpu(), &c, N);
    static float w[N], g[N];
    static double wd[N], gd[N], md[N], vd[N];
    uint32_t s = 7;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        w[i] = (float)((s >> 8) / 16777216.0 - 0.5);
        wd[i] = w[i];
    }
    double maxerr = 0;
    for (int t = 1; t <= 10; t++) {
        for (int i = 0; i < N; i++) {
            s = s * 1664525u + 1013904223u;
            g[i] = (float)((s >> 8) / 16777216.0 - 0.5) * 1e-2f;
            gd[i] = g[i];
        }
        optim_begin(&o);
        optim_update(&o, w, g, 0, N, 1e-3, 1.0f, 1.0f, NULL, NULL, NULL, NULL);
        adamw_ref(wd, gd, md, vd, N, t, 1e-3, 0.9, 0.999, 1e-8, 0.01);
    }
    for (int i = 0; i < N; i++) maxerr = fmax(maxerr, fabs(w[i] - wd[i]));
    ok(maxerr < 2e-6, "adamw: 10 steps on 3000 parameters match a double reference (max |dw| err %.3g)", maxerr);
    /* first step moves each weight by about lr in the direction of -g */
    optim_free(&o);
    optim_init(&o, backend_cpu(), &c, 1);
    float w1 = 0.0f, g1 = 0.25f;
    optim_begin(&o);
    optim_update(&o, &w1, &g1, 0, 1, 1e-3, 1.0f, 1.0f, NULL, NULL, NULL, NULL);
    ok(fabsf(w1 + 1e-3f) < 1e-8f, "adamw step 1: dw = -lr * g/|g| (got %.9g)", w1);
    optim_free(&o);
}

static void test_fp16_state(void)
{
    /* zero gradient, zero state: FP32 state gives dw = 0; FP16 state rounds eps 1e-8 to 0 and
     * computes 0/0 */
    optim o32 = make(OPT_ADAMW, 1, AMPDIAG_FP32, AMPDIAG_FP32);
    optim o16 = make(OPT_ADAMW, 1, AMPDIAG_FP16, AMPDIAG_FP32);
    float w32 = 0.5f, w16 = 0.5f, g = 0.0f;
    optim_begin(&o32); optim_begin(&o16);
    optim_update(&o32, &w32, &g, 0, 1, 1e-3, 1.0f, 1.0f, NULL, NULL, NULL, NULL);
    optim_update(&o16, &w16, &g, 0, 1, 1e-3, 1.0f, 1.0f, NULL, NULL, NULL, NULL);
    ok(w32 == 0.5f, "fp32 state, zero gradient: weight unchanged");
    ok(isnan(w16), "fp16 state, zero gradient: eps 1e-8 rounds to 0, 0/0 = NaN weight");
    optim_free(&o16);
    /* eps 1e-7 survives FP16 (2 subnormal ulps): no NaN */
    optim_config c;
    optim_config_default(&c, OPT_ADAMW);
    c.state_fmt = AMPDIAG_FP16;
    c.eps = 1e-7;
    optim_init(&o16, backend_cpu(), &c, 1);
    w16 = 0.5f;
    optim_begin(&o16);
    optim_update(&o16, &w16, &g, 0, 1, 1e-3, 1.0f, 1.0f, NULL, NULL, NULL, NULL);
    ok(w16 == 0.5f, "fp16 state with eps 1e-7: weight unchanged, no NaN");
    /* tiny gradients: g^2 underflows FP16, v = 0, the update is m/eps: huge */
    float g2 = 1e-5f;
    w16 = 0.5f;
    optim_update(&o16, &w16, &g2, 0, 1, 1e-3, 1.0f, 1.0f, NULL, NULL, NULL, NULL);
    ok(fabsf(w16 - 0.5f) > 1e-3f, "fp16 state: g = 1e-5 has g^2 = 0 in FP16, the step exceeds lr (w = %.6g)", w16);
    optim_free(&o16);
    optim_free(&o32);
}

static void test_lost_updates(void)
{
    /* SGD without momentum, lr 1e-3, g = 1: dw = -1e-3 on w = 1 */
    optim_config c;
    optim_config_default(&c, OPT_SGD);
    c.momentum = 0;
    c.weight_fmt = AMPDIAG_BF16;
    optim o;
    optim_init(&o, backend_cpu(), &c, 4);
    float w[4] = {1, 1, 1, 1}, g[4] = {1, 1, 1, 0};
    optim_stats st;
    optim_stats_init(&st);
    optim_begin(&o);
    float w_old[4] = {0}, dw[4];
    optim_update(&o, w, g, 0, 4, 1e-3, 1.0f, 1.0f, dw, w_old, NULL, NULL);
    ok(w_old[0] == 1.0f && w_old[1] == 1.0f && w_old[2] == 1.0f && w_old[3] == 1.0f,
       "the weights before the update are handed back");
    ampdiag_tstats_compute(w_old, 4, &st.weight, NULL);
    optim_update_stats(&o, w_old, dw, 4, &st, NULL);
    ok(dw[0] == -1e-3f && dw[3] == 0.0f, "the intended changes are handed back: -1e-3, 0 where g = 0");
    ok(w[0] == 1.0f && st.lost_updates == 3, "bf16 weights: 1 - 1e-3 rounds back to 1, 3 lost updates (got %llu)",
       (unsigned long long)st.lost_updates);
    ok(st.lost_if_bf16 == 3 && st.lost_if_fp16 == 0, "what-if: lost with BF16 weights 3, with FP16 weights 0");
    ok(st.update.count == 4 && st.update.n_zero == 1 && st.update.min == -1e-3f, "update statistics: 4 values, one zero, min -1e-3");
    ok(st.weight.count == 4 && st.weight.max == 1.0f, "weight statistics of the weights the step started from");
    ok(fabs(sqrt(st.update.sumsq / st.weight.sumsq) / sqrt(3e-6 / 4) - 1) < 1e-6, "update/weight ratio from the sums of squares");
    optim_free(&o);
    c.weight_fmt = AMPDIAG_FP32;
    optim_init(&o, backend_cpu(), &c, 4);
    float w2[4] = {1, 1, 1, 1};
    optim_stats_init(&st);
    optim_begin(&o);
    optim_update(&o, w2, g, 0, 4, 1e-3, 1.0f, 1.0f, dw, NULL, NULL, NULL);
    optim_update_stats(&o, w_old, dw, 4, &st, NULL);
    ok(w2[0] == 0.999f && st.lost_updates == 0, "fp32 master weights keep the update (w = 0.999)");
    optim_free(&o);
}

/* The compute copy and the non-finite count optim_update takes in its pass: over several blocks,
 * w_copy = fl16(w) of the updated weights, and NaN/inf weights counted (added to the count). */
static void test_update_copy(void)
{
    enum { N = 3000 };
    optim_config c;
    optim_config_default(&c, OPT_SGD);
    c.momentum = 0;
    c.copy_fmt = AMPDIAG_FP16;
    optim o;
    optim_init(&o, backend_cpu(), &c, N);
    static float w[N], g[N], wc[N];
    for (int i = 0; i < N; i++) {
        w[i] = 1.0f + (float)i * 0.37f;
        g[i] = (float)(i % 7) - 3.0f;
    }
    w[5] = INFINITY;
    g[1200] = NAN;
    w[2999] = 70000.0f; /* finite, but inf in FP16 */
    uint64_t nf = 2;
    optim_begin(&o);
    optim_update(&o, w, g, 0, N, 0.5, 1.0f, 1.0f, NULL, NULL, wc, &nf);
    int same = 1;
    for (int i = 0; i < N; i++)
        same &= memcmp(&wc[i], &(float){ampdiag_round(AMPDIAG_FP16, w[i])}, sizeof(float)) == 0;
    ok(same, "w_copy holds the updated weights rounded to FP16 (w[1] = %g, copy %g)", w[1], wc[1]);
    ok(nf == 2 + 2 && isinf(wc[2999]) && isfinite(w[2999]),
       "the non-finite count adds the inf and the NaN weight (got %llu); FP16's inf in the copy only",
       (unsigned long long)nf);
    optim_free(&o);
}

/* The copies optim_update hands back over several blocks and from an offset: w_keep[i] is the
 * weight off + i held before, dw_keep[i] its intended change, and (FP32 weights) the stored
 * weight is their float sum. */
static void test_update_keeps(void)
{
    enum { N = 2500, OFF = 3, TOT = N + 7 };
    optim_config c;
    optim_config_default(&c, OPT_ADAMW);
    optim o;
    optim_init(&o, backend_cpu(), &c, TOT);
    static float w[TOT], before[TOT], g[TOT], wk[N], dk[N];
    uint32_t s = 12345;
    for (int i = 0; i < TOT; i++) {
        s = s * 1664525u + 1013904223u;
        w[i] = before[i] = (float)((int)(s >> 8) - (1 << 23)) * 0x1p-26f;
        g[i] = (float)((int)(s & 0xffff) - 32768) * 0x1p-20f;
    }
    optim_begin(&o);
    optim_update(&o, w, g, OFF, N, 1e-2, 1.0f, 1.0f, dk, wk, NULL, NULL);
    int bad_keep = 0, bad_sum = 0, untouched = 0;
    for (int i = 0; i < N; i++) {
        bad_keep += memcmp(&wk[i], &before[OFF + i], sizeof wk[i]) != 0;
        bad_sum += w[OFF + i] != wk[i] + dk[i];
    }
    for (int i = 0; i < TOT; i++)
        untouched += (i < OFF || i >= OFF + N) && w[i] != before[i];
    ok(bad_keep == 0, "w_keep holds the %d weights from offset %d as they were (%d differ)", N, OFF, bad_keep);
    ok(bad_sum == 0, "each stored FP32 weight is w_keep + dw_keep (%d differ)", bad_sum);
    ok(untouched == 0, "weights outside the range are left alone");
    optim_free(&o);
}

static void test_unscale_clip(void)
{
    float g[6] = {65536.0f, -131072.0f, 0, INFINITY, NAN, 2.0f};
    double ss = 0;
    uint64_t nf = 0;
    backend_cpu()->grad_norm(backend_cpu(), g, 6, 1.0f / 65536, &ss, &nf);
    ok(g[0] == 65536.0f && g[1] == -131072.0f && g[5] == 2.0f, "the norm leaves the gradients as they were (scaled)");
    ok(nf == 2 && fabs(ss - (1 + 4 + 0x1p-30)) < 1e-15, "norm: 2 non-finite, sum of squares of the finite unscaled values");
    /* GradScaler's order: the non-finite check is on the values as held (scaled), before they are
     * unscaled; a finite value whose unscaling overflows (a scale below 1) is not flagged, and the
     * norm of the unscaled gradients is then inf (over 40 values: the vector lanes and the tail) */
    float h[41];
    for (int i = 0; i < 41; i++)
        h[i] = i == 17 || i == 40 ? 1e30f : 1.0f;
    double ss2 = 0;
    uint64_t nf2 = 0;
    backend_cpu()->grad_norm(backend_cpu(), h, 41, 1e10f, &ss2, &nf2);
    ok(nf2 == 0 && isinf(ss2), "scale 1e-10: finite scaled values overflow when unscaled: not counted as "
       "non-finite (as GradScaler), the norm's sum of squares is inf (%llu, %g)", (unsigned long long)nf2, ss2);
    h[3] = NAN;
    nf2 = 0;
    ss2 = 0;
    backend_cpu()->grad_norm(backend_cpu(), h, 41, 1.0f, &ss2, &nf2);
    ok(nf2 == 1 && isfinite(ss2), "a NaN as held is counted; the rest summed (%llu, %g)", (unsigned long long)nf2, ss2);
    /* the optimizer unscales as it reads: (g * 1/scale) * clip, as if unscaled first */
    optim_config c;
    optim_config_default(&c, OPT_SGD);
    c.momentum = 0;
    optim o;
    optim_init(&o, backend_cpu(), &c, 2);
    float w[2] = {0, 0}, gs[2] = {65536.0f * 3, -65536.0f};
    optim_begin(&o);
    optim_update(&o, w, gs, 0, 2, 0.5, 1.0f / 65536, 0.25f, NULL, NULL, NULL, NULL);
    ok(w[0] == -0.375f && w[1] == 0.125f, "update with ginv 2^-16 and clip 0.25: w = -0.5 * (g / 2^16) * 0.25");
    optim_free(&o);
    ok(fabsf(clip_coefficient(10.0, 1.0) - 0.1f) < 1e-7f, "clip: norm 10, max 1 -> 0.1");
    ok(clip_coefficient(0.5, 1.0) == 1.0f && clip_coefficient(10, 0) == 1.0f && clip_coefficient(INFINITY, 1) == 1.0f,
       "clip: below max, disabled, or non-finite norm -> 1");
}

static void test_schedule(void)
{
    schedule s;
    char err[200];
    ok(schedule_parse(&s, "cosine:10:0.1", 1.0, 110, err, sizeof err) == 0, "parse cosine:10:0.1");
    ok(fabs(schedule_lr(&s, 0) - 0.1) < 1e-12 && fabs(schedule_lr(&s, 9) - 1.0) < 1e-12, "warm-up: 0.1 at step 0, 1.0 at step 9");
    ok(fabs(schedule_lr(&s, 10) - 1.0) < 1e-12 && fabs(schedule_lr(&s, 60) - 0.55) < 1e-12 &&
       fabs(schedule_lr(&s, 110) - 0.1) < 1e-12, "cosine: 1.0 at 10, 0.55 halfway, min 0.1 at the end");
    ok(schedule_parse(&s, "constant", 0.3, 100, err, sizeof err) == 0 && schedule_lr(&s, 57) == 0.3, "constant");
    ok(schedule_parse(&s, "cosine:x", 1, 10, err, sizeof err) == -1 && strstr(err, "--schedule 'cosine:x'"),
       "a bad schedule names the option and the expected form");
    ok(schedule_parse(&s, "linear", 1, 10, err, sizeof err) == -1, "an unknown schedule is refused");
    optim_kind k;
    ok(optim_kind_parse("AdamW", &k) == 0 && k == OPT_ADAMW && optim_kind_parse("lion", &k) == -1, "optimizer names");
}

/* optim_update_stats against the plain definition, value by value, on random weights and
 * changes with every special kind of value, for each weight format, with and without FTZ. */
static uint64_t lcg = 12345;
static uint32_t rnd32(void) { lcg = lcg * 6364136223846793005ull + 1442695040888963407ull; return (uint32_t)(lcg >> 32); }
static float fbits(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }

static void test_update_stats_exact(void)
{
    const size_t n = 5003; /* blocks of 1024 and a tail shorter than a vector */
    float *w = malloc(n * sizeof *w), *d = malloc(n * sizeof *d);
    if (!w || !d) abort();
    static const uint32_t special[] = {0x7fc00000u, 0x7f800000u, 0xff800000u, 0x00000001u, 0x80000000u,
                                       0x477ff000u, 0x33000000u, 0x387fe000u, 0x7f7f8000u};
    for (size_t i = 0; i < n; i++) {
        float wi = (float)((int32_t)rnd32()) * 0x1p-31f * ldexpf(1.0f, (int)(rnd32() % 40) - 20);
        float di = (float)((int32_t)rnd32()) * 0x1p-31f * ldexpf(1.0f, (int)(rnd32() % 60) - 50);
        if (rnd32() % 50 == 0) wi = fbits(special[rnd32() % 9]);
        if (rnd32() % 50 == 0) di = fbits(special[rnd32() % 9]);
        if (rnd32() % 10 == 0) di = 0.0f;
        if (rnd32() % 20 == 0) di = wi * 0x1p-9f; /* near the half-ulp ties */
        w[i] = wi;
        d[i] = di;
    }
    static const ampdiag_format wfs[3] = {AMPDIAG_FP32, AMPDIAG_FP16, AMPDIAG_BF16};
    int bad = 0;
    for (int f = 0; f < 3; f++)
        for (unsigned ftz = 0; ftz < 2; ftz++) {
            optim_config c;
            optim_config_default(&c, OPT_SGD);
            c.weight_fmt = wfs[f];
            c.round_flags = ftz ? AMPDIAG_ROUND_FTZ : 0;
            optim o;
            if (optim_init(&o, backend_cpu(), &c, n) != 0) abort();
            optim_stats st;
            optim_stats_init(&st);
            optim_update_stats(&o, w, d, n, &st, NULL);
            uint64_t lost = 0, l16 = 0, lb = 0;
            double ds = 0; /* the update's sum of squares: finite values only */
            for (size_t i = 0; i < n; i++) {
                int nz = d[i] != 0.0f;
                float s = w[i] + d[i];
                if (wfs[f] != AMPDIAG_FP32)
                    s = ftz ? ampdiag_round_ftz(wfs[f], s) : ampdiag_round(wfs[f], s);
                lost += nz && s == w[i];
                float r16 = ftz ? ampdiag_round_ftz(AMPDIAG_FP16, w[i]) : ampdiag_round(AMPDIAG_FP16, w[i]);
                float s16 = ftz ? ampdiag_round_ftz(AMPDIAG_FP16, r16 + d[i]) : ampdiag_round(AMPDIAG_FP16, r16 + d[i]);
                l16 += nz && s16 == r16;
                float rb = ftz ? ampdiag_round_ftz(AMPDIAG_BF16, w[i]) : ampdiag_round(AMPDIAG_BF16, w[i]);
                float sb = ftz ? ampdiag_round_ftz(AMPDIAG_BF16, rb + d[i]) : ampdiag_round(AMPDIAG_BF16, rb + d[i]);
                lb += nz && sb == rb;
                if (isfinite(d[i]))
                    ds += (double)d[i] * d[i];
            }
            int same = st.lost_updates == lost && st.lost_if_fp16 == l16 && st.lost_if_bf16 == lb &&
                       st.update.count == n && fabs(st.update.sumsq - ds) <= 1e-12 * ds;
            if (!same) {
                bad++;
                diag("weights %s ftz %u: lost %llu/%llu fp16 %llu/%llu bf16 %llu/%llu", ampdiag_format_get(wfs[f])->name,
                     ftz, (unsigned long long)st.lost_updates, (unsigned long long)lost,
                     (unsigned long long)st.lost_if_fp16, (unsigned long long)l16,
                     (unsigned long long)st.lost_if_bf16, (unsigned long long)lb);
            }
            optim_free(&o);
        }
    ok(bad == 0, "update analysis equals the value-by-value definition (3 weight formats x FTZ, specials, ties)");
    free(w);
    free(d);
}

int main(void)
{
    test_sgd();
    test_adamw();
    test_fp16_state();
    test_lost_updates();
    test_update_keeps();
    test_update_copy();
    test_unscale_clip();
    test_update_stats_exact();
    test_schedule();
    return done_testing();
}
