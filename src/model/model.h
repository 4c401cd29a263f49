/*
 * model.h - a model: an ordered list of layers (layers.h) built from a spec, with one
 * contiguous parameter buffer, one gradient buffer and a forward/backward through a backend.
 *
 * Specs: the presets "mlp" and "transformer", or a text file (docs/model-spec.md, and the
 * comment at the top of model_spec.c). Layers run in list order in the forward and in reverse
 * order in the backward; the list is also the order of the trace's /layers table.
 *
 * Typical use:
 *   model_options o = model_options_default();
 *   o.spec = "mlp"; o.precision = PREC_FP16; o.input_dim = 32; o.classes = 10;
 *   model *m = model_create(&o, backend_cpu(), err, sizeof err);
 *   for each step:
 *     model_forward(m, x, NULL, y, B, &loss);      // x [B, 32] float, y [B] int32
 *     model_backward(m, loss_scale);               // gradients of loss * loss_scale
 *     ... optimizer over model_params(m) / model_grads(m); model_hold_params(m) ...
 *   model_free(m);
 */
#ifndef AMPDIAG_MODEL_H
#define AMPDIAG_MODEL_H

#include "backend/backend.h"
#include "model/layers.h"

#include "numerics/precision.h"

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------------- precision */

/* The policies (precision, PREC_*, precision_parse, precision_name, precision_format) are
 * numerics/precision.h: the reading side parses the same enum from a trace. */

/* ------------------------------------------------------------------------------- spec */

/* One layer line of an MLP-form spec. */
typedef struct spec_layer {
    layer_op op;                /* OP_LINEAR, OP_RELU, OP_GELU or OP_LAYERNORM */
    char name[LAYER_NAME_MAX];
    int out;                    /* linear: output features */
    int bias;                   /* linear: 1 unless "nobias" */
    int line;                   /* where it was written (0 for presets) */
} spec_layer;

typedef struct model_spec {
    int transformer;            /* 0: MLP form (input, layers, softmax_ce); 1: GPT-2 form */
    int input_dim;              /* MLP: features per example */
    spec_layer *layers;         /* MLP: the layers before the loss */
    int nlayers, cap;
    int vocab, ctx, d_model, n_layer, n_head, d_ff; /* transformer */
    int preset;                 /* 1 when built in: the data's shapes replace the defaults */
} model_spec;

/* Parse a spec text; fname names it in messages ("FILE:LINE: expected ..."). 0 or -1. */
int model_spec_parse(model_spec *s, const char *text, const char *fname, char *err,
                     size_t errlen);
/* A preset ("mlp", "transformer") or else a spec file. 0, or -1 with a message. */
int model_spec_load(model_spec *s, const char *spec, char *err, size_t errlen);
void model_spec_free(model_spec *s);

/* ------------------------------------------------------------------------------- model */

typedef struct model_options {
    const char *spec;        /* "mlp" (when NULL), "transformer", or a spec file path */
    const char *spec_text;   /* or the text of a spec (used instead of spec when not NULL) */
    precision precision;
    unsigned round_flags;    /* AMPDIAG_ROUND_FTZ: flush subnormals wherever F is rounded */
    const char *fp32_layers; /* comma-separated layer names or fnmatch patterns kept in FP32 */
    uint64_t seed;           /* initialisation */
    /* What the data says; 0 keeps the preset's default (mlp: 32 features, 10 classes;
     * transformer: vocab 64, ctx 32). A spec file must agree with the non-zero ones. */
    int input_dim, classes;  /* MLP form */
    int vocab, ctx;          /* transformer */
} model_options;

model_options model_options_default(void);

typedef enum model_tensor_kind {
    MT_ACTIVATION,      /* the layer's output */
    MT_ACTIVATION_GRAD, /* the gradient w.r.t. the layer's output (after a backward) */
    MT_WEIGHT,          /* all of the layer's parameters (weight then bias), master values */
    MT_WEIGHT_GRAD,     /* their gradients */
    MT_COUNT
} model_tensor_kind;

typedef struct model {
    int transformer;      /* input is tokens [B, T] (else features [B, input_dim]) */
    int input_dim;        /* MLP: features per example */
    int classes;          /* MLP: classes; transformer: vocabulary size */
    int T;                /* positions per example (1 for an MLP) */
    precision prec;
    const backend *bk;

    layer *layers;        /* [nlayers] in forward order; the last is the softmax_ce loss */
    int nlayers;
    act *acts;            /* [nacts] activations: the MLP's input, then one output per layer */
    int nacts;

    float *params;        /* [nparams] every parameter, layer after layer (master copy) */
    float *params_c;      /* [nparams] compute copy rounded to F (== params when not needed) */
    int copy_fresh;       /* params_c holds the current params rounded (model_copy_written) */
    float *grads;         /* [nparams] */
    size_t nparams;

    layer_ctx ctx;        /* shared by the layers during a step */
    int cap_B;            /* batch size the buffers are allocated for */
    int32_t *tokens_d;    /* [cap_B, T] backend copies of the inputs */
    int32_t *targets_d;   /* [cap_B * T] */
    float *scratch;
    int have_targets;     /* the last forward computed the loss */
    float loss;
    char err[256];
} model;

/* Build and initialise a model (deterministic in the seed; the same FP32 initial weights for
 * every precision; under bf16-pure they are then rounded to BF16). Returns NULL with a message
 * in err (file:line for spec files, the unknown name for --fp32-layers). */
model *model_create(const model_options *o, const backend *bk, char *err, size_t errlen);
void model_free(model *m);

/*
 * Forward pass on B examples (host memory): x [B, input_dim] for an MLP or tokens [B, T] for
 * a transformer (the other NULL); targets [B] (MLP) or [B, T] (transformer, the next tokens),
 * or NULL to skip the loss. *loss (may be NULL) := the mean cross-entropy, NaN without
 * targets. Returns 0, or -1 (bad argument, token or target out of range, out of memory) with
 * model_error(m). Buffers grow to the largest B seen.
 */
int model_forward(model *m, const float *x, const int32_t *tokens, const int32_t *targets,
                  int B, float *loss);
/* Backward pass of the last forward (which must have had targets): the gradients of
 * loss * loss_scale land in model_grads (overwritten, not accumulated) and in each layer's
 * output gradient. Non-finite values propagate as they would on a GPU. 0, or -1. */
int model_backward(model *m, float loss_scale);
const char *model_error(const model *m);

/* Round the master parameters to the format they are stored in: BF16 under bf16-pure (call it
 * after each optimizer update, or any change of the parameters; model_create already did it),
 * nothing otherwise. Marks the compute copy stale. */
void model_hold_params(model *m);

/* The compute copy the 16-bit GEMMs read (the master parameters rounded to F, [nparams]), NULL
 * when the GEMMs read the master parameters themselves. A forward pass rounds the master
 * parameters into it, unless model_copy_written said that the optimizer wrote it as it updated
 * them (optim_update's w_copy, for every parameter): the next forward then reads it as it is. */
float *model_compute_copy(model *m);
void model_copy_written(model *m);

int model_nlayers(const model *m);
const layer *model_layer(const model *m, int i);
int model_find_layer(const model *m, const char *name); /* index or -1 */
float *model_params(model *m);
float *model_grads(model *m);
size_t model_nparams(const model *m);
/* The batch size of the last forward (0 before any). */
int model_batch(const model *m);
/* Logits [rows, cols] of the last forward (rows = B*T). */
const float *model_logits(const model *m, int *rows, int *cols);

/* The tensor of a kind for layer i after the last forward/backward (backend memory), with its
 * element count; NULL and 0 where the layer has none (a ReLU has no weights; the loss layer no
 * output gradient). */
float *model_tensor(model *m, int i, model_tensor_kind kind, size_t *count);
const char *model_tensor_kind_name(model_tensor_kind kind);

/* The first layer, in forward execution order, whose output holds a NaN or inf; -1 if none. */
int model_first_nonfinite_activation(const model *m);
/* The first layer, in backward execution order (from the loss back: a layer's output
 * gradient, then its parameter gradients, then the layer before), holding a non-finite
 * gradient; *kind (may be NULL) := MT_ACTIVATION_GRAD or MT_WEIGHT_GRAD. -1 if none. */
int model_first_nonfinite_gradient(const model *m, model_tensor_kind *kind);

/* GEMM floating-point operations of one forward + backward at batch size B. */
double model_gemm_flops(const model *m, int B);

#endif /* AMPDIAG_MODEL_H */
