/*
 * model.c - build a model from a spec, initialise it, run its forward and backward, and let
 * the training loop look at every layer's tensors.
 *
 * Memory (llm.c style): one parameter buffer, one gradient buffer and one compute copy of the
 * parameters rounded to F (16-bit policies with FP32 master weights only), each carved into
 * per-layer views; one buffer per activation and per activation gradient, sized for the
 * largest batch seen so far.
 */
#include "model/model.h"
#include "util/rng.h"
#include "util/util.h"

#include <fnmatch.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MODEL_MAX_PARAMS ((size_t)1 << 31)

model_options model_options_default(void)
{
    model_options o;
    memset(&o, 0, sizeof o);
    o.spec = "mlp";
    o.precision = PREC_FP32;
    o.seed = 1;
    return o;
}

/* ------------------------------------------------------------------------------- errors */


#define MERR(m, ...) (errf((m)->err, sizeof (m)->err, __VA_ARGS__), -1)

const char *model_error(const model *m) { return m->err; }

/* ------------------------------------------------------------------------------- building */

/* Append a layer reading `in` (and `in2`) and give it a new output activation. */
static layer *add_layer(model *m, layer_op op, const char *name, act *in, act *in2, int in_dim,
                        int out_dim, int extra)
{
    layer *L = &m->layers[m->nlayers];
    if (layer_configure(L, op, name, in_dim, out_dim, extra))
        return NULL;
    act *out = &m->acts[m->nacts++];
    memset(out, 0, sizeof *out);
    out->dim = L->out_dim;
    out->needs_grad = op != OP_SOFTMAX_CE;
    L->in = in;
    L->in2 = in2;
    L->out = out;
    m->nlayers++;
    return L;
}

static int alloc_graph(model *m, int nlayers, int nacts)
{
    m->layers = calloc((size_t)nlayers, sizeof *m->layers);
    m->acts = calloc((size_t)nacts, sizeof *m->acts);
    return m->layers && m->acts ? 0 : -1;
}

static int build_mlp(model *m, const model_spec *s)
{
    if (alloc_graph(m, s->nlayers + 1, s->nlayers + 2))
        return MERR(m, "out of memory");
    act *x = &m->acts[m->nacts++]; /* the input data [B, D]: held in FP32, no gradient */
    x->dim = s->input_dim;
    x->fmt = AMPDIAG_FP32;
    for (int i = 0; i < s->nlayers; i++) {
        const spec_layer *sl = &s->layers[i];
        int out = sl->op == OP_LINEAR ? sl->out : x->dim;
        layer *L = add_layer(m, sl->op, sl->name, x, NULL, x->dim, out, sl->bias);
        if (!L)
            return MERR(m, "layer '%s': impossible shape %d -> %d", sl->name, x->dim, out);
        x = L->out;
    }
    if (!add_layer(m, OP_SOFTMAX_CE, "loss", x, NULL, x->dim, 1, 0))
        return MERR(m, "loss: impossible shape");
    m->input_dim = s->input_dim;
    m->classes = x->dim;
    m->T = 1;
    return 0;
}

/* GPT-2: embedding, blocks of [ln1, attn (qkv, sdpa, proj), res1, ln2, mlp (fc, gelu, proj),
 * res2], ln_f, lm_head (its own weights: not tied to wte), loss. */
static int build_transformer(model *m, const model_spec *s)
{
    int C = s->d_model, V = s->vocab, T = s->ctx, FF = s->d_ff ? s->d_ff : 4 * C;
    int nlayers = 1 + 10 * s->n_layer + 3;
    if (alloc_graph(m, nlayers, nlayers))
        return MERR(m, "out of memory");
    char nm[LAYER_NAME_MAX];
    layer *L = add_layer(m, OP_EMBEDDING, "embed", NULL, NULL, V, C, T);
    if (!L)
        return MERR(m, "embed: impossible shape");
    act *x = L->out; /* the residual stream [B, T, C] */
#define ADD(op, in, in2, in_dim, out_dim, extra, ...)                                          \
    do {                                                                                        \
        snprintf(nm, sizeof nm, __VA_ARGS__);                                                   \
        if (!(L = add_layer(m, op, nm, in, in2, in_dim, out_dim, extra)))                       \
            return MERR(m, "%s: impossible shape", nm);                                         \
    } while (0)
    for (int l = 0; l < s->n_layer; l++) {
        ADD(OP_LAYERNORM, x, NULL, C, C, 0, "h%d.ln1", l);
        ADD(OP_LINEAR, L->out, NULL, C, 3 * C, 1, "h%d.attn.qkv", l);
        ADD(OP_ATTENTION, L->out, NULL, 3 * C, C, s->n_head, "h%d.attn.sdpa", l);
        ADD(OP_LINEAR, L->out, NULL, C, C, 1, "h%d.attn.proj", l);
        ADD(OP_RESIDUAL, x, L->out, C, C, 0, "h%d.res1", l);
        x = L->out;
        ADD(OP_LAYERNORM, x, NULL, C, C, 0, "h%d.ln2", l);
        ADD(OP_LINEAR, L->out, NULL, C, FF, 1, "h%d.mlp.fc", l);
        ADD(OP_GELU, L->out, NULL, FF, FF, 0, "h%d.mlp.gelu", l);
        ADD(OP_LINEAR, L->out, NULL, FF, C, 1, "h%d.mlp.proj", l);
        ADD(OP_RESIDUAL, x, L->out, C, C, 0, "h%d.res2", l);
        x = L->out;
    }
    ADD(OP_LAYERNORM, x, NULL, C, C, 0, "ln_f");
    ADD(OP_LINEAR, L->out, NULL, C, V, 0, "lm_head");
    ADD(OP_SOFTMAX_CE, L->out, NULL, V, 1, 0, "loss");
#undef ADD
    m->transformer = 1;
    m->classes = V;
    m->T = T;
    return 0;
}

/* Put the data's shapes into a preset, or check that a spec file agrees with them. */
static int apply_data_shapes(model_spec *s, const model_options *o, const char *what, char *err,
                             size_t errlen)
{
    if (o->input_dim < 0 || o->classes < 0 || o->vocab < 0 || o->ctx < 0) {
        errf(err, errlen, "%s: negative data shape (features %d, classes %d, vocab %d, ctx %d)",
                what, o->input_dim, o->classes, o->vocab, o->ctx);
        return -1;
    }
    if (s->transformer) {
        if (s->preset) {
            s->vocab = o->vocab ? o->vocab : s->vocab;
            s->ctx = o->ctx ? o->ctx : s->ctx;
        } else if ((o->vocab && o->vocab != s->vocab) || (o->ctx && o->ctx != s->ctx)) {
            errf(err, errlen, "%s: the spec has vocab %d and ctx %d but the data has vocab %d "
                    "and ctx %d", what, s->vocab, s->ctx, o->vocab, o->ctx);
            return -1;
        }
        return 0;
    }
    int last = -1;
    for (int i = 0; i < s->nlayers; i++)
        if (s->layers[i].op == OP_LINEAR)
            last = i;
    if (s->preset) {
        s->input_dim = o->input_dim ? o->input_dim : s->input_dim;
        if (last >= 0 && o->classes)
            s->layers[last].out = o->classes;
        return 0;
    }
    int classes = s->input_dim;
    for (int i = 0; i < s->nlayers; i++)
        if (s->layers[i].op == OP_LINEAR)
            classes = s->layers[i].out;
    if (o->input_dim && o->input_dim != s->input_dim) {
        errf(err, errlen, "%s: the spec has input %d but the data has %d features", what,
                s->input_dim, o->input_dim);
        return -1;
    }
    if (o->classes && o->classes != classes) {
        errf(err, errlen, "%s: the spec's last layer gives %d classes but the data has %d",
                what, classes, o->classes);
        return -1;
    }
    return 0;
}

/* Mark the FP32 islands: every comma-separated item must match at least one layer. */
static int apply_fp32_layers(model *m, const char *list)
{
    if (!list || !*list)
        return 0;
    char *copy = strdup(list);
    if (!copy)
        return MERR(m, "out of memory");
    int rc = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item && !rc; item = strtok_r(NULL, ",", &save)) {
        while (*item == ' ')
            item++;
        size_t n = strlen(item);
        while (n && item[n - 1] == ' ')
            item[--n] = '\0';
        if (!n)
            continue;
        int hits = 0;
        for (int i = 0; i < m->nlayers; i++)
            if (fnmatch(item, m->layers[i].name, 0) == 0) {
                m->layers[i].fp32 = 1;
                hits++;
            }
        if (!hits) {
            char names[160] = "";
            for (int i = 0; i < m->nlayers && strlen(names) < sizeof names - 20; i++) {
                strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
                strncat(names, m->layers[i].name, sizeof names - strlen(names) - 1);
            }
            rc = MERR(m, "--fp32-layers: no layer matches '%s' (layers: %s%s)", item, names,
                      strlen(names) >= sizeof names - 20 ? ", ..." : "");
        }
    }
    free(copy);
    return rc;
}

/* ------------------------------------------------------------------------------- initialisation */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Fill one layer's parameters (host memory p [nparams]). */
static void init_layer(const model *m, const layer *L, float *p, rng *r, int n_block)
{
    switch (L->op) {
    case OP_LINEAR: {
        size_t nw = (size_t)L->out_dim * (size_t)L->in_dim;
        if (m->transformer) { /* GPT-2: N(0, 0.02), residual projections / sqrt(2 n_layer) */
            double sd = 0.02;
            if (ends_with(L->name, ".proj"))
                sd /= sqrt(2.0 * n_block);
            for (size_t i = 0; i < nw; i++)
                p[i] = (float)(sd * rng_normal(r));
            for (size_t i = nw; i < L->nparams; i++)
                p[i] = 0.0f;
        } else { /* PyTorch's nn.Linear: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias */
            double k = 1.0 / sqrt((double)L->in_dim);
            for (size_t i = 0; i < L->nparams; i++)
                p[i] = (float)(k * (2.0 * rng_uniform(r) - 1.0));
        }
        break;
    }
    case OP_LAYERNORM:
        for (int i = 0; i < L->in_dim; i++) {
            p[i] = 1.0f;
            p[L->in_dim + i] = 0.0f;
        }
        break;
    case OP_EMBEDDING:
        for (size_t i = 0; i < L->nparams; i++)
            p[i] = (float)(0.02 * rng_normal(r));
        break;
    default:
        break;
    }
}

static int init_params(model *m, uint64_t seed, int n_block)
{
    const backend *bk = m->bk;
    float *host = malloc(m->nparams * sizeof *host);
    if (!host)
        return MERR(m, "out of memory (%zu parameters)", m->nparams);
    rng r = {seed};
    size_t off = 0;
    for (int i = 0; i < m->nlayers; i++) {
        init_layer(m, &m->layers[i], host + off, &r, n_block);
        off += m->layers[i].nparams;
    }
    bk->to_device(bk, m->params, host, m->nparams * sizeof *host);
    free(host);
    model_hold_params(m);
    return 0;
}

static int alloc_params(model *m)
{
    const backend *bk = m->bk;
    size_t n = 0;
    for (int i = 0; i < m->nlayers; i++)
        n += m->layers[i].nparams;
    if (n > MODEL_MAX_PARAMS)
        return MERR(m, "model too large: %zu parameters (at most %zu)", n, MODEL_MAX_PARAMS);
    m->nparams = n;
    size_t bytes = (n ? n : 1) * sizeof(float);
    m->params = bk->alloc(bk, bytes);
    m->grads = bk->alloc(bk, bytes);
    int copy = m->ctx.fmt != AMPDIAG_FP32 && !m->ctx.pure;
    m->params_c = copy ? bk->alloc(bk, bytes) : m->params;
    if (!m->params || !m->grads || !m->params_c)
        return MERR(m, "out of memory (%zu parameters)", n);
    size_t off = 0;
    for (int i = 0; i < m->nlayers; i++) {
        layer *L = &m->layers[i];
        layer_bind(L, m->params + off, m->params_c + off, m->grads + off);
        off += L->nparams;
    }
    return 0;
}

model *model_create(const model_options *o, const backend *bk, char *err, size_t errlen)
{
    model_spec s;
    const char *what = o->spec_text ? "(spec text)" : o->spec ? o->spec : "mlp";
    if ((int)o->precision < 0 || o->precision >= PREC_COUNT) {
        errf(err, errlen, "unknown precision policy %d", (int)o->precision);
        return NULL;
    }
    if (o->spec_text ? model_spec_parse(&s, o->spec_text, "(spec text)", err, errlen)
                     : model_spec_load(&s, o->spec, err, errlen))
        return NULL;
    if (apply_data_shapes(&s, o, what, err, errlen)) {
        model_spec_free(&s);
        return NULL;
    }
    model *m = calloc(1, sizeof *m);
    if (!m) {
        model_spec_free(&s);
        errf(err, errlen, "out of memory");
        return NULL;
    }
    m->bk = bk;
    m->prec = o->precision;
    m->ctx.bk = bk;
    m->ctx.fmt = precision_format(o->precision);
    m->ctx.flags = o->round_flags;
    m->ctx.pure = o->precision == PREC_BF16_PURE;
    m->ctx.loss_scale = 1.0f;
    int rc = s.transformer ? build_transformer(m, &s) : build_mlp(m, &s);
    if (!rc)
        rc = apply_fp32_layers(m, o->fp32_layers);
    if (!rc) {
        for (int i = 0; i < m->nlayers; i++)
            layer_plan(&m->layers[i], &m->ctx);
        rc = alloc_params(m);
    }
    if (!rc)
        rc = init_params(m, o->seed, s.transformer ? s.n_layer : 0);
    model_spec_free(&s);
    if (rc) {
        errf(err, errlen, "%s", m->err);
        model_free(m);
        return NULL;
    }
    return m;
}

static void free_batch_buffers(model *m)
{
    const backend *bk = m->bk;
    for (int i = 0; i < m->nacts; i++)
        act_free(&m->acts[i], bk);
    for (int i = 0; i < m->nlayers; i++)
        layer_free(&m->layers[i], bk);
    bk->free(bk, m->tokens_d);
    bk->free(bk, m->targets_d);
    bk->free(bk, m->scratch);
    m->tokens_d = m->targets_d = NULL;
    m->scratch = NULL;
    m->cap_B = 0;
}

void model_free(model *m)
{
    if (!m)
        return;
    const backend *bk = m->bk;
    if (m->acts && m->layers)
        free_batch_buffers(m);
    if (m->params_c != m->params)
        bk->free(bk, m->params_c);
    bk->free(bk, m->params);
    bk->free(bk, m->grads);
    free(m->layers);
    free(m->acts);
    free(m);
}

void model_hold_params(model *m)
{
    m->copy_fresh = 0;
    if (m->ctx.pure)
        m->bk->round(m->bk, m->params, m->params, m->nparams,
                     bk_rnd_make(m->ctx.fmt, m->ctx.flags));
}

float *model_compute_copy(model *m) { return m->params_c != m->params ? m->params_c : NULL; }

void model_copy_written(model *m) { m->copy_fresh = m->params_c != m->params; }

/* ------------------------------------------------------------------------------- forward */

static int ensure_capacity(model *m, int B)
{
    if (B <= m->cap_B)
        return 0;
    const backend *bk = m->bk;
    free_batch_buffers(m);
    size_t rows = (size_t)B * (size_t)m->T, need = 1;
    int fail = 0;
    for (int i = 0; i < m->nacts && !fail; i++)
        fail = act_alloc(&m->acts[i], bk, rows);
    for (int i = 0; i < m->nlayers && !fail; i++) {
        fail = layer_alloc(&m->layers[i], bk, B, m->T);
        size_t k = layer_scratch_need(&m->layers[i], B, m->T);
        need = k > need ? k : need;
    }
    if (!fail) {
        m->scratch = bk->alloc(bk, need * sizeof(float));
        m->targets_d = bk->alloc(bk, rows * sizeof(int32_t));
        m->tokens_d = m->transformer ? bk->alloc(bk, rows * sizeof(int32_t)) : NULL;
        fail = !m->scratch || !m->targets_d || (m->transformer && !m->tokens_d);
    }
    if (fail) {
        free_batch_buffers(m);
        return MERR(m, "out of memory for batch size %d", B);
    }
    m->cap_B = B;
    m->ctx.scratch = m->scratch;
    return 0;
}

static int check_range(model *m, const int32_t *v, size_t n, int limit, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] < 0 || v[i] >= limit)
            return MERR(m, "%s %ld at position %zu is outside [0, %d)", what, (long)v[i], i,
                        limit);
    return 0;
}

int model_forward(model *m, const float *x, const int32_t *tokens, const int32_t *targets,
                  int B, float *loss)
{
    const backend *bk = m->bk;
    if (loss)
        *loss = NAN;
    m->have_targets = 0;
    if (B <= 0 || B > INT_MAX / m->T / 4)
        return MERR(m, "batch size %d is out of range", B);
    if (m->transformer ? !tokens : !x)
        return MERR(m, m->transformer ? "a transformer reads tokens [B, T]"
                                      : "an MLP reads features x [B, D]");
    size_t rows = (size_t)B * (size_t)m->T;
    if (m->transformer && check_range(m, tokens, rows, m->classes, "token"))
        return -1;
    if (targets && check_range(m, targets, rows, m->classes, "target"))
        return -1;
    if (ensure_capacity(m, B))
        return -1;
    if (m->transformer)
        bk->to_device(bk, m->tokens_d, tokens, rows * sizeof *tokens);
    else
        bk->to_device(bk, m->acts[0].x, x, rows * (size_t)m->input_dim * sizeof *x);
    if (targets)
        bk->to_device(bk, m->targets_d, targets, rows * sizeof *targets);
    m->ctx.B = B;
    m->ctx.T = m->T;
    m->ctx.tokens = m->tokens_d;
    m->ctx.targets = m->targets_d;
    if (m->params_c != m->params && !m->copy_fresh) /* the GEMMs' F copy of the FP32 master weights */
        bk->round(bk, m->params_c, m->params, m->nparams, bk_rnd_make(m->ctx.fmt, m->ctx.flags));
    m->copy_fresh = 0; /* (used once: whatever changes the parameters next need not say so) */
    int n = targets ? m->nlayers : m->nlayers - 1;
    for (int i = 0; i < n; i++)
        layer_forward(&m->layers[i], &m->ctx);
    if (targets) {
        const act *losses = m->layers[m->nlayers - 1].out; /* [B*T] */
        m->loss = (float)(bk->sum(bk, losses->x, rows) / (double)rows);
        m->have_targets = 1;
        if (loss)
            *loss = m->loss;
    }
    return 0;
}

int model_backward(model *m, float loss_scale)
{
    if (!m->have_targets)
        return MERR(m, "model_backward needs a forward with targets first");
    m->ctx.loss_scale = loss_scale;
    for (int i = 0; i < m->nacts; i++)
        m->acts[i].dx_ready = 0;
    for (int i = m->nlayers - 1; i >= 0; i--)
        layer_backward(&m->layers[i], &m->ctx);
    return 0;
}

/* ------------------------------------------------------------------------------- access */

int model_nlayers(const model *m) { return m->nlayers; }

const layer *model_layer(const model *m, int i)
{
    return i >= 0 && i < m->nlayers ? &m->layers[i] : NULL;
}

int model_find_layer(const model *m, const char *name)
{
    for (int i = 0; i < m->nlayers; i++)
        if (strcmp(m->layers[i].name, name) == 0)
            return i;
    return -1;
}

float *model_params(model *m) { return m->params; }
float *model_grads(model *m) { return m->grads; }
size_t model_nparams(const model *m) { return m->nparams; }
int model_batch(const model *m) { return m->ctx.B; }

const float *model_logits(const model *m, int *rows, int *cols)
{
    const act *logits = m->layers[m->nlayers - 1].in;
    if (rows)
        *rows = m->ctx.B * m->T;
    if (cols)
        *cols = logits->dim;
    return logits->x;
}

static float *tensor_view(const model *m, int i, model_tensor_kind kind, size_t *count)
{
    size_t n = 0;
    float *p = NULL;
    if (i >= 0 && i < m->nlayers) {
        const layer *L = &m->layers[i];
        size_t rows = (size_t)m->ctx.B * (size_t)m->T;
        switch (kind) {
        case MT_ACTIVATION: p = L->out->x; n = rows * (size_t)L->out->dim; break;
        case MT_ACTIVATION_GRAD: p = L->out->dx; n = rows * (size_t)L->out->dim; break;
        case MT_WEIGHT: p = L->p; n = L->nparams; break;
        case MT_WEIGHT_GRAD: p = L->g; n = L->nparams; break;
        default: break;
        }
    }
    if (!p || !n) {
        p = NULL;
        n = 0;
    }
    if (count)
        *count = n;
    return p;
}

float *model_tensor(model *m, int i, model_tensor_kind kind, size_t *count)
{
    return tensor_view(m, i, kind, count);
}

const char *model_tensor_kind_name(model_tensor_kind kind)
{
    static const char *const names[MT_COUNT] = {"activation", "activation gradient", "weight",
                                                "weight gradient"};
    return (int)kind >= 0 && kind < MT_COUNT ? names[kind] : "?";
}

static int has_nonfinite(const model *m, int i, model_tensor_kind kind)
{
    size_t n;
    const float *p = tensor_view(m, i, kind, &n);
    return p && m->bk->count_nonfinite(m->bk, p, n) > 0;
}

int model_first_nonfinite_activation(const model *m)
{
    for (int i = 0; i < m->nlayers; i++)
        if (has_nonfinite(m, i, MT_ACTIVATION))
            return i;
    return -1;
}

int model_first_nonfinite_gradient(const model *m, model_tensor_kind *kind)
{
    static const model_tensor_kind order[2] = {MT_ACTIVATION_GRAD, MT_WEIGHT_GRAD};
    for (int i = m->nlayers - 1; i >= 0; i--)
        for (int k = 0; k < 2; k++)
            if (has_nonfinite(m, i, order[k])) {
                if (kind)
                    *kind = order[k];
                return i;
            }
    return -1;
}

double model_gemm_flops(const model *m, int B)
{
    double f = 0.0;
    for (int i = 0; i < m->nlayers; i++)
        f += layer_gemm_flops(&m->layers[i], B, m->T);
    return f;
}
