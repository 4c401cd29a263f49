/*
 * fuzz_model_spec.c - libFuzzer target: model spec files (src/model/model_spec.c), read from a
 * file as `ampdiag run --model FILE` reads them. A spec that parses and describes a small model
 * is also built (model_create checks what the parser leaves to it).
 */
#include "backend/backend.h"
#include "model/model.h"

#include "fuzz_file.h"

/* Parameters the spec's model would have, roughly; models above a limit are not built (a spec
 * may legitimately ask for gigabytes: that is the user's own model, not a reader's risk). */
static double spec_params(const model_spec *s)
{
    if (s->transformer) {
        double d = s->d_model, ff = s->d_ff > 0 ? s->d_ff : 4.0 * d;
        return (double)(s->vocab + s->ctx) * d + s->n_layer * (4 * d * d + 2 * d * ff) +
               (double)s->ctx * s->ctx * s->n_head;
    }
    double p = 0, in = s->input_dim;
    for (int i = 0; i < s->nlayers; i++) {
        if (s->layers[i].op == OP_LINEAR) {
            p += in * s->layers[i].out + s->layers[i].out;
            in = s->layers[i].out;
        }
        p += in; /* activations */
    }
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write(data, size, ".txt");
    if (!path)
        return 0;
    model_spec s;
    char err[512];
    if (model_spec_load(&s, path, err, sizeof err) != 0)
        return 0;
    double p = spec_params(&s);
    model_spec_free(&s);
    if (p > 1e5)
        return 0;
    model_options o = model_options_default();
    o.spec = path;
    model *m = model_create(&o, backend_cpu(), err, sizeof err);
    model_free(m);
    return 0;
}
