/*
 * layers_ref.c - double-precision reference layers (see layers_ref.h).
 */
#include "layers_ref.h"

#include <math.h>
#include <stdlib.h>

void ref_linear(double *y, const double *x, const double *w, const double *b, int N, int C,
                int OC)
{
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < C; i++)
                s += x[(size_t)n * C + i] * w[(size_t)o * C + i];
            y[(size_t)n * OC + o] = s;
        }
}

void ref_relu(double *y, const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0 ? x[i] : 0.0;
}

void ref_gelu(double *y, const double *x, size_t n)
{
    const double k = sqrt(2.0 / M_PI);
    for (size_t i = 0; i < n; i++)
        y[i] = 0.5 * x[i] * (1.0 + tanh(k * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
}

void ref_layernorm(double *y, const double *x, const double *w, const double *b, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const double *r = x + (size_t)n * C;
        double m = 0.0, v = 0.0;
        for (int i = 0; i < C; i++)
            m += r[i];
        m /= C;
        for (int i = 0; i < C; i++)
            v += (r[i] - m) * (r[i] - m);
        v /= C; /* biased, as PyTorch */
        double s = 1.0 / sqrt(v + 1e-5);
        for (int i = 0; i < C; i++)
            y[(size_t)n * C + i] = (r[i] - m) * s * w[i] + b[i];
    }
}

void ref_add(double *y, const double *a, const double *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

void ref_embedding(double *y, const int32_t *tokens, const double *wte, const double *wpe, int B,
                   int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t bt = (size_t)b * T + t;
            for (int i = 0; i < C; i++)
                y[bt * C + i] = wte[(size_t)tokens[bt] * C + i] + wpe[(size_t)t * C + i];
        }
}

void ref_attention(double *y, const double *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    double *p = malloc((size_t)T * sizeof *p);
    if (!p)
        abort();
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const double *q = qkv + ((size_t)b * T + t) * 3 * C + (size_t)h * hs;
                double mx = -INFINITY, sum = 0.0;
                for (int u = 0; u <= t; u++) { /* causal: keys at u <= t only */
                    const double *k = qkv + ((size_t)b * T + u) * 3 * C + C + (size_t)h * hs;
                    double s = 0.0;
                    for (int i = 0; i < hs; i++)
                        s += q[i] * k[i];
                    p[u] = s * scale;
                    mx = p[u] > mx ? p[u] : mx;
                }
                for (int u = 0; u <= t; u++) {
                    p[u] = exp(p[u] - mx);
                    sum += p[u];
                }
                double *o = y + ((size_t)b * T + t) * C + (size_t)h * hs;
                for (int i = 0; i < hs; i++) {
                    double s = 0.0;
                    for (int u = 0; u <= t; u++) {
                        const double *v = qkv + ((size_t)b * T + u) * 3 * C + 2 * C + (size_t)h * hs;
                        s += p[u] / sum * v[i];
                    }
                    o[i] = s;
                }
            }
    free(p);
}

void ref_softmax_ce(double *losses, const double *logits, const int32_t *targets, int N, int V)
{
    for (int n = 0; n < N; n++) {
        const double *l = logits + (size_t)n * V;
        double mx = -INFINITY, sum = 0.0;
        for (int i = 0; i < V; i++)
            mx = l[i] > mx ? l[i] : mx;
        for (int i = 0; i < V; i++)
            sum += exp(l[i] - mx);
        losses[n] = log(sum) + mx - l[targets[n]];
    }
}

int ref_act_index(const ref_graph *g, const act *a) { return a ? (int)(a - g->acts) : -1; }

double ref_graph_run(const ref_graph *g, double **xs, const double *pd)
{
    int N = g->B * g->T;
    double loss = 0.0;
    for (int li = 0; li < g->nlayers; li++) {
        const layer *L = &g->layers[li];
        const double *x = L->in ? xs[ref_act_index(g, L->in)] : NULL;
        const double *x2 = L->in2 ? xs[ref_act_index(g, L->in2)] : NULL;
        double *y = xs[ref_act_index(g, L->out)];
        const double *p = L->nparams ? pd + (L->p - g->pbase) : NULL;
        size_t n = (size_t)N * (size_t)L->in_dim;
        switch (L->op) {
        case OP_LINEAR:
            ref_linear(y, x, p, L->bias ? p + (size_t)L->out_dim * L->in_dim : NULL, N, L->in_dim,
                       L->out_dim);
            break;
        case OP_RELU: ref_relu(y, x, n); break;
        case OP_GELU: ref_gelu(y, x, n); break;
        case OP_LAYERNORM: ref_layernorm(y, x, p, p + L->in_dim, N, L->in_dim); break;
        case OP_RESIDUAL: ref_add(y, x, x2, n); break;
        case OP_EMBEDDING:
            ref_embedding(y, g->tokens, p, p + (size_t)L->in_dim * L->out_dim, g->B, g->T,
                          L->out_dim);
            break;
        case OP_ATTENTION: ref_attention(y, x, g->B, g->T, L->out_dim, L->heads); break;
        case OP_SOFTMAX_CE:
            ref_softmax_ce(y, x, g->targets, N, L->in_dim);
            loss = 0.0;
            for (int i = 0; i < N; i++)
                loss += y[i];
            loss /= N;
            break;
        default: abort();
        }
    }
    return loss;
}
