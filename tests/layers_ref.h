/*
 * layers_ref.h - double-precision reference forwards of every layer, written independently of
 * the backend (plain loops, the textbook formulas), and an interpreter that runs a layer graph
 * (a model's, or a test's) in double. The tests differentiate these numerically and compare
 * with the C backward.
 */
#ifndef AMPDIAG_LAYERS_REF_H
#define AMPDIAG_LAYERS_REF_H

#include "model/layers.h"

#include <stddef.h>
#include <stdint.h>

void ref_linear(double *y, const double *x, const double *w, const double *b, int N, int C,
                int OC);
void ref_relu(double *y, const double *x, size_t n);
void ref_gelu(double *y, const double *x, size_t n);
void ref_layernorm(double *y, const double *x, const double *w, const double *b, int N, int C);
void ref_add(double *y, const double *a, const double *b, size_t n);
void ref_embedding(double *y, const int32_t *tokens, const double *wte, const double *wpe, int B,
                   int T, int C);
void ref_attention(double *y, const double *qkv, int B, int T, int C, int NH);
/* Per-row -log softmax(logits)[target]. */
void ref_softmax_ce(double *losses, const double *logits, const int32_t *targets, int N, int V);

/* A graph of layers whose acts live in one array (as model.c and the tests build them). */
typedef struct ref_graph {
    const layer *layers;
    int nlayers;
    const act *acts;   /* act index = pointer - acts */
    int nacts;
    const float *pbase; /* parameter offsets are L->p - pbase */
    int B, T;
    const int32_t *tokens;  /* host memory */
    const int32_t *targets;
} ref_graph;

/* Run the graph in double. xs[a] holds act a's values (callers fill the graph's input act and
 * allocate every xs[a] with rows * dim doubles); params are in pd (same layout as the float
 * buffer). Returns the mean loss when the last layer is softmax_ce, else 0. */
double ref_graph_run(const ref_graph *g, double **xs, const double *pd);
int ref_act_index(const ref_graph *g, const act *a);

#endif
