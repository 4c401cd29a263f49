/*
 * t_optim.c - optimizers against hand-computed and double-precision references; FP16 state
 * (Adam eps vanishing), BF16-stored weights (lost updates), unscaling, clipping, schedules.
 */
#include "optim.h"
#include "tap.h"

#include <math.h>

static optim make(optim_kind k, size_t n, ampdiag_format sf, ampdiag_format wf)
{
    optim_config c;
    optim_config_default(&c, k);
    c.state_fmt = sf;
    c.weight_fmt = wf;
    if (k == OPT_SGD) c.momentum = 0.9;
    optim o;
    if (optim_init(&o, &c, n) != 0) abort();
    return o;
}

static void test_sgd(void)
{
    optim o = make(OPT_SGD, 1, AMPDIAG_FP32, AMPDIAG_FP32);
    float w = 1.0f, g = 0.5f;
    optim_begin(&o);
    optim_update(&o, &w, &g, 0, 1, 0.1, 1.0f, NULL, NULL, NULL);
    ok(w == 0.95f, "sgd step 1: buf = g, w = 1 - 0.1*0.5 = 0.95 (got %.9g)", w);
    optim_begin(&o);
    optim_update(&o, &w, &g, 0, 1, 0.1, 1.0f, NULL, NULL, NULL);
    ok(fabsf(w - 0.855f) < 1e-7f, "sgd step 2: buf = 0.9*0.5 + 0.5, w = 0.855 (got %.9g)", w);
    optim_free(&o);
    /* weight decay adds wd*w to the gradient */
    optim_config c;
    optim_config_default(&c, OPT_SGD);
    c.momentum = 0;
    c.weight_decay = 0.1;
    optim_init(&o, &c, 1);
    w = 2.0f; g = 0.0f;
    optim_begin(&o);
    optim_update(&o, &w, &g, 0, 1, 0.5, 1.0f, NULL, NULL, NULL);
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
    optim_init(&o, &c, N);
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
        optim_update(&o, w, g, 0, N, 1e-3, 1.0f, NULL, NULL, NULL);
        adamw_ref(wd, gd, md, vd, N, t, 1e-3, 0.9, 0.999, 1e-8, 0.01);
    }
    for (int i = 0; i < N; i++) maxerr = fmax(maxerr, fabs(w[i] - wd[i]));
    ok(maxerr < 2e-6, "adamw: 10 steps on 3000 parameters match a double reference (max |dw| err %.3g)", maxerr);
    /* first step moves each weight by about lr in the direction of -g */
    optim_free(&o);
    optim_init(&o, &c, 1);
    float w1 = 0.0f, g1 = 0.25f;
    optim_begin(&o);
    optim_update(&o, &w1, &g1, 0, 1, 1e-3, 1.0f, NULL, NULL, NULL);
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
    optim_update(&o32, &w32, &g, 0, 1, 1e-3, 1.0f, NULL, NULL, NULL);
    optim_update(&o16, &w16, &g, 0, 1, 1e-3, 1.0f, NULL, NULL, NULL);
    ok(w32 == 0.5f, "fp32 state, zero gradient: weight unchanged");
    ok(isnan(w16), "fp16 state, zero gradient: eps 1e-8 rounds to 0, 0/0 = NaN weight");
    optim_free(&o16);
    /* eps 1e-7 survives FP16 (2 subnormal ulps): no NaN */
    optim_config c;
    optim_config_default(&c, OPT_ADAMW);
    c.state_fmt = AMPDIAG_FP16;
    c.eps = 1e-7;
    optim_init(&o16, &c, 1);
    w16 = 0.5f;
    optim_begin(&o16);
    optim_update(&o16, &w16, &g, 0, 1, 1e-3, 1.0f, NULL, NULL, NULL);
    ok(w16 == 0.5f, "fp16 state with eps 1e-7: weight unchanged, no NaN");
    /* tiny gradients: g^2 underflows FP16, v = 0, the update is m/eps: huge */
    float g2 = 1e-5f;
    w16 = 0.5f;
    optim_update(&o16, &w16, &g2, 0, 1, 1e-3, 1.0f, NULL, NULL, NULL);
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
    optim_init(&o, &c, 4);
    float w[4] = {1, 1, 1, 1}, g[4] = {1, 1, 1, 0};
    optim_stats st;
    optim_stats_init(&st);
    optim_begin(&o);
    optim_update(&o, w, g, 0, 4, 1e-3, 1.0f, &st, NULL, NULL);
    ok(w[0] == 1.0f && st.lost_updates == 3, "bf16 weights: 1 - 1e-3 rounds back to 1, 3 lost updates (got %llu)",
       (unsigned long long)st.lost_updates);
    ok(st.lost_if_bf16 == 3 && st.lost_if_fp16 == 0, "what-if: lost with BF16 weights 3, with FP16 weights 0");
    ok(st.update.count == 4 && st.update.n_zero == 1 && st.update.min == -1e-3f, "update statistics: 4 values, one zero, min -1e-3");
    ok(st.weight.count == 4 && st.weight.max == 1.0f, "weight statistics of the weights the step started from");
    ok(fabs(sqrt(st.dw_sumsq / st.w_sumsq) / sqrt(3e-6 / 4) - 1) < 1e-6, "update/weight ratio from the sums of squares");
    optim_free(&o);
    c.weight_fmt = AMPDIAG_FP32;
    optim_init(&o, &c, 4);
    float w2[4] = {1, 1, 1, 1};
    optim_stats_init(&st);
    optim_begin(&o);
    optim_update(&o, w2, g, 0, 4, 1e-3, 1.0f, &st, NULL, NULL);
    ok(w2[0] == 0.999f && st.lost_updates == 0, "fp32 master weights keep the update (w = 0.999)");
    optim_free(&o);
}

static void test_unscale_clip(void)
{
    float g[6] = {65536.0f, -131072.0f, 0, INFINITY, NAN, 2.0f};
    double ss = 0;
    uint64_t nf = 0;
    ampdiag_tstats st;
    ampdiag_tstats_init(&st);
    grads_unscale(g, 6, 1.0f / 65536, &ss, &nf, &st, NULL);
    ok(g[0] == 1.0f && g[1] == -2.0f && g[5] == 0x1p-15f, "unscale multiplies by 1/scale");
    ok(nf == 2 && fabs(ss - (1 + 4 + 0x1p-30)) < 1e-15, "unscale: 2 non-finite, sum of squares of the finite unscaled values");
    ok(st.absmax == 131072.0f && st.n_posinf == 1 && st.n_nan == 1, "statistics describe the scaled values");
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

int main(void)
{
    test_sgd();
    test_adamw();
    test_fp16_state();
    test_lost_updates();
    test_unscale_clip();
    test_schedule();
    return done_testing();
}
