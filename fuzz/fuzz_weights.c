/*
 * fuzz_weights.c - libFuzzer target: weights files (src/train/weights.c), read into a small MLP
 * as `ampdiag run --init-from FILE` reads them (fuzz/corpus/weights holds files of this model).
 */
#include "backend/backend.h"
#include "model/model.h"
#include "train/weights.h"

#include "fuzz_file.h"

/* the model the seed files were written for (tests/t_regress.sh builds the same) */
#define FUZZ_WEIGHTS_SPEC "input 32\nlinear fc1 3\nrelu\nlayernorm\nlinear fc2 10\nloss softmax_ce\n"

static model *the_model(void)
{
    static model *m;
    if (!m) {
        model_options o = model_options_default();
        char err[256];
        o.spec_text = FUZZ_WEIGHTS_SPEC;
        if (!(m = model_create(&o, backend_cpu(), err, sizeof err))) {
            fprintf(stderr, "fuzz_weights: %s\n", err);
            abort();
        }
    }
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write(data, size, ".h5");
    if (!path)
        return 0;
    char err[512];
    (void)weights_load(the_model(), path, err, sizeof err);
    return 0;
}
