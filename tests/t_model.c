/*
 * t_model.c - models end to end: presets and spec files (with their error messages), gradients
 * of the whole MLP and transformer against central differences of the double-precision
 * reference, determinism, the precision policies at model level (loss scaling, overflow and
 * its localisation, bf16-pure storage, FP32 islands), and the accessors the training loop uses.
 */
#include "layers_ref.h"
#include "model/model.h"
#include "numerics/numfmt.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * 0x1p-53;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(99);
    }
    return p;
}

static char err[512];

static model *make(const char *spec, const char *text, precision p, const char *fp32, uint64_t seed)
{
    model_options o = model_options_default();
    o.spec = spec;
    o.spec_text = text;
    o.precision = p;
    o.fp32_layers = fp32;
    o.seed = seed;
    err[0] = '\0';
    return model_create(&o, backend_cpu(), err, sizeof err);
}

/* Random features in [-1, 1] and labels. */
static void random_batch(const model *m, int B, float *x, int32_t *y, int32_t *tok)
{
    for (int i = 0; x && i < B * m->input_dim; i++)
        x[i] = (float)(2.0 * urand() - 1.0);
    for (int i = 0; y && i < B * m->T; i++)
        y[i] = (int32_t)(urand() * m->classes);
    for (int i = 0; tok && i < B * m->T; i++)
        tok[i] = (int32_t)(urand() * m->classes);
}

static int all_in_format(const float *x, size_t n, ampdiag_format f)
{
    for (size_t i = 0; i < n; i++)
        if (!same_bits(ampdiag_round(f, x[i]), x[i]))
            return 0;
    return 1;
}

/* ------------------------------------------------------------------------------- presets */

static void test_presets(void)
{
    model *m = make("mlp", NULL, PREC_FP32, NULL, 1);
    static const char *const names[] = {"fc1", "relu1", "fc2", "relu2",
                                        "fc3", "relu3", "fc4", "loss"};
    int good = m && model_nlayers(m) == 8;
    for (int i = 0; good && i < 8; i++)
        good = strcmp(model_layer(m, i)->name, names[i]) == 0;
    ok(good && model_nparams(m) == 142602 && m->input_dim == 32 && m->classes == 10,
       "mlp preset: fc1 relu1 fc2 relu2 fc3 relu3 fc4 loss, 32 -> 256 x3 -> 10, 142602 parameters");
    const layer *fc1 = model_layer(m, 0);
    ok(fc1->npv == 2 && strcmp(fc1->pv[0].name, "weight") == 0 && fc1->pv[0].shape[0] == 256
           && fc1->pv[0].shape[1] == 32 && strcmp(fc1->pv[1].name, "bias") == 0
           && fc1->pv[1].offset == 256 * 32 && fc1->p == model_params(m),
       "fc1 parameters: weight [256, 32] (PyTorch layout) then bias [256], first in the buffer");
    model_free(m);

    model_options o = model_options_default();
    o.input_dim = 5;
    o.classes = 3;
    m = model_create(&o, backend_cpu(), err, sizeof err);
    ok(m && m->input_dim == 5 && m->classes == 3 && model_layer(m, 6)->out_dim == 3,
       "mlp preset takes the data's features and classes");
    model_free(m);

    m = make("transformer", NULL, PREC_FP32, NULL, 1);
    ok(m && model_nlayers(m) == 24 && model_nparams(m) == 110336 && m->T == 32 && m->classes == 64,
       "transformer preset: 24 layers, 110336 parameters, ctx 32, vocab 64");
    if (m) {
        static const char *const tn[] = {"embed", "h0.ln1", "h0.attn.qkv", "h0.attn.sdpa",
                                         "h0.attn.proj", "h0.res1", "h0.ln2", "h0.mlp.fc",
                                         "h0.mlp.gelu", "h0.mlp.proj", "h0.res2"};
        int g = 1;
        for (int i = 0; i < 11; i++)
            g &= strcmp(model_layer(m, i)->name, tn[i]) == 0;
        g &= strcmp(model_layer(m, 21)->name, "ln_f") == 0
             && strcmp(model_layer(m, 22)->name, "lm_head") == 0
             && model_layer(m, 22)->bias == 0 && model_layer(m, 3)->op == OP_ATTENTION;
        ok(g, "transformer layer names: embed, h0.ln1, h0.attn.{qkv,sdpa,proj}, h0.res1, ..., "
           "ln_f, lm_head (no bias)");
    }
    model_free(m);
}

/* ------------------------------------------------------------------------------- specs */

static void expect_error(const char *text, const char *want, const char *what)
{
    model *m = make(NULL, text, PREC_FP32, NULL, 1);
    int good = !m && strstr(err, want) != NULL;
    ok(good, "spec error (%s): \"%s\"", what, err);
    if (!good)
        diag("expected a message containing \"%s\"", want);
    model_free(m);
}

static void test_spec_text(void)
{
    const char *text = "# a small classifier\n"
                       "input 12\n"
                       "linear fc1 16\n"
                       "relu\n"
                       "linear 16 nobias   # unnamed: fc2\n"
                       "gelu act2\n"
                       "layernorm\n"
                       "linear out 3\n"
                       "loss softmax_ce\n";
    model *m = make(NULL, text, PREC_FP32, NULL, 1);
    static const char *const names[] = {"fc1", "relu1", "fc2", "act2", "ln1", "out", "loss"};
    int good = m && model_nlayers(m) == 7 && m->input_dim == 12 && m->classes == 3;
    for (int i = 0; good && i < 7; i++)
        good = strcmp(model_layer(m, i)->name, names[i]) == 0;
    ok(good && model_layer(m, 2)->bias == 0 && model_layer(m, 4)->op == OP_LAYERNORM,
       "MLP spec text: names given and defaulted, nobias, layernorm");
    if (!good)
        diag("%s", err);
    model_free(m);

    expect_error("input 32\nlinear fc1\nloss softmax_ce\n", "(spec text):2: expected OUT_FEATURES",
                 "missing width");
    expect_error("input 32\nlinear fc1 10\nrelu fc1\nloss softmax_ce\n",
                 "(spec text):3: layer name 'fc1' is already used on line 2", "duplicate name");
    expect_error("input 32\n\nconv c1 3\n", "(spec text):3: expected 'linear', 'relu', 'gelu', "
                 "'layernorm' or 'loss', got 'conv'", "unknown statement");
    expect_error("linear 10\n", "(spec text):1: expected 'input FEATURES' (MLP form) or "
                 "'transformer'", "wrong first statement");
    expect_error("input 32\nlinear 10\n", "(spec text): expected 'loss softmax_ce' as the last",
                 "missing loss");
    expect_error("input 32\nlinear 10\nloss mse\n", "(spec text):3: expected 'loss softmax_ce'",
                 "unknown loss");
    expect_error("input 0\n", "(spec text):1: expected 'input FEATURES' with FEATURES an integer",
                 "zero input");
    expect_error("input 32\nlinear 99999999999\n", "(spec text):2: expected OUT_FEATURES",
                 "width out of range");
    expect_error("input 8\nlinear f$1 4\n", "(spec text):2: expected a layer name", "bad name");
    expect_error("transformer\nd_model 64\nheads 3\n", "d_model 64 is not a multiple of heads 3",
                 "heads");
    expect_error("transformer\nvocab 10\nvocab 12\n", "(spec text):3: 'vocab' is already given "
                 "on line 2", "repeated key");
    expect_error("transformer\nwidth 10\n", "(spec text):2: expected one of 'vocab'",
                 "unknown key");
    expect_error("", "empty spec", "empty");

    m = make(NULL, "transformer\nvocab 11\nctx 6\nd_model 12\nlayers 1\nheads 3\nd_ff 20\n",
             PREC_FP32, NULL, 1);
    ok(m && model_nlayers(m) == 14 && m->classes == 11 && m->T == 6
           && model_layer(m, 7)->out_dim == 20 && model_layer(m, 3)->heads == 3,
       "transformer spec text: vocab 11, ctx 6, d_model 12, 1 layer, 3 heads, d_ff 20");
    model_free(m);
}

static void test_spec_file(void)
{
    const char *path = "t_model_spec.tmp";
    FILE *f = fopen(path, "w");
    if (!f) {
        skip("cannot write %s in the current directory", path);
        return;
    }
    fputs("input 32\nlinear fc1 128\nrelu\nlinaer fc2 10\nloss softmax_ce\n", f);
    fclose(f);
    model *m = make(path, NULL, PREC_FP32, NULL, 1);
    ok(!m && strstr(err, "t_model_spec.tmp:4: expected 'linear'"),
       "a spec file's error names the file and line: \"%s\"", err);
    model_free(m);

    f = fopen(path, "w");
    if (f) {
        fputs("input 32\nlinear fc1 128\nrelu\nlinear fc2 10\nloss softmax_ce\n", f);
        fclose(f);
    }
    m = make(path, NULL, PREC_FP32, NULL, 1);
    ok(m && model_nlayers(m) == 4 && m->classes == 10, "a valid spec file loads");
    model_free(m);

    model_options o = model_options_default();
    o.spec = path;
    o.input_dim = 16;
    m = model_create(&o, backend_cpu(), err, sizeof err);
    ok(!m && strstr(err, "the spec has input 32 but the data has 16 features"),
       "a spec file that disagrees with the data is refused: \"%s\"", err);
    model_free(m);
    remove(path);

    m = make("no-such-spec.txt", NULL, PREC_FP32, NULL, 1);
    ok(!m && strstr(err, "no-such-spec.txt: cannot open the model spec"),
       "a missing spec file: \"%s\"", err);
    model_free(m);
}

/* ------------------------------------------------------------------------------- gradients */

/* Gradient of the loss w.r.t. up to `per_view` parameters of every parameter view against
 * central differences of the double reference model. */
static void check_model_grads(model *m, const float *x, const int32_t *tok, const int32_t *y,
                              int B, int per_view, const char *what)
{
    float loss;
    int rc = model_forward(m, x, tok, y, B, &loss) || model_backward(m, 1.0f);
    ref_graph g = {m->layers, m->nlayers, m->acts, m->nacts, m->params, B, m->T, tok, y};
    double *xs[256];
    if (rc || m->nacts > 256) {
        ok(0, "%s: forward/backward failed: %s", what, model_error(m));
        return;
    }
    for (int i = 0; i < m->nacts; i++)
        xs[i] = xcalloc((size_t)B * m->T * m->acts[i].dim, sizeof(double));
    if (!m->transformer)
        for (int i = 0; i < B * m->input_dim; i++)
            xs[0][i] = x[i];
    double *pd = xcalloc(m->nparams, sizeof(double));
    for (size_t i = 0; i < m->nparams; i++)
        pd[i] = m->params[i];
    double ref_loss = ref_graph_run(&g, xs, pd);
    ok(fabs(ref_loss - loss) <= 1e-5 * fabs(ref_loss), "%s: loss %.7f matches the double "
       "reference %.7f", what, (double)loss, ref_loss);

    const double h = 1e-5;
    double worst = 0.0;
    int checked = 0;
    const char *worst_at = "";
    for (int li = 0; li < m->nlayers; li++) {
        const layer *L = &m->layers[li];
        for (int v = 0; v < L->npv; v++) {
            const param_view *pv = &L->pv[v];
            size_t base = (size_t)(L->p - m->params) + pv->offset;
            double num[64], scale = 0.0;
            size_t idx[64];
            int k = per_view < (int)pv->count ? per_view : (int)pv->count;
            for (int j = 0; j < k; j++) {
                idx[j] = base + (k == (int)pv->count ? (size_t)j : (size_t)(urand() * pv->count));
                double p0 = pd[idx[j]];
                pd[idx[j]] = p0 + h;
                double jp = ref_graph_run(&g, xs, pd);
                pd[idx[j]] = p0 - h;
                double jm = ref_graph_run(&g, xs, pd);
                pd[idx[j]] = p0;
                num[j] = (jp - jm) / (2 * h);
                scale = fmax(scale, fabs(num[j]));
            }
            for (int j = 0; j < k; j++) {
                double e = fabs(m->grads[idx[j]] - num[j]) / (fabs(num[j]) + 0.01 * scale + 1e-12);
                if (e > worst) {
                    worst = e;
                    worst_at = L->name;
                }
                checked++;
            }
        }
    }
    ok(worst <= 1e-3, "%s: %d parameter gradients match central differences of the double "
       "reference (worst relative error %.2e in %s)", what, checked, worst, worst_at);
    for (int i = 0; i < m->nacts; i++)
        free(xs[i]);
    free(pd);
}

static void test_model_grads(void)
{
    const char *mlp = "input 6\nlinear fc1 8\nrelu\nlinear fc2 8\ngelu\nlayernorm\n"
                      "linear out 4\nloss softmax_ce\n";
    model *m = make(NULL, mlp, PREC_FP32, NULL, 3);
    if (m) {
        int B = 5;
        float x[30];
        int32_t y[5];
        random_batch(m, B, x, y, NULL);
        check_model_grads(m, x, NULL, y, B, 64, "mlp end to end");
    } else {
        ok(0, "mlp spec: %s", err);
    }
    model_free(m);

    m = make("mlp", NULL, PREC_FP32, NULL, 4);
    if (m) {
        int B = 3;
        float x[96];
        int32_t y[3];
        random_batch(m, B, x, y, NULL);
        check_model_grads(m, x, NULL, y, B, 12, "mlp preset end to end");
    }
    model_free(m);

    const char *tf = "transformer\nvocab 7\nctx 5\nd_model 8\nlayers 2\nheads 2\nd_ff 16\n";
    m = make(NULL, tf, PREC_FP32, NULL, 5);
    if (m) {
        int B = 3;
        int32_t tok[15], y[15];
        random_batch(m, B, NULL, y, tok);
        check_model_grads(m, NULL, tok, y, B, 24, "transformer end to end");
    } else {
        ok(0, "transformer spec: %s", err);
    }
    model_free(m);
}

/* ------------------------------------------------------------------------------- determinism */

static void test_determinism(void)
{
    model *a = make("transformer", NULL, PREC_FP16, NULL, 9);
    model *b = make("transformer", NULL, PREC_FP16, NULL, 9);
    model *c = make("transformer", NULL, PREC_FP16, NULL, 10);
    model *d = make("transformer", NULL, PREC_BF16, NULL, 9);
    if (!a || !b || !c || !d) {
        ok(0, "create: %s", err);
        goto out;
    }
    size_t bytes = model_nparams(a) * sizeof(float);
    ok(memcmp(a->params, b->params, bytes) == 0 && memcmp(a->params, c->params, bytes) != 0
           && memcmp(a->params, d->params, bytes) == 0,
       "initial weights: same seed -> same bits (for every 16-bit policy), other seed differs");
    int B = 4, n = B * a->T;
    int32_t *tok = xcalloc((size_t)n, sizeof *tok), *y = xcalloc((size_t)n, sizeof *y);
    random_batch(a, B, NULL, y, tok);
    float la, lb;
    model_forward(a, NULL, tok, y, B, &la);
    model_backward(a, 1024.0f);
    model_forward(b, NULL, tok, y, B, &lb);
    model_backward(b, 1024.0f);
    ok(same_bits(la, lb) && memcmp(a->grads, b->grads, bytes) == 0,
       "same seed and data -> the same loss (%.6f) and gradients, bit for bit", (double)la);
    free(tok);
    free(y);
out:
    model_free(a);
    model_free(b);
    model_free(c);
    model_free(d);
}

/* ------------------------------------------------------------------------------- policies */

static void test_loss_scale_exact(const char *spec)
{
    model *m = make(spec, NULL, PREC_FP32, NULL, 2);
    if (!m)
        return;
    int B = 8, n = B * m->T;
    float *x = m->transformer ? NULL : xcalloc((size_t)B * m->input_dim, sizeof *x);
    int32_t *y = xcalloc((size_t)n, sizeof *y), *tok = xcalloc((size_t)n, sizeof *tok);
    random_batch(m, B, x, y, m->transformer ? tok : NULL);
    float *g1 = xcalloc(m->nparams, sizeof *g1);
    model_forward(m, x, tok, y, B, NULL);
    model_backward(m, 1.0f);
    memcpy(g1, m->grads, m->nparams * sizeof *g1);
    model_backward(m, 1024.0f);
    int exact = 1;
    for (size_t i = 0; i < m->nparams; i++)
        exact &= same_bits(m->grads[i], g1[i] * 1024.0f);
    ok(exact, "%s fp32: gradients with loss scale 1024 are exactly 1024 x the unscaled ones", spec);
    free(g1);
    free(x);
    free(y);
    free(tok);
    model_free(m);
}

static void test_fp16_gradient_overflow(void)
{
    precision ps[2] = {PREC_FP16, PREC_BF16};
    int first[2][3];
    model_tensor_kind kind = MT_COUNT;
    for (int k = 0; k < 2; k++) {
        model *m = make("mlp", NULL, ps[k], NULL, 5);
        int B = 64;
        float *x = xcalloc((size_t)B * 32, sizeof *x);
        int32_t y[64];
        random_batch(m, B, x, y, NULL);
        model_forward(m, x, NULL, y, B, NULL);
        const float scales[3] = {1.0f, 65536.0f, 0x1p30f};
        for (int s = 0; s < 3; s++) {
            model_backward(m, scales[s]);
            model_tensor_kind kk;
            first[k][s] = model_first_nonfinite_gradient(m, &kk);
            if (k == 0 && s == 2)
                kind = kk;
        }
        free(x);
        model_free(m);
    }
    ok(first[0][0] == -1 && first[0][1] == -1 && first[1][0] == -1 && first[1][1] == -1,
       "fp16 and bf16: loss scales 1 and 2^16 give finite gradients");
    ok(first[0][2] == 6 && kind == MT_ACTIVATION_GRAD && first[1][2] == -1,
       "fp16 with loss scale 2^30: the first non-finite gradient (backward order) is fc4's "
       "output gradient (dlogits beyond 65504); bf16 stays finite");
}

static void test_forward_overflow(void)
{
    precision ps[3] = {PREC_FP16, PREC_BF16, PREC_FP32};
    int first[3];
    float loss[3];
    for (int k = 0; k < 3; k++) {
        rng_state = 77;
        model *m = make("mlp", NULL, ps[k], NULL, 5);
        int B = 16;
        float *x = xcalloc((size_t)B * 32, sizeof *x);
        int32_t y[16];
        random_batch(m, B, x, y, NULL);
        for (int i = 0; i < B * 32; i++)
            x[i] *= 1e5f; /* beyond fp16's 65504 */
        model_forward(m, x, NULL, y, B, &loss[k]);
        first[k] = model_first_nonfinite_activation(m);
        free(x);
        model_free(m);
    }
    ok(first[0] == 0 && !isfinite(loss[0]) && first[1] == -1 && first[2] == -1
           && isfinite(loss[1]) && isfinite(loss[2]),
       "inputs x1e5: fp16 overflows first in fc1 (loss %g); bf16 and fp32 stay finite",
       (double)loss[0]);
}

static void test_pure(void)
{
    model *m = make("transformer", NULL, PREC_BF16_PURE, NULL, 3);
    model *f = make("transformer", NULL, PREC_FP32, NULL, 3);
    if (!m || !f) {
        ok(0, "create: %s", err);
        model_free(m);
        model_free(f);
        return;
    }
    int n = 4 * m->T;
    int32_t *tok = xcalloc((size_t)n, sizeof *tok), *y = xcalloc((size_t)n, sizeof *y);
    random_batch(m, 4, NULL, y, tok);
    model_forward(m, NULL, tok, y, 4, NULL);
    model_backward(m, 1.0f);
    int rounded = 1;
    for (size_t i = 0; i < m->nparams; i++)
        rounded &= same_bits(m->params[i], ampdiag_round(AMPDIAG_BF16, f->params[i]));
    ok(rounded && all_in_format(m->params, m->nparams, AMPDIAG_BF16)
           && all_in_format(m->grads, m->nparams, AMPDIAG_BF16) && m->params_c == m->params,
       "bf16-pure: weights are the FP32 initial weights rounded to bf16; every gradient "
       "(layer norm and embedding included) is a bf16 value");
    free(tok);
    free(y);
    model_free(m);
    model_free(f);
}

static void test_fp32_layers(void)
{
    model *m = make("transformer", NULL, PREC_FP16, "h*.attn.sdpa, lm_head", 1);
    int good = m != NULL;
    for (int i = 0; good && i < model_nlayers(m); i++) {
        const layer *L = model_layer(m, i);
        int want = strstr(L->name, "attn.sdpa") || strcmp(L->name, "lm_head") == 0;
        good = L->fp32 == want && (want ? L->cfmt == AMPDIAG_FP32 : 1);
    }
    ok(good, "--fp32-layers 'h*.attn.sdpa, lm_head' marks exactly those layers");
    if (m) {
        const layer *proj = model_layer(m, model_find_layer(m, "h0.attn.proj"));
        const layer *head = model_layer(m, model_find_layer(m, "lm_head"));
        ok(proj->round_input && head->out->fmt == AMPDIAG_FP32 && !head->round_input,
           "the projection after an FP32 attention rounds its input; lm_head's logits are FP32");
    }
    model_free(m);
    m = make("mlp", NULL, PREC_FP16, "fc2,nope", 1);
    ok(!m && strstr(err, "--fp32-layers: no layer matches 'nope' (layers: fc1, relu1"),
       "an unknown --fp32-layers name is refused: \"%s\"", err);
    model_free(m);
}

/* The vector rounding code and the portable code give the same model, bit for bit (this
 * covers every fused kernel and the accumulating paths of the residual stream). */
static void test_simd_vs_generic(precision p, unsigned flags)
{
    model_options o = model_options_default();
    o.spec = "transformer";
    o.precision = p;
    o.round_flags = flags;
    o.seed = 11;
    float loss[2];
    float *grads[2] = {NULL, NULL};
    int B = 4;
    int32_t tok[128], y[128];
    for (int k = 0; k < 2; k++) {
        backend_cpu_force_generic(k);
        model *m = model_create(&o, backend_cpu(), err, sizeof err);
        if (!m)
            break;
        rng_state = 5;
        random_batch(m, B, NULL, y, tok);
        model_forward(m, NULL, tok, y, B, &loss[k]);
        model_backward(m, 4096.0f);
        grads[k] = xcalloc(m->nparams, sizeof(float));
        memcpy(grads[k], m->grads, m->nparams * sizeof(float));
        if (k == 1)
            ok(same_bits(loss[0], loss[1])
                   && memcmp(grads[0], grads[1], m->nparams * sizeof(float)) == 0,
               "%s%s transformer: vector and generic rounding give the same loss and gradients "
               "bit for bit", precision_name(p), flags ? " (FTZ)" : "");
        model_free(m);
    }
    backend_cpu_force_generic(0);
    free(grads[0]);
    free(grads[1]);
}

/* Count FP16 subnormal values (0 < |x| < 2^-14). */
static size_t fp16_subnormals(const float *x, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += x[i] != 0.0f && fabsf(x[i]) < 0x1p-14f;
    return c;
}

/* With FTZ, no tensor held in fp16 keeps a subnormal value. */
static void test_ftz_model(void)
{
    size_t sub[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        model_options o = model_options_default();
        o.spec = "transformer";
        o.precision = PREC_FP16;
        o.round_flags = k ? AMPDIAG_ROUND_FTZ : 0;
        model *m = model_create(&o, backend_cpu(), err, sizeof err);
        if (!m)
            return;
        int32_t tok[128], y[128];
        rng_state = 6;
        random_batch(m, 4, NULL, y, tok);
        model_forward(m, NULL, tok, y, 4, NULL);
        model_backward(m, 1.0f); /* unscaled: small gradients underflow */
        for (int i = 0; i < m->nlayers; i++) {
            const layer *L = model_layer(m, i);
            size_t n;
            float *t;
            if (L->out->fmt == AMPDIAG_FP16 && (t = model_tensor(m, i, MT_ACTIVATION_GRAD, &n)))
                sub[k] += fp16_subnormals(t, n);
            if (L->out->fmt == AMPDIAG_FP16 && (t = model_tensor(m, i, MT_ACTIVATION, &n)))
                sub[k] += fp16_subnormals(t, n);
        }
        model_free(m);
    }
    ok(sub[0] > 0 && sub[1] == 0, "fp16 transformer: %zu fp16-held values are subnormal without "
       "FTZ, none with FTZ", sub[0]);
}

/* ------------------------------------------------------------------------------- API */

static void test_api(void)
{
    model *m = make("mlp", NULL, PREC_FP16, NULL, 1);
    if (!m)
        return;
    float x[16 * 32];
    int32_t y[16];
    random_batch(m, 16, x, y, NULL);
    float loss = 0.0f;
    ok(model_forward(m, x, NULL, NULL, 4, &loss) == 0 && isnan(loss)
           && model_backward(m, 1.0f) == -1
           && strstr(model_error(m), "needs a forward with targets"),
       "forward without targets: loss NaN, and backward refuses (\"%s\")", model_error(m));
    int rows, cols;
    const float *logits = model_logits(m, &rows, &cols);
    ok(logits && rows == 4 && cols == 10 && all_in_format(logits, 40, AMPDIAG_FP16),
       "logits of an evaluation forward: [4, 10], fp16 values");

    int32_t bad[4] = {0, 1, 10, 2};
    ok(model_forward(m, x, NULL, bad, 4, NULL) == -1
           && strstr(model_error(m), "target 10 at position 2 is outside [0, 10)"),
       "an out-of-range target is refused: \"%s\"", model_error(m));
    ok(model_forward(m, x, NULL, y, 0, NULL) == -1
           && model_forward(m, NULL, NULL, y, 4, NULL) == -1,
       "batch 0 and a missing input are refused");

    /* growing and shrinking the batch */
    size_t n;
    int good = model_forward(m, x, NULL, y, 16, &loss) == 0 && isfinite(loss)
               && model_tensor(m, 0, MT_ACTIVATION, &n) && n == 16 * 256;
    good &= model_forward(m, x, NULL, y, 3, &loss) == 0 && model_backward(m, 1.0f) == 0
            && model_tensor(m, 0, MT_ACTIVATION, &n) && n == 3 * 256 && model_batch(m) == 3;
    ok(good, "batch 16 then 3: buffers grow, counts follow the batch");

    good = model_tensor(m, 1, MT_WEIGHT, &n) == NULL && n == 0
           && model_tensor(m, 7, MT_ACTIVATION_GRAD, &n) == NULL
           && model_tensor(m, 0, MT_WEIGHT_GRAD, &n) == model_grads(m) && n == 256 * 33
           && model_tensor(m, 6, MT_ACTIVATION_GRAD, &n) && n == 3 * 10;
    ok(good, "model_tensor: views and counts (relu has no weights, the loss no output gradient)");

    ampdiag_tstats s;
    float *a1 = model_tensor(m, 0, MT_ACTIVATION, &n);
    m->bk->tstats(m->bk, a1, n, &s, NULL);
    ok(s.count == n && s.fp16_overflow == 0 && s.n_nan == 0,
       "statistics of fc1's activations through the backend (%llu values)",
       (unsigned long long)s.count);
    ok(model_find_layer(m, "fc3") == 4 && model_find_layer(m, "fc9") == -1
           && model_gemm_flops(m, 64) > 3 * 2.0 * 64 * 256 * 256,
       "find_layer and GEMM flop count");

    int32_t tok[64];
    model *t = make("transformer", NULL, PREC_FP32, NULL, 1);
    for (int i = 0; i < 64; i++)
        tok[i] = i + 1;
    ok(t && model_forward(t, NULL, tok, NULL, 2, NULL) == -1
           && strstr(model_error(t), "token 64 at position 63 is outside [0, 64)"),
       "an out-of-range token is refused: \"%s\"", t ? model_error(t) : err);
    model_free(t);
    model_free(m);
}

/* A few SGD steps on a separable problem must lower the loss, in every policy. */
#define TRAIN_STEPS 40
#define TRAIN_LR 0.2f
static void test_training(precision p)
{
    model_options o = model_options_default();
    o.precision = p;
    o.input_dim = 8;
    o.classes = 4;
    model *m = model_create(&o, backend_cpu(), err, sizeof err);
    if (!m)
        return;
    int B = 32;
    float x[32 * 8];
    int32_t y[32];
    rng_state = 1234;
    for (int i = 0; i < B; i++) {
        y[i] = i % 4;
        for (int j = 0; j < 8; j++)
            x[i * 8 + j] = (float)(0.3 * (2 * urand() - 1)) + (j == y[i] ? 1.5f : 0.0f);
    }
    float first = 0, last = 0;
    float scale = p == PREC_FP16 ? 1024.0f : 1.0f;
    for (int step = 0; step < TRAIN_STEPS; step++) {
        model_forward(m, x, NULL, y, B, &last);
        if (step == 0)
            first = last;
        model_backward(m, scale);
        for (size_t i = 0; i < m->nparams; i++)
            m->params[i] -= TRAIN_LR * m->grads[i] / scale;
        model_hold_params(m);
    }
    ok(last < 0.5f * first, "%s: %d SGD steps lower the loss %.4f -> %.4f", precision_name(p),
       TRAIN_STEPS,
       (double)first, (double)last);
    model_free(m);
}

int main(void)
{
    precision p;
    ok(precision_parse("BF16-pure", &p) == 0 && p == PREC_BF16_PURE
           && precision_parse("fp8", &p) == -1 && strcmp(precision_name(PREC_FP16), "fp16") == 0
           && precision_format(PREC_BF16_PURE) == AMPDIAG_BF16,
       "precision names");
    test_presets();
    test_spec_text();
    test_spec_file();
    test_model_grads();
    test_determinism();
    test_loss_scale_exact("mlp");
    test_loss_scale_exact("transformer");
    test_fp16_gradient_overflow();
    test_forward_overflow();
    test_pure();
    test_fp32_layers();
    test_api();
    test_simd_vs_generic(PREC_FP16, 0);
    test_simd_vs_generic(PREC_FP16, AMPDIAG_ROUND_FTZ);
    test_simd_vs_generic(PREC_BF16, 0);
    test_simd_vs_generic(PREC_BF16_PURE, AMPDIAG_ROUND_FTZ);
    test_ftz_model();
    for (int k = 0; k < PREC_COUNT; k++)
        test_training((precision)k);
    return done_testing();
}
