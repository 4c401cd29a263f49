/*
 * example.c - a program built against the installed libampdiag through pkg-config
 * (tests/t_install.sh, from `make check` on a staged install and from `make installcheck`).
 *
 * It uses only the installed headers: writes a tiny trace through the public API (a layer, a
 * step record, a tensor record with statistics computed by the library), reads it back and
 * checks the values. Usage: example FILE.h5; exit 0 when every value reads back as written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ampdiag.h>
#include <ampdiag_trace.h>

static int failures;

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "example: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)

#define TRY(call)                                                                           \
    do {                                                                                    \
        int rc_ = (call);                                                                   \
        if (rc_ < 0) {                                                                      \
            fprintf(stderr, "example: %s failed: %s (%s)\n", #call,                        \
                    ampdiag_trace_strerror(rc_), ampdiag_trace_errmsg());                   \
            return 1;                                                                       \
        }                                                                                   \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: example FILE.h5\n");
        return 2;
    }
    const char *path = argv[1];

    /* statistics of 4 values: 70000 overflows FP16, 1e-8 underflows it */
    const float x[4] = {70000.0f, -2.0f, 0.0f, 1e-8f};
    ampdiag_tstats st;
    ampdiag_tstats_compute(x, 4, &st, NULL);
    CHECK(st.count == 4 && st.n_zero == 1 && st.n_neg == 1 && st.n_pos == 2);
    CHECK(st.fp16_overflow == 1 && st.fp16_underflow == 1);
    CHECK(ampdiag_round(AMPDIAG_FP16, 65519.0f) == ampdiag_format_get(AMPDIAG_FP16)->max_finite);

    /* write */
    ampdiag_trace_options opt;
    ampdiag_trace_options_init(&opt);
    opt.overwrite = 1;
    ampdiag_trace_writer *w = NULL;
    TRY(ampdiag_trace_create(path, &opt, &w));
    TRY(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_PRECISION, "fp16"));
    int fc1 = ampdiag_trace_add_layer(w, "fc1", "linear", "[2, 2]", 6);
    TRY(fc1);
    TRY(ampdiag_trace_append_tensor(w, 0, fc1, AMPDIAG_KIND_ACTIVATION, &st, 0));
    ampdiag_trace_step rec;
    memset(&rec, 0, sizeof rec);
    rec.step = 0;
    rec.loss = 2.5;
    rec.loss_scale = 65536.0;
    rec.grad_norm = 1.25;
    rec.clip_coef = 1.0;
    rec.lr = 1e-3;
    TRY(ampdiag_trace_append_step(w, &rec));
    TRY(ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE));

    /* read back */
    ampdiag_trace_reader *r = NULL;
    TRY(ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET, &r));
    CHECK(ampdiag_trace_status_of(r) == AMPDIAG_STATUS_COMPLETE);
    CHECK(ampdiag_trace_format_version(r) == AMPDIAG_TRACE_FORMAT_VERSION);
    const char *prec = ampdiag_trace_attr_str(r, AMPDIAG_ATTR_PRECISION);
    CHECK(prec != NULL && strcmp(prec, "fp16") == 0);

    ampdiag_trace_layer *layers = NULL;
    size_t nl = 0;
    TRY(ampdiag_trace_read_layers(r, &layers, &nl));
    CHECK(nl == 1 && strcmp(layers[0].name, "fc1") == 0 && layers[0].params == 6);

    ampdiag_trace_step *steps = NULL;
    size_t ns = 0;
    TRY(ampdiag_trace_read_steps(r, &steps, &ns));
    CHECK(ns == 1 && steps[0].step == 0 && steps[0].loss == 2.5 && steps[0].loss_scale == 65536.0
          && steps[0].grad_norm == 1.25 && steps[0].lr == 1e-3 && steps[0].skipped == 0);

    ampdiag_trace_tensor *tens = NULL;
    size_t nt = 0;
    TRY(ampdiag_trace_read_tensors(r, 0, (size_t)-1, &tens, &nt));
    CHECK(nt == 1);
    if (nt == 1) {
        const ampdiag_trace_tensor *t = &tens[0];
        CHECK(t->layer == fc1 && t->kind == AMPDIAG_KIND_ACTIVATION && t->count == 4);
        CHECK(t->n_zero == 1 && t->n_neg == 1 && t->n_pos == 2 && t->n_nan == 0);
        CHECK(t->min == -2.0f && t->max == 70000.0f && t->absmax == 70000.0f
              && t->absmin_nz == 1e-8f);
        CHECK(t->fp16_overflow == 1 && t->fp16_underflow == 1 && t->bf16_overflow == 0);
        double dm = t->mean - (70000.0 - 2.0 + 1e-8) / 4; /* no libm: the link uses only pkg-config's */
        CHECK(dm < 1e-6 && dm > -1e-6);
    }
    free(layers);
    free(steps);
    free(tens);
    ampdiag_trace_reader_close(r);

    if (failures == 0)
        printf("example: wrote and read back %s with libampdiag %s\n", path, ampdiag_version());
    return failures == 0 ? 0 : 1;
}
