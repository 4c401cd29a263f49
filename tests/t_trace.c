/*
 * t_trace.c - the trace writer and reader round trip: every record type with exact values
 * (NaN, infinities, signed zeros, empty tensors, text cut at a UTF-8 boundary), attributes of
 * every type, status handling, batches larger than a chunk, flush policy, range reads, and the
 * errors of bad calls (EINVAL) against those of the file system (EIO, EEXIST).
 */
#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "tap.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[4096];

static const char *tpath(const char *name)
{
    static char buf[4][4200];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static int same_double(double a, double b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static int same_float(float a, float b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static int background; /* writers created with opt.background */

static ampdiag_trace_writer *create(const char *name, unsigned every, double secs)
{
    ampdiag_trace_options o;
    ampdiag_trace_options_init(&o);
    o.overwrite = 1;
    o.background = background;
    o.flush_every_steps = every;
    o.flush_seconds = secs;
    ampdiag_trace_writer *w = NULL;
    if (ampdiag_trace_create(tpath(name), &o, &w) != 0)
        diag("create %s: %s", name, ampdiag_trace_errmsg());
    return w;
}

static ampdiag_trace_reader *open_trace(const char *name)
{
    ampdiag_trace_reader *r = NULL;
    if (ampdiag_trace_open(tpath(name), AMPDIAG_TRACE_READ_QUIET, &r) != 0)
        diag("open %s: %s", name, ampdiag_trace_errmsg());
    return r;
}

static void test_names(void)
{
    int good = 1;
    for (int k = 0; k < AMPDIAG_NKINDS; k++)
        good &= ampdiag_kind_parse(ampdiag_kind_name(k)) == k;
    for (int c = 0; c < AMPDIAG_NEVENT_CODES; c++)
        good &= ampdiag_event_parse(ampdiag_event_name(c)) == c;
    for (int s = 0; s <= AMPDIAG_STATUS_INTERRUPTED; s++)
        good &= ampdiag_status_parse(ampdiag_status_name(s)) == s;
    ok(good, "kind, event and status names round-trip");
    ok(strcmp(ampdiag_kind_name(AMPDIAG_KIND_WEIGHT_GRAD), "weight_grad") == 0 &&
           strcmp(ampdiag_event_name(AMPDIAG_EV_SKIPPED), "skipped_step") == 0 &&
           strcmp(ampdiag_event_name(AMPDIAG_EV_NO_LOSS_SCALING), "no_loss_scaling") == 0 &&
           strcmp(ampdiag_event_name(AMPDIAG_EV_HIDDEN_SCALER), "hidden_scaler") == 0 &&
           strcmp(ampdiag_status_name(AMPDIAG_STATUS_INTERRUPTED), "interrupted") == 0,
       "stored names as documented");
    ok(!ampdiag_kind_name(AMPDIAG_NKINDS) && !ampdiag_kind_name(-1) &&
           !ampdiag_event_name(AMPDIAG_NEVENT_CODES) && !ampdiag_status_name(4) &&
           ampdiag_kind_parse("weights") == -1 && ampdiag_status_parse(NULL) == -1,
       "out-of-range names are NULL / -1");
    ok(ampdiag_trace_err_is_io(AMPDIAG_TRACE_EIO) && ampdiag_trace_err_is_io(AMPDIAG_TRACE_ENOMEM) &&
           !ampdiag_trace_err_is_io(AMPDIAG_TRACE_EINVAL) &&
           !ampdiag_trace_err_is_io(AMPDIAG_TRACE_ESCHEMA) &&
           !ampdiag_trace_err_is_io(AMPDIAG_TRACE_ENOTHDF5),
       "I/O errors are told apart from bad input");
    good = 1;
    for (int e = 0; e >= AMPDIAG_TRACE_ETRUNCATED; e--)
        good &= strcmp(ampdiag_trace_strerror(e), "unknown error") != 0;
    ok(good, "every error code has a name");
}

/* Statistics of a few arrays chosen for their corner cases. */
enum { NCASES = 6 };
static void make_case(int c, ampdiag_tstats *s)
{
    float a[8];
    size_t n = 0;
    switch (c) {
    case 0: /* ordinary values */
        a[0] = 1.5f; a[1] = -2.25f; a[2] = 0.0f; a[3] = 3e-6f; a[4] = 7.0f;
        n = 5;
        break;
    case 1: /* NaN only: no finite value */
        a[0] = NAN; a[1] = NAN;
        n = 2;
        break;
    case 2: /* zeros only: finite but no non-zero value */
        a[0] = -0.0f; a[1] = 0.0f; a[2] = -0.0f;
        n = 3;
        break;
    case 3: /* everything FP16 and BF16 cannot hold */
        a[0] = 70000.0f; a[1] = -INFINITY; a[2] = INFINITY; a[3] = 1e-8f; a[4] = 1e-40f;
        a[5] = 3e-39f; a[6] = 1e-5f; a[7] = 3.3961776e38f;
        n = 8;
        break;
    case 4: /* empty tensor */
        n = 0;
        break;
    case 5: /* a single subnormal float32 */
        a[0] = 1.4e-45f;
        n = 1;
        break;
    }
    ampdiag_tstats_compute(a, n, s, NULL);
}

static void test_round_trip(void)
{
    ampdiag_trace_writer *w = create("rt.h5", 0, 0);
    if (!ok(w != NULL, "create rt.h5"))
        return;
    ok(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_PRECISION, "fp32") == 0 &&
           ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_PRECISION, "fp16") == 0 &&
           ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_SEED, -9007199254740993LL) == 0 &&
           ampdiag_trace_set_attr_double(w, AMPDIAG_ATTR_LR, 3e-4) == 0 &&
           ampdiag_trace_set_attr_double(w, "weird", -0.0) == 0 &&
           ampdiag_trace_set_attr_str(w, "empty", "") == 0 &&
           ampdiag_trace_set_attr_str(w, "unicode", "\xce\xbb = 1e-3 \xe2\x9c\x93") == 0,
       "attributes of every type (and a replaced one)");
    ok(ampdiag_trace_set_attr_str(w, "status", "complete") == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_set_attr_int(w, "format_version", 2) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_set_attr_str(w, "", "x") == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_set_attr_str(w, NULL, "x") == AMPDIAG_TRACE_EINVAL,
       "reserved and empty attribute names are refused");
    ok(strstr(ampdiag_trace_errmsg(), "rt.h5") != NULL, "... and the message names the file: %s",
       ampdiag_trace_errmsg());

    char name63[64], name64[65];
    memset(name63, 'a', 63);
    name63[63] = 0;
    memset(name64, 'b', 64);
    name64[64] = 0;
    int l0 = ampdiag_trace_add_layer(w, "embed", "embedding", "[1000, 64]", 64000);
    int l1 = ampdiag_trace_add_layer(w, name63, NULL, NULL, 0);
    int l2 = ampdiag_trace_add_layer(w, "blocks.0.attn.qkv", "linear", "[192, 64]", 12480);
    ok(l0 == 0 && l1 == 1 && l2 == 2, "layers get indices 0, 1, 2");
    ok(ampdiag_trace_add_layer(w, "embed", "x", "y", 1) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_add_layer(w, name64, "x", "y", 1) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_add_layer(w, "", "x", "y", 1) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_add_layer(w, NULL, "x", "y", 1) == AMPDIAG_TRACE_EINVAL,
       "duplicate, too long and empty layer names are refused");

    /* steps */
    ampdiag_trace_step st[3];
    memset(st, 0, sizeof st);
    st[0] = (ampdiag_trace_step){0, 2.302585092994046, 65536.0, 1.25, 1.0, 0, "", 1e-4, 1.1e-3, 0, 12.5};
    st[1] = (ampdiag_trace_step){1, NAN, 32768.0, INFINITY, 1.0, 1, "", 2e-4, 0.0, 17, 11.0};
    /* the caller's skip_reason filled to the last byte (no NUL): 93 ASCII bytes and a 3-byte
     * character that cannot fit with the terminator, so the stored text ends before it */
    memset(st[1].skip_reason, 'r', 93);
    st[1].skip_reason[93] = 0;
    st[2] = (ampdiag_trace_step){2, -0.0, 1.0, 5e-324, 0.5, 0, "", 3e-4, 2e-3, 0, 10.0};
    ok(ampdiag_trace_append_step(w, &st[0]) == 0, "append step 0");
    ampdiag_trace_step long_reason = st[1];
    memcpy(long_reason.skip_reason + 93, "\xe2\x9c\x93", 3);
    ok(ampdiag_trace_append_step(w, &long_reason) == 0, "append step 1 (NaN loss, long reason)");
    ok(ampdiag_trace_append_step(w, &st[2]) == 0, "append step 2 (-0 loss, denormal norm)");
    ampdiag_trace_step bad = st[0];
    bad.step = -1;
    ok(ampdiag_trace_append_step(w, &bad) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_append_step(w, NULL) == AMPDIAG_TRACE_EINVAL,
       "negative step and NULL record are refused");
    ok(ampdiag_trace_set_attr_str(w, "late", "x") == AMPDIAG_TRACE_EINVAL &&
           strstr(ampdiag_trace_errmsg(), "first record"),
       "attributes after the first record are refused: %s", ampdiag_trace_errmsg());
    int l3 = ampdiag_trace_add_layer(w, "late_layer", "linear", "[2, 2]", 6);
    ok(l3 == 3, "a layer can still be added after the first record");

    /* tensors */
    ampdiag_tstats cs[NCASES];
    int good = 1;
    for (int c = 0; c < NCASES; c++) {
        make_case(c, &cs[c]);
        good &= ampdiag_trace_append_tensor(w, c, c % 4, (ampdiag_tensor_kind)(c % AMPDIAG_NKINDS),
                                            &cs[c], (uint64_t)c * 1000000007ULL) == 0;
    }
    ok(good, "append %d tensor records", NCASES);
    ok(ampdiag_trace_append_tensor(w, 0, 4, AMPDIAG_KIND_WEIGHT, &cs[0], 0) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_append_tensor(w, 0, -1, AMPDIAG_KIND_WEIGHT, &cs[0], 0) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_append_tensor(w, 0, 0, (ampdiag_tensor_kind)5, &cs[0], 0) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_append_tensor(w, 0, 0, AMPDIAG_KIND_WEIGHT, NULL, 0) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_append_tensor(w, -5, 0, AMPDIAG_KIND_WEIGHT, &cs[0], 0) == AMPDIAG_TRACE_EINVAL,
       "tensor records with an undeclared layer, bad kind, no stats or negative step are refused");

    /* histograms */
    ampdiag_hist h;
    ampdiag_hist_init(&h);
    for (int b = 0; b < AMPDIAG_HIST_BINS; b++)
        h.bin[b] = (uint64_t)b * 0x0101010101ULL;
    h.bin[AMPDIAG_HIST_NAN] = UINT64_MAX;
    ok(ampdiag_trace_append_hist(w, 7, 2, AMPDIAG_KIND_ACTIVATION_GRAD, &h) == 0, "append a histogram");
    ok(ampdiag_trace_append_hist(w, 7, 9, AMPDIAG_KIND_WEIGHT, &h) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_append_hist(w, 7, 0, AMPDIAG_KIND_WEIGHT, NULL) == AMPDIAG_TRACE_EINVAL,
       "bad histogram appends are refused");

    /* events */
    char longmsg[300];
    memset(longmsg, 'm', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = 0;
    ok(ampdiag_trace_append_event(w, 1, -1, AMPDIAG_EV_SCALE_BACKOFF, 32768.0, "scale 65536 -> 32768") == 0 &&
           ampdiag_trace_append_event(w, 1, 2, AMPDIAG_EV_INF_BACKWARD, 3.0, longmsg) == 0 &&
           ampdiag_trace_append_event(w, 2, 0, AMPDIAG_EV_HIDDEN_SCALER, NAN, NULL) == 0,
       "append events (global, per layer, long and NULL message)");
    ok(ampdiag_trace_append_event(w, 1, -2, AMPDIAG_EV_NOTE, 0, "") == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_append_event(w, 1, 0, AMPDIAG_NEVENT_CODES, 0, "") == AMPDIAG_TRACE_EINVAL,
       "bad events are refused");

    /* evals */
    ok(ampdiag_trace_append_eval(w, 2, 0.75, 0.625) == 0 && ampdiag_trace_append_eval(w, 3, 0.5, NAN) == 0,
       "append evals");
    ok(ampdiag_trace_append_eval(w, -2, 0, 0) == AMPDIAG_TRACE_EINVAL,
       "eval step below -1 refused (-1: the initial evaluation)");
    ok(ampdiag_trace_append_eval_examples(w, 3, (const double[]){0.25, 1.5, 0.125},
                                          (const double[]){1, 0, 0.5}, 3) == 0 &&
           ampdiag_trace_append_eval_examples(w, 3, NULL, NULL, 0) == 0 &&
           ampdiag_trace_append_eval_examples(w, 3, NULL, NULL, 1) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_append_eval_examples(w, -2, (const double[]){1}, NULL, 1) == AMPDIAG_TRACE_EINVAL,
       "append eval examples (NULL losses and steps below -1 refused)");

    ampdiag_trace_writer_info info;
    ampdiag_trace_writer_get_info(w, &info);
    ok(info.steps == 3 && info.tensors == NCASES && info.hists == 1 && info.events == 3 &&
           info.evals == 2 && info.layers == 4 && info.flushes == 0 && info.eval_examples == 3,
       "writer info counts what was appended (no automatic flush with both triggers off)");
    ok(ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE) == 0, "close complete");

    /* read back */
    ampdiag_trace_reader *r = open_trace("rt.h5");
    if (!ok(r != NULL, "open rt.h5"))
        return;
    ok(ampdiag_trace_status_of(r) == AMPDIAG_STATUS_COMPLETE && !ampdiag_trace_cut_off(r) &&
           strcmp(ampdiag_trace_status_text(r), "complete") == 0 && !ampdiag_trace_was_repaired(r),
       "status complete, not cut off");
    const char *fmt = ampdiag_trace_attr_str(r, "format");
    const char *tv = ampdiag_trace_attr_str(r, "tool_version");
    const char *end = ampdiag_trace_attr_str(r, "end_time");
    const char *start = ampdiag_trace_attr_str(r, AMPDIAG_ATTR_START_TIME);
    ok(fmt && strcmp(fmt, "ampdiag-trace") == 0 && ampdiag_trace_attr_int(r, "format_version", 0) == AMPDIAG_TRACE_FORMAT_VERSION &&
           tv && strcmp(tv, ampdiag_version()) == 0 && end && strlen(end) == 20 && end[19] == 'Z' &&
           start && strlen(start) == 20,
       "managed attributes: format, format_version, tool_version, start_time, end_time (%s)",
       end ? end : "none");
    const char *prec = ampdiag_trace_attr_str(r, AMPDIAG_ATTR_PRECISION);
    const char *uni = ampdiag_trace_attr_str(r, "unicode");
    const ampdiag_trace_attr *weird = ampdiag_trace_attr_find(r, "weird");
    ok(prec && strcmp(prec, "fp16") == 0 && uni && strcmp(uni, "\xce\xbb = 1e-3 \xe2\x9c\x93") == 0 &&
           ampdiag_trace_attr_int(r, AMPDIAG_ATTR_SEED, 0) == -9007199254740993LL &&
           ampdiag_trace_attr_double(r, AMPDIAG_ATTR_SEED, 0) == -9007199254740992.0 &&
           ampdiag_trace_attr_double(r, AMPDIAG_ATTR_LR, 0) == 3e-4 && weird &&
           weird->type == AMPDIAG_ATTR_DOUBLE && same_double(weird->d, -0.0) &&
           ampdiag_trace_attr_str(r, "empty") && !*ampdiag_trace_attr_str(r, "empty"),
       "user attributes read back exactly");
    ok(!ampdiag_trace_attr_find(r, "nope") && !ampdiag_trace_attr_str(r, AMPDIAG_ATTR_SEED) &&
           ampdiag_trace_attr_int(r, AMPDIAG_ATTR_PRECISION, 42) == 42 &&
           ampdiag_trace_attr_double(r, "nope", 1.5) == 1.5 && ampdiag_trace_nattrs(r) == 12 &&
           ampdiag_trace_attr_at(r, 12) == NULL,
       "absent or mistyped attributes give the default (%zu attributes)", ampdiag_trace_nattrs(r));

    ampdiag_trace_counts c;
    ampdiag_trace_get_counts(r, &c);
    ok(c.layers == 4 && c.steps == 3 && c.tensors == NCASES && c.hists == 1 && c.events == 3 &&
           c.evals == 2,
       "counts");

    ampdiag_trace_layer *L;
    size_t n;
    ok(ampdiag_trace_read_layers(r, &L, &n) == 0 && n == 4 && L[0].index == 0 &&
           strcmp(L[0].name, "embed") == 0 && strcmp(L[0].op, "embedding") == 0 &&
           strcmp(L[0].shape, "[1000, 64]") == 0 && L[0].params == 64000 &&
           strcmp(L[1].name, name63) == 0 && L[1].op[0] == 0 && L[1].shape[0] == 0 &&
           L[1].params == 0 && L[2].index == 2 && strcmp(L[2].name, "blocks.0.attn.qkv") == 0 &&
           L[3].index == 3 && strcmp(L[3].name, "late_layer") == 0 && L[3].params == 6,
       "layers read back");
    free(L);

    ampdiag_trace_step *S;
    ok(ampdiag_trace_read_steps(r, &S, &n) == 0 && n == 3, "read steps");
    if (n == 3) {
        good = 1;
        for (int i = 0; i < 3; i++)
            good &= S[i].step == st[i].step && same_double(S[i].loss, st[i].loss) &&
                    same_double(S[i].loss_scale, st[i].loss_scale) &&
                    same_double(S[i].grad_norm, st[i].grad_norm) &&
                    same_double(S[i].clip_coef, st[i].clip_coef) && S[i].skipped == st[i].skipped &&
                    same_double(S[i].lr, st[i].lr) && same_double(S[i].update_ratio, st[i].update_ratio) &&
                    S[i].nonfinite_grads == st[i].nonfinite_grads &&
                    same_double(S[i].wall_ms, st[i].wall_ms);
        ok(good, "step records exact (NaN, inf, -0, denormal)");
        ok(strcmp(S[1].skip_reason, st[1].skip_reason) == 0 && strlen(S[1].skip_reason) == 93 &&
               S[0].skip_reason[0] == 0,
           "an unterminated skip reason is cut before the character that does not fit (93 bytes)");
    }
    free(S);

    ampdiag_trace_tensor *T;
    ok(ampdiag_trace_read_tensors(r, 0, SIZE_MAX, &T, &n) == 0 && n == NCASES, "read tensors");
    good = n == NCASES;
    for (int i = 0; good && i < NCASES; i++) {
        const ampdiag_tstats *s = &cs[i];
        const ampdiag_trace_tensor *t = &T[i];
        uint64_t fin = ampdiag_tstats_finite(s);
        int nz = s->n_neg + s->n_pos > 0;
        good = t->step == i && t->layer == i % 4 && t->kind == i % AMPDIAG_NKINDS &&
               t->count == s->count && t->n_nan == s->n_nan && t->n_posinf == s->n_posinf &&
               t->n_neginf == s->n_neginf && t->n_zero == s->n_zero && t->n_neg == s->n_neg &&
               t->n_pos == s->n_pos && t->fp16_overflow == s->fp16_overflow &&
               t->fp16_underflow == s->fp16_underflow && t->fp16_subnormal == s->fp16_subnormal &&
               t->bf16_overflow == s->bf16_overflow && t->bf16_underflow == s->bf16_underflow &&
               t->bf16_subnormal == s->bf16_subnormal &&
               t->lost_updates == (uint64_t)i * 1000000007ULL &&
               (fin ? same_float(t->min, s->min) && same_float(t->max, s->max) &&
                          same_float(t->absmax, s->absmax) &&
                          same_double(t->mean, ampdiag_tstats_mean(s)) &&
                          same_double(t->rms, ampdiag_tstats_rms(s))
                    : isnan(t->min) && isnan(t->max) && isnan(t->absmax) && isnan(t->mean) &&
                          isnan(t->rms)) &&
               (nz ? same_float(t->absmin_nz, s->absmin_nz) : isnan(t->absmin_nz));
        if (!good)
            diag("tensor case %d differs", i);
    }
    ok(good, "tensor records exact; NaN where no finite (non-zero) value existed");
    if (n == NCASES) {
        ok(T[1].n_nan == 2 && isnan(T[1].min) && isnan(T[1].absmin_nz), "all-NaN tensor: min/max NaN");
        ok(T[2].n_zero == 3 && same_float(T[2].min, -0.0f) && same_float(T[2].max, 0.0f) &&
               T[2].absmax == 0.0f && isnan(T[2].absmin_nz),
           "all-zero tensor: min -0, max +0, absmax 0, absmin_nz NaN");
        ok(T[3].fp16_overflow == 2 && T[3].n_posinf == 1 && T[3].n_neginf == 1 &&
               T[3].bf16_overflow == 1 && T[3].absmax == 3.3961776e38f,
           "overflowing tensor: fp16_overflow %llu, bf16_overflow %llu",
           (unsigned long long)T[3].fp16_overflow, (unsigned long long)T[3].bf16_overflow);
        ok(T[4].count == 0 && isnan(T[4].min) && isnan(T[4].mean), "empty tensor: count 0, NaN stats");
        ok(T[5].absmin_nz == 1.4e-45f && T[5].bf16_underflow == 1 && T[5].fp16_underflow == 1,
           "float32 subnormal: absmin_nz kept exactly, underflows both formats");
        ampdiag_tstats back;
        ampdiag_trace_tensor_to_tstats(&T[1], &back);
        ok(back.count == 2 && back.n_nan == 2 && back.min == INFINITY && back.max == -INFINITY &&
               back.absmax == -INFINITY && back.absmin_nz == INFINITY && back.sum == 0,
           "to_tstats restores the merge identities");
        ampdiag_trace_tensor_to_tstats(&T[0], &back);
        ampdiag_tstats merged = cs[0];
        ok(back.count == cs[0].count && back.min == cs[0].min && back.absmin_nz == cs[0].absmin_nz &&
               close_to(back.sum, cs[0].sum, 1e-15, 0) && close_to(back.sumsq, cs[0].sumsq, 1e-15, 0),
           "to_tstats restores sum and sumsq from mean and rms");
        ampdiag_tstats_merge(&merged, &back);
        ok(merged.count == 2 * cs[0].count, "a restored record merges");
        /* the round trip record -> statistics -> record keeps mean and rms to within 2 ulps ("exact
         * to rounding": mean * n / n and sqrt(rms^2 * n / n) cannot always give the same double
         * back, so a copy through the public API may differ in a last bit) */
        int exact = 1, moved = 0;
        uint64_t seed = 12345;
        for (int k = 0; k < 20000; k++) {
            ampdiag_trace_tensor rec = T[0], again;
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            rec.count = rec.n_pos = 1 + (seed >> 40) % 100000;
            rec.n_neg = rec.n_zero = rec.n_nan = rec.n_posinf = rec.n_neginf = 0;
            rec.rms = ldexp((double)((seed >> 11) & ((1ULL << 52) - 1)) / 4503599627370496.0 + 1.0,
                            (int)((seed >> 3) % 80) - 60);
            rec.mean = rec.rms * ((double)(seed % 1000) / 1000.0);
            ampdiag_trace_tensor_to_tstats(&rec, &back);
            ampdiag_trace_tensor_from_tstats(&again, &back);
            moved += again.rms != rec.rms || again.mean != rec.mean;
            exact &= fabs(again.rms - rec.rms) <= 2 * (nextafter(rec.rms, INFINITY) - rec.rms) &&
                     fabs(again.mean - rec.mean) <= 2 * (nextafter(fabs(rec.mean), INFINITY) - fabs(rec.mean));
        }
        ok(exact, "record -> statistics -> record: mean and rms within 2 ulps over 20000 records (%d moved "
           "by rounding)", moved);
    }
    free(T);

    ampdiag_trace_hist *H;
    ok(ampdiag_trace_read_hists(r, 0, SIZE_MAX, &H, &n) == 0 && n == 1 && H[0].step == 7 &&
           H[0].layer == 2 && H[0].kind == AMPDIAG_KIND_ACTIVATION_GRAD &&
           memcmp(H[0].bin, h.bin, sizeof h.bin) == 0,
       "histogram exact (all 281 bins, UINT64_MAX kept)");
    free(H);

    ampdiag_trace_event *E;
    ok(ampdiag_trace_read_events(r, &E, &n) == 0 && n == 3, "read events");
    if (n == 3) {
        ok(E[0].step == 1 && E[0].layer == -1 && E[0].code == AMPDIAG_EV_SCALE_BACKOFF &&
               E[0].value == 32768.0 && strcmp(E[0].message, "scale 65536 -> 32768") == 0,
           "global event");
        ok(E[1].layer == 2 && E[1].code == AMPDIAG_EV_INF_BACKWARD &&
               strlen(E[1].message) == AMPDIAG_TRACE_MESSAGE_LEN - 1 &&
               strncmp(E[1].message, longmsg, AMPDIAG_TRACE_MESSAGE_LEN - 1) == 0,
           "long message cut to %d bytes", AMPDIAG_TRACE_MESSAGE_LEN - 1);
        ok(E[2].code == AMPDIAG_EV_HIDDEN_SCALER && isnan(E[2].value) && E[2].message[0] == 0,
           "NULL message reads as empty, NaN value kept (the last event code round-trips)");
    }
    free(E);

    ampdiag_trace_eval *V;
    ok(ampdiag_trace_read_evals(r, &V, &n) == 0 && n == 2 && V[0].step == 2 && V[0].loss == 0.75 &&
           V[0].metric == 0.625 && V[1].step == 3 && isnan(V[1].metric),
       "evals exact");
    free(V);
    ampdiag_trace_eval_example *X = NULL;
    ok(ampdiag_trace_read_eval_examples(r, 0, SIZE_MAX, &X, &n) == 0 && n == 3 && X[0].step == 3 &&
           X[0].example == 0 && X[0].loss == 0.25 && X[0].metric == 1 && X[1].example == 1 && X[1].loss == 1.5 &&
           X[2].example == 2 && X[2].metric == 0.5,
       "eval examples exact");
    free(X);

    /* ranges */
    ok(ampdiag_trace_read_tensors(r, 2, 3, &T, &n) == 0 && n == 3 && T[0].step == 2 && T[2].step == 4,
       "range read: rows 2..4");
    free(T);
    ok(ampdiag_trace_read_tensors(r, 5, 100, &T, &n) == 0 && n == 1 && T[0].step == 5,
       "range read clipped at the end");
    free(T);
    ok(ampdiag_trace_read_tensors(r, NCASES, 10, &T, &n) == 0 && n == 0 && T == NULL,
       "range read at the end: no rows, NULL");
    ok(ampdiag_trace_read_tensors(r, NCASES + 1, 10, &T, &n) == AMPDIAG_TRACE_EINVAL,
       "range read past the end is refused");
    ok(ampdiag_trace_read_steps(r, NULL, &n) == AMPDIAG_TRACE_EINVAL, "NULL output is refused");
    ok(ampdiag_trace_refresh(r) == 0, "refresh of a complete trace");
    ampdiag_trace_reader_close(r);
}

static void test_status(void)
{
    struct {
        const char *file;
        ampdiag_trace_status set, close;
        const char *want;
    } cases[] = {
        {"st1.h5", AMPDIAG_STATUS_UNKNOWN, AMPDIAG_STATUS_INTERRUPTED, "interrupted"},
        {"st2.h5", AMPDIAG_STATUS_DIVERGED, AMPDIAG_STATUS_UNKNOWN, "diverged"},
        {"st3.h5", AMPDIAG_STATUS_UNKNOWN, AMPDIAG_STATUS_RUNNING, "running"},
        {"st4.h5", AMPDIAG_STATUS_INTERRUPTED, AMPDIAG_STATUS_COMPLETE, "complete"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ampdiag_trace_writer *w = create(cases[i].file, 10, 2.0);
        if (!w)
            continue;
        ampdiag_trace_add_layer(w, "l", "linear", "[1, 1]", 2);
        ampdiag_trace_step s = {0, 1.0, 1.0, 1.0, 1.0, 0, "", 1e-3, 1e-3, 0, 1.0};
        int rc = ampdiag_trace_append_step(w, &s);
        if (cases[i].set != AMPDIAG_STATUS_UNKNOWN)
            rc |= ampdiag_trace_set_status(w, cases[i].set);
        rc |= ampdiag_trace_close(w, cases[i].close);
        ampdiag_trace_reader *r = open_trace(cases[i].file);
        ok(rc == 0 && r && strcmp(ampdiag_trace_status_text(r), cases[i].want) == 0 &&
               ampdiag_trace_cut_off(r) == (strcmp(cases[i].want, "running") == 0),
           "%s: status %s", cases[i].file, r ? ampdiag_trace_status_text(r) : "?");
        ampdiag_trace_reader_close(r);
    }
    ampdiag_trace_writer *w = create("st5.h5", 10, 2.0);
    ok(w && ampdiag_trace_set_status(w, (ampdiag_trace_status)7) == AMPDIAG_TRACE_EINVAL,
       "unknown status refused");
    ok(ampdiag_trace_close(w, (ampdiag_trace_status)9) == AMPDIAG_TRACE_EINVAL,
       "close with an unknown status reports it (and still frees the writer)");
    ok(ampdiag_trace_close(NULL, AMPDIAG_STATUS_COMPLETE) == 0, "close(NULL) is a no-op");
    ampdiag_trace_writer_info info;
    ampdiag_trace_writer_get_info(NULL, &info);
    ok(info.steps == 0 && ampdiag_trace_flush(NULL) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_append_step(NULL, NULL) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_add_layer(NULL, "x", NULL, NULL, 0) == AMPDIAG_TRACE_EINVAL,
       "NULL writer is refused");

    /* a writer closed before any record: an empty, complete trace */
    w = create("empty.h5", 10, 2.0);
    ok(w && ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE) == 0, "close a trace without records");
    ampdiag_trace_reader *r = open_trace("empty.h5");
    ampdiag_trace_counts c;
    ampdiag_trace_get_counts(r, &c);
    ok(r && ampdiag_trace_status_of(r) == AMPDIAG_STATUS_COMPLETE && c.layers + c.steps + c.tensors +
                                                                        c.hists + c.events + c.evals == 0,
       "empty trace reads with zero records");
    ampdiag_trace_reader_close(r);
}

static void test_batches_and_flush(void)
{
    /* more rows than a chunk in every per-step table: batch writes between flushes */
    const char *big = background ? "big-bg.h5" : "big.h5";
    ampdiag_trace_writer *w = create(big, 4, 0);
    if (!ok(w != NULL, "create %s%s", big, background ? " (writing in the background)" : ""))
        return;
    for (int l = 0; l < 7; l++) {
        char name[16];
        snprintf(name, sizeof name, "layer%d", l);
        ampdiag_trace_add_layer(w, name, "linear", "[8, 8]", 72);
    }
    int good = 1;
    float x[16];
    ampdiag_trace_writer_info info;
    uint64_t flushes_at_4 = 0, flushed_at_4 = 0;
    for (int s = 0; s < 400 && good; s++) {
        for (int l = 0; l < 7; l++)
            for (int k = 0; k < AMPDIAG_NKINDS; k++) {
                for (int i = 0; i < 16; i++)
                    x[i] = (float)(s * 1000 + l * 10 + k) + (float)i / 16.0f;
                ampdiag_tstats st;
                ampdiag_hist h;
                ampdiag_tstats_compute(x, 16, &st, &h);
                good &= ampdiag_trace_append_tensor(w, s, l, (ampdiag_tensor_kind)k, &st, 0) == 0;
                if (s % 5 == 0)
                    good &= ampdiag_trace_append_hist(w, s, l, (ampdiag_tensor_kind)k, &h) == 0;
            }
        ampdiag_trace_step r = {s, 1.0 / (s + 1), 1.0, 1.0, 1.0, 0, "", 1e-3, 1e-3, 0, 1.0};
        good &= ampdiag_trace_append_step(w, &r) == 0;
        if (s == 3) {
            ampdiag_trace_writer_get_info(w, &info);
            flushes_at_4 = info.flushes;
            flushed_at_4 = info.steps_flushed;
        }
    }
    ok(good, "400 steps x 35 tensors appended");
    if (background) {
        /* the thread counts the flushes it has done: all of them once an explicit flush waited */
        ok(ampdiag_trace_flush(w) == 0, "explicit flush waits for the background writes");
        ampdiag_trace_writer_get_info(w, &info);
        ok(info.flushes == 101 && info.steps_flushed == 400 && info.tensors == 14000 && info.hists == 2800,
           "100 periodic flushes and the explicit one done for 400 steps");
    } else {
        ok(flushes_at_4 == 1 && flushed_at_4 == 4, "flush_every_steps 4: one flush after 4 steps");
        ampdiag_trace_writer_get_info(w, &info);
        ok(info.flushes == 100 && info.steps_flushed == 400 && info.tensors == 14000 && info.hists == 2800,
           "100 flushes for 400 steps");
    }
    ok(ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE) == 0, "close %s", big);
    ampdiag_trace_reader *r = open_trace(big);
    ampdiag_trace_tensor *T = NULL;
    ampdiag_trace_hist *H = NULL;
    size_t n = 0, nh = 0;
    good = r && ampdiag_trace_read_tensors(r, 0, SIZE_MAX, &T, &n) == 0 && n == 14000 &&
           ampdiag_trace_read_hists(r, 0, SIZE_MAX, &H, &nh) == 0 && nh == 2800;
    for (size_t i = 0; good && i < n; i++) {
        int s = (int)(i / 35), l = (int)(i % 35) / 5, k = (int)(i % 5);
        float base = (float)(s * 1000 + l * 10 + k);
        good = T[i].step == s && T[i].layer == l && T[i].kind == k && T[i].count == 16 &&
               T[i].min == base && T[i].max == base + 15.0f / 16.0f;
    }
    for (size_t i = 0; good && i < nh; i++)
        good = H[i].step == (int64_t)(i / 35) * 5 && H[i].layer == (int)(i % 35) / 5;
    ok(good, "every tensor and histogram row is where it belongs after batch writes");
    free(T);
    free(H);
    ampdiag_trace_reader_close(r);
    if (background)
        return;

    /* time-based flush */
    w = create("timed.h5", 0, 0.05);
    ampdiag_trace_add_layer(w, "l", "linear", "[1]", 1);
    ampdiag_trace_step s0 = {0, 1.0, 1.0, 1.0, 1.0, 0, "", 1e-3, 1e-3, 0, 1.0};
    ampdiag_trace_append_step(w, &s0);
    ampdiag_trace_writer_get_info(w, &info);
    uint64_t before = info.flushes;
    struct timespec ts = {0, 80 * 1000000L};
    nanosleep(&ts, NULL);
    s0.step = 1;
    ampdiag_trace_append_step(w, &s0);
    ampdiag_trace_writer_get_info(w, &info);
    ok(before == 0 && info.flushes == 1 && info.steps_flushed == 2,
       "flush_seconds 0.05: a step record 80 ms later flushes");
    ok(ampdiag_trace_flush(w) == 0, "explicit flush");
    ampdiag_trace_writer_get_info(w, &info);
    ok(info.flushes == 2, "... counted");
    ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE);
}

static void test_file_errors(void)
{
    ampdiag_trace_writer *w = NULL;
    ampdiag_trace_options o;
    ampdiag_trace_options_init(&o);
    ok(o.flush_every_steps == 10 && o.flush_seconds == 2.0 && o.overwrite == 0, "default options");
    ok(ampdiag_trace_create(tpath("rt.h5"), NULL, &w) == AMPDIAG_TRACE_EEXIST && w == NULL &&
           strstr(ampdiag_trace_errmsg(), "rt.h5"),
       "an existing file is not overwritten by default: %s", ampdiag_trace_errmsg());
    int rc = ampdiag_trace_create(tpath("no-such-dir/x.h5"), NULL, &w);
    ok(rc == AMPDIAG_TRACE_EIO && ampdiag_trace_err_is_io(rc) && w == NULL &&
           strstr(ampdiag_trace_errmsg(), "no-such-dir/x.h5"),
       "a path in a missing directory is an I/O error: %s", ampdiag_trace_errmsg());
    mkdir(tpath("adir"), 0755);
    o.overwrite = 1;
    rc = ampdiag_trace_create(tpath("adir"), &o, &w);
    ok(rc == AMPDIAG_TRACE_EIO && strstr(ampdiag_trace_errmsg(), "directory"),
       "a directory is not a trace: %s", ampdiag_trace_errmsg());
    rmdir(tpath("adir"));
    ok(ampdiag_trace_create("", NULL, &w) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_create(tpath("x.h5"), NULL, NULL) == AMPDIAG_TRACE_EINVAL,
       "empty path and NULL output refused");
    if (geteuid() != 0) {
        mkdir(tpath("ro"), 0555);
        rc = ampdiag_trace_create(tpath("ro/x.h5"), NULL, &w);
        ok(rc == AMPDIAG_TRACE_EIO, "a read-only directory is an I/O error: %s", ampdiag_trace_errmsg());
        rmdir(tpath("ro"));
    } else {
        skip("read-only directory (running as root)");
    }
}

/* The what-if lost-update fields: append_update writes them, append_tensor writes zeros, and
 * both read back exactly. */
static void test_update_fields(void)
{
    ampdiag_trace_writer *w = create("upd.h5", 0, 0);
    if (!ok(w != NULL, "create upd.h5"))
        return;
    int l0 = ampdiag_trace_add_layer(w, "fc1", "linear", "[4, 3]", 16);
    int l1 = ampdiag_trace_add_layer(w, "fc2", "linear", "[3, 2]", 8);
    ampdiag_tstats s;
    make_case(0, &s);
    ok(ampdiag_trace_append_update(w, 0, l0, &s, 3, 5, 7) == 0 &&
           ampdiag_trace_append_tensor(w, 0, l0, AMPDIAG_KIND_WEIGHT, &s, 0) == 0 &&
           ampdiag_trace_append_tensor(w, 0, l1, AMPDIAG_KIND_UPDATE, &s, 11) == 0 &&
           ampdiag_trace_append_update(w, 1, l1, &s, 0, UINT64_MAX, (uint64_t)1 << 40) == 0,
       "append update records with the what-if counts (and one without, through append_tensor)");
    ok(ampdiag_trace_append_update(w, 0, 2, &s, 0, 0, 0) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_append_update(w, 0, l0, NULL, 0, 0, 0) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_append_update(w, -1, l0, &s, 0, 0, 0) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_append_update(NULL, 0, l0, &s, 0, 0, 0) == AMPDIAG_TRACE_EINVAL,
       "append_update refuses an undeclared layer, no stats, a negative step, no writer");
    ok(strstr(ampdiag_trace_errmsg(), "ampdiag_trace_append_update") != NULL ||
           strstr(ampdiag_trace_errmsg(), "NULL") != NULL,
       "... and says which call: %s", ampdiag_trace_errmsg());
    ok(ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE) == 0, "close upd.h5");

    ampdiag_trace_reader *r = open_trace("upd.h5");
    if (!ok(r != NULL, "open upd.h5"))
        return;
    ok(ampdiag_trace_has_field(r, "/tensors", "lost_if_fp16") &&
           ampdiag_trace_has_field(r, "tensors", "lost_if_bf16") &&
           ampdiag_trace_has_field(r, "/tensors", "lost_updates") &&
           !ampdiag_trace_has_field(r, "/tensors", "lost_if_fp8") &&
           ampdiag_trace_has_field(r, "/steps", "loss_scale") &&
           !ampdiag_trace_has_field(r, "/nope", "step"),
       "has_field: this writer's /tensors has lost_if_fp16 and lost_if_bf16");
    ampdiag_trace_tensor *T = NULL;
    size_t n = 0;
    ok(ampdiag_trace_read_tensors(r, 0, SIZE_MAX, &T, &n) == 0 && n == 4, "read 4 tensor records");
    if (n == 4) {
        ok(T[0].kind == AMPDIAG_KIND_UPDATE && T[0].layer == 0 && T[0].lost_updates == 3 &&
               T[0].lost_if_fp16 == 5 && T[0].lost_if_bf16 == 7 && T[0].count == s.count,
           "update record: lost_updates 3, lost_if_fp16 5, lost_if_bf16 7");
        ok(T[1].kind == AMPDIAG_KIND_WEIGHT && T[1].lost_updates == 0 && T[1].lost_if_fp16 == 0 &&
               T[1].lost_if_bf16 == 0 && T[2].kind == AMPDIAG_KIND_UPDATE && T[2].lost_updates == 11 &&
               T[2].lost_if_fp16 == 0 && T[2].lost_if_bf16 == 0,
           "append_tensor writes lost_if_fp16 = lost_if_bf16 = 0");
        ok(T[3].step == 1 && T[3].layer == 1 && T[3].lost_if_fp16 == UINT64_MAX &&
               T[3].lost_if_bf16 == (uint64_t)1 << 40,
           "full uint64 range round-trips");
    }
    free(T);
    /* a range read in the middle */
    T = NULL;
    ok(ampdiag_trace_read_tensors(r, 3, 1, &T, &n) == 0 && n == 1 && T[0].lost_if_fp16 == UINT64_MAX,
       "range read keeps the new fields");
    free(T);
    ampdiag_trace_reader_close(r);
}

/* A v1 trace written before lost_if_fp16 / lost_if_bf16 existed (the reference traces) still
 * reads: the fields read as 0 and has_field says they are absent. */
static void test_without_new_fields(void)
{
    const char *srcdir = getenv("srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/traces/v1-fp32-complete.h5", srcdir && *srcdir ? srcdir : ".");
    ampdiag_trace_reader *r = NULL;
    int rc = ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET, &r);
    if (!ok(rc == 0, "a reference trace without the lost_if_* fields opens: %s",
            rc ? ampdiag_trace_errmsg() : path))
        return;
    ok(!ampdiag_trace_has_field(r, "/tensors", "lost_if_fp16") &&
           !ampdiag_trace_has_field(r, "/tensors", "lost_if_bf16") &&
           ampdiag_trace_has_field(r, "/tensors", "lost_updates"),
       "has_field: lost_if_fp16 / lost_if_bf16 absent, lost_updates present");
    ampdiag_trace_tensor *T = NULL;
    size_t n = 0;
    rc = ampdiag_trace_read_tensors(r, 0, SIZE_MAX, &T, &n);
    int zeros = 1;
    uint64_t lost = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        zeros &= T[i].lost_if_fp16 == 0 && T[i].lost_if_bf16 == 0;
        lost += T[i].lost_updates;
    }
    ok(rc == 0 && n == 900 && zeros && lost > 0,
       "all %zu tensor records read; lost_if_* read as 0, lost_updates as stored (%llu)", n,
       (unsigned long long)lost);
    free(T);
    /* a partial range read, so the buffer is not just zeroed memory */
    T = NULL;
    rc = ampdiag_trace_read_tensors(r, 450, 7, &T, &n);
    zeros = rc == 0 && n == 7;
    for (size_t i = 0; zeros && i < n; i++)
        zeros = T[i].lost_if_fp16 == 0 && T[i].lost_if_bf16 == 0;
    ok(zeros, "a range read: lost_if_* read as 0");
    free(T);
    ampdiag_trace_reader_close(r);
}

/* The optional /layers compute column: written by add_layer_compute, "" from add_layer, checked,
 * and read as "" from a trace written before it existed. */
static void test_layer_compute(void)
{
    ampdiag_trace_writer *w = create("cmp.h5", 0, 0);
    if (!ok(w != NULL, "create cmp.h5"))
        return;
    int l0 = ampdiag_trace_add_layer_compute(w, "fc1", "linear", "[4, 3]", 16, "bf16");
    int l1 = ampdiag_trace_add_layer_compute(w, "softmax", "softmax", "", 0, "fp32");
    int l2 = ampdiag_trace_add_layer(w, "fc2", "linear", "[3, 2]", 8);
    int l3 = ampdiag_trace_add_layer_compute(w, "fc3", "linear", "[2, 2]", 6, NULL);
    ok(l0 == 0 && l1 == 1 && l2 == 2 && l3 == 3, "add_layer_compute returns the indices 0..3");
    ok(ampdiag_trace_add_layer_compute(w, "fc4", "linear", "", 0, "fp8") == AMPDIAG_TRACE_EINVAL &&
           strstr(ampdiag_trace_errmsg(), "fp8") != NULL,
       "an unknown compute format is refused, named: %s", ampdiag_trace_errmsg());
    ok(ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE) == 0, "close cmp.h5");
    ampdiag_trace_reader *r = open_trace("cmp.h5");
    if (!ok(r != NULL, "open cmp.h5"))
        return;
    ampdiag_trace_layer *L = NULL;
    size_t n = 0;
    ok(ampdiag_trace_has_field(r, "/layers", "compute") && ampdiag_trace_read_layers(r, &L, &n) == 0 && n == 4 &&
           strcmp(L[0].compute, "bf16") == 0 && strcmp(L[1].compute, "fp32") == 0 && L[2].compute[0] == 0 &&
           L[3].compute[0] == 0 && strcmp(L[1].name, "softmax") == 0,
       "compute reads back: bf16, fp32, \"\" (add_layer), \"\" (NULL)");
    free(L);
    ampdiag_trace_reader_close(r);
    const char *srcdir = getenv("srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/traces/v1-fp32-complete.h5", srcdir && *srcdir ? srcdir : ".");
    r = NULL;
    if (!ok(ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET, &r) == 0, "open %s", path))
        return;
    L = NULL;
    int empty = ampdiag_trace_read_layers(r, &L, &n) == 0 && n > 0;
    for (size_t i = 0; empty && i < n; i++)
        empty = L[i].compute[0] == 0 && L[i].name[0] != 0;
    ok(empty && !ampdiag_trace_has_field(r, "/layers", "compute"),
       "a reference trace without the compute column reads it as \"\" (%zu layers)", n);
    free(L);
    ampdiag_trace_reader_close(r);
}

/* /quant: rows of ampdiag_quant_whatif written and read back field by field (enums by name,
 * the 32-bin histogram, the sums), a direction that does not apply writes nothing, bad calls
 * are refused; a trace written before the table (the v2 reference) reads no rows. */
static void test_quant_rows(void)
{
    ampdiag_trace_writer *w = create("quant.h5", 0, 0);
    if (!ok(w != NULL, "create quant.h5"))
        return;
    int l0 = ampdiag_trace_add_layer(w, "fc1", "linear", "[64, 32]", 64 * 32 + 64);
    static float x[64 * 32 + 64];
    for (int i = 0; i < 64 * 32 + 64; i++)
        x[i] = (float)((i * 37) % 101 - 50) * (i % 7 == 0 ? 1e-3f : 1.0f);
    x[5] = NAN;
    ampdiag_qspec sp[16];
    size_t ns = 0;
    char err[160];
    int rc = ampdiag_qspec_parse("mxfp8,nvfp4,fp8-current-e4m3,fp8-block:fp32@2d/32", sp, 16, &ns, err, sizeof err);
    ampdiag_qstats q[16], q1[16];
    rc = rc || ampdiag_quant_whatif(x, 64 * 32 + 64, 64, 32, -1.0f, ns, sp, q) ||
         ampdiag_quant_whatif(x, 64, 0, 0, -1.0f, ns, sp, q1);
    ok(rc == 0 && ns == 7, "7 schemes counted on a 64 x 32 weight with a bias, and on its bias alone");
    int bad = 0;
    for (size_t i = 0; i < ns; i++)
        bad += ampdiag_trace_append_quant(w, 3, l0, AMPDIAG_KIND_WEIGHT, &q[i]) != 0;
    for (size_t i = 0; i < ns; i++) /* 1-D: some not computed */
        bad += ampdiag_trace_append_quant(w, 4, l0, AMPDIAG_KIND_ACTIVATION, &q1[i]) != 0;
    ok(bad == 0, "append_quant writes them (the directions a 1-D tensor lacks write nothing)");
    ampdiag_qstats badq = q[0];
    badq.spec.rule = AMPDIAG_QR_POW2;
    ok(ampdiag_trace_append_quant(w, 5, l0, AMPDIAG_KIND_WEIGHT, &badq) == AMPDIAG_TRACE_EINVAL &&
           strstr(ampdiag_trace_errmsg(), "floor or rceil") != NULL &&
           ampdiag_trace_append_quant(w, 5, 9, AMPDIAG_KIND_WEIGHT, &q[0]) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_append_quant(w, 5, l0, AMPDIAG_KIND_WEIGHT, NULL) == AMPDIAG_TRACE_EINVAL,
       "append_quant refuses an invalid scheme (named), an undeclared layer, no stats");
    ampdiag_trace_writer_info info;
    ampdiag_trace_writer_get_info(w, &info);
    size_t want = ns;
    for (size_t i = 0; i < ns; i++)
        want += q1[i].computed;
    ok(info.quants == want, "writer info: %llu /quant rows", (unsigned long long)info.quants);
    ok(ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE) == 0, "close quant.h5");

    ampdiag_trace_reader *r = open_trace("quant.h5");
    if (!ok(r != NULL, "open quant.h5"))
        return;
    ampdiag_trace_counts c;
    ampdiag_trace_get_counts(r, &c);
    ampdiag_trace_quant *Q = NULL;
    size_t n = 0;
    ok(c.quants == want && ampdiag_trace_read_quant(r, 0, SIZE_MAX, &Q, &n) == 0 && n == want,
       "counts and read_quant: %zu rows", n);
    int same = n == want;
    for (size_t i = 0; same && i < ns; i++) {
        ampdiag_qstats back;
        ampdiag_trace_quant_to_qstats(&Q[i], &back);
        ampdiag_qstats w0 = q[i];
        w0.spec.kinds = 0;
        same = Q[i].step == 3 && Q[i].layer == l0 && Q[i].kind == AMPDIAG_KIND_WEIGHT &&
               memcmp(&back, &w0, sizeof back) == 0;
        if (!same)
            diag("row %zu differs", i);
    }
    ok(same, "every field of the weight's rows reads back as counted (scheme, rule, direction, block, counts, "
       "scale histogram, sums)");
    ok(n > ns + 2 && Q[ns].step == 4 && Q[ns].kind == AMPDIAG_KIND_ACTIVATION && Q[ns].direction == AMPDIAG_QD_ROWWISE,
       "the bias-only rows follow (rowwise only: columnwise and 2-D do not apply)");
    int tile = 0;
    for (size_t i = 0; i < n; i++)
        tile += Q[i].direction == AMPDIAG_QD_TILE && Q[i].block == 32 && Q[i].scheme == AMPDIAG_QS_BLOCKWISE &&
                Q[i].rule == AMPDIAG_QR_FP32 && Q[i].format == AMPDIAG_E4M3;
    ok(tile == 1, "a tile row with its non-default block (32) and rule (fp32)");
    ampdiag_trace_format *F = NULL;
    size_t nf = 0;
    ok(ampdiag_trace_read_formats(r, &F, &nf) == 0 && nf == AMPDIAG_NFORMATS_ALL && strcmp(F[AMPDIAG_E2M1].name, "e2m1") == 0 &&
           F[AMPDIAG_E2M1].max_finite == 6.0 && F[AMPDIAG_E8M0].has_inf == 0 && F[AMPDIAG_E3M2].min_subnormal == 0x1p-4,
       "/formats lists the MX rows too (e2m1 max 6, e3m2 min subnormal 2^-4, e8m0 without inf)");
    free(F);
    free(Q);
    Q = NULL;
    ok(ampdiag_trace_read_quant(r, 2, 3, &Q, &n) == 0 && n == 3 && Q[0].scheme == (int32_t)q[2].spec.scheme,
       "a range read of /quant");
    free(Q);
    ampdiag_trace_reader_close(r);
    /* names agree with the numerics' */
    int names = 1;
    for (int i = 0; i < AMPDIAG_NQSCHEMES; i++)
        names &= ampdiag_qscheme_parse(ampdiag_qscheme_name(i)) == i;
    for (int i = 0; i < AMPDIAG_NQRULES; i++)
        names &= ampdiag_qrule_parse(ampdiag_qrule_name(i)) == i;
    for (int i = 0; i < AMPDIAG_NQDIRS; i++)
        names &= ampdiag_qdir_parse(ampdiag_qdir_name(i)) == i;
    ok(names, "scheme, rule and direction names parse back");
    /* a version 2 trace written before /quant */
    const char *srcdir = getenv("srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/traces/v2-fp32-delayed.h5", srcdir && *srcdir ? srcdir : ".");
    r = NULL;
    if (!ok(ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET, &r) == 0, "open %s", path))
        return;
    ampdiag_trace_get_counts(r, &c);
    Q = (ampdiag_trace_quant *)1;
    ok(c.quants == 0 && c.whatifs > 0 && ampdiag_trace_read_quant(r, 0, SIZE_MAX, &Q, &n) == 0 && n == 0 && Q == NULL &&
           !ampdiag_trace_has_field(r, "/quant", "scheme"),
       "a version 2 trace from before /quant opens and reads no /quant rows");
    ampdiag_trace_eval_example *X = (ampdiag_trace_eval_example *)1;
    ok(c.eval_examples == 0 && ampdiag_trace_read_eval_examples(r, 0, SIZE_MAX, &X, &n) == 0 && n == 0 && X == NULL,
       "... and no /eval_examples rows");
    ampdiag_trace_reader_close(r);
}

/* /traced: rows round-trip, bad rows are refused, a trace without the table (v2 reference
 * traces, written before it existed) reads none and says so. */
static void test_traced(void)
{
    ampdiag_trace_writer *w = create("trc.h5", 0, 0);
    if (!ok(w != NULL, "create trc.h5"))
        return;
    ampdiag_trace_traced rows[3] = {
        {0, AMPDIAG_REASON_FIRST, -1, 0, NAN, NAN},
        {7, AMPDIAG_REASON_NONFINITE, 7, 12, 0.625, 1.5},
        {9, AMPDIAG_REASON_AFTER_EVENT, 7, 12, 0.5, 1.25},
    };
    int rc = 0;
    for (int i = 0; i < 3; i++)
        rc |= ampdiag_trace_append_traced(w, &rows[i]);
    ok(rc == 0, "three /traced rows appended");
    ampdiag_trace_traced bad[3] = {
        {3, AMPDIAG_NREASONS, -1, 0, 0, 0}, /* no such reason */
        {3, AMPDIAG_REASON_CADENCE, 4, 1, 0, 0}, /* an event after the step */
        {3, AMPDIAG_REASON_CADENCE, -1, -2, 0, 0}, /* a negative cadence */
    };
    int refused = ampdiag_trace_append_traced(w, NULL) == AMPDIAG_TRACE_EINVAL;
    for (int i = 0; i < 3; i++)
        refused &= ampdiag_trace_append_traced(w, &bad[i]) == AMPDIAG_TRACE_EINVAL;
    ok(refused, "a NULL row, an unknown reason, an event after its step and a negative cadence are refused");
    ok(ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE) == 0, "close trc.h5");
    ampdiag_trace_reader *r = open_trace("trc.h5");
    if (!ok(r != NULL, "open trc.h5"))
        return;
    ampdiag_trace_traced *t = NULL;
    size_t n = 0;
    ok(ampdiag_trace_has_traced(r) && ampdiag_trace_read_traced(r, &t, &n) == 0 && n == 3 && t[0].step == 0 &&
           t[0].reason == AMPDIAG_REASON_FIRST && t[0].event_step == -1 && isnan(t[0].record_ms) &&
           t[1].step == 7 && t[1].reason == AMPDIAG_REASON_NONFINITE && t[1].event_step == 7 && t[1].cadence == 12 &&
           t[1].record_ms == 0.625 && t[1].step_ms == 1.5 && t[2].reason == AMPDIAG_REASON_AFTER_EVENT &&
           t[2].event_step == 7,
       "the rows read back field by field");
    free(t);
    ampdiag_trace_reader_close(r);
    const char *srcdir = getenv("srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/traces/v2-fp32-delayed.h5", srcdir && *srcdir ? srcdir : ".");
    r = NULL;
    t = NULL;
    n = 1;
    ok(ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET, &r) == 0 && !ampdiag_trace_has_traced(r) &&
           ampdiag_trace_read_traced(r, &t, &n) == 0 && n == 0 && !t,
       "a reference trace without /traced opens and reads no row");
    ampdiag_trace_reader_close(r);
}

/* A double attribute set before the first record, updated in SWMR mode (after records) and read
 * back; refused for a name never set, a string attribute, a managed one. */
static void test_update_attr(void)
{
    ampdiag_trace_writer *w = create("uattr.h5", 1, 2.0);
    if (!w) {
        ok(0, "update_attr: create");
        return;
    }
    int rc = ampdiag_trace_set_attr_double(w, AMPDIAG_ATTR_PEAK_MEMORY, NAN);
    rc |= ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_PEAK_MEMORY_SOURCE, "ru_maxrss");
    ampdiag_trace_add_layer(w, "l", "linear", "[1, 1]", 2);
    for (int64_t t = 0; t < 3; t++) { /* flushed every step: SWMR mode from the first */
        ampdiag_trace_step s = {t, 1.0, 1.0, 1.0, 1.0, 0, "", 1e-3, 1e-3, 0, 1.0};
        rc |= ampdiag_trace_append_step(w, &s);
    }
    ok(rc == 0 && ampdiag_trace_set_attr_double(w, "late", 1.0) == AMPDIAG_TRACE_EINVAL,
       "update_attr: a new attribute after the first record is refused (SWMR)");
    ok(ampdiag_trace_update_attr_double(w, "never_set", 1.0) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_update_attr_double(w, AMPDIAG_ATTR_PEAK_MEMORY_SOURCE, 1.0) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_update_attr_double(w, "status", 1.0) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_update_attr_double(NULL, "x", 1.0) == AMPDIAG_TRACE_EINVAL,
       "update_attr: refused for a name never set, a string attribute, a managed one, no writer");
    rc = ampdiag_trace_update_attr_double(w, AMPDIAG_ATTR_PEAK_MEMORY, 123456789.0);
    rc |= ampdiag_trace_update_attr_double(w, AMPDIAG_ATTR_PEAK_MEMORY, 987654321.0); /* the last one counts */
    rc |= ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE);
    ampdiag_trace_reader *r = open_trace("uattr.h5");
    double v = r ? ampdiag_trace_attr_double(r, AMPDIAG_ATTR_PEAK_MEMORY, -1) : -1;
    const char *src = r ? ampdiag_trace_attr_str(r, AMPDIAG_ATTR_PEAK_MEMORY_SOURCE) : NULL;
    ampdiag_trace_counts c;
    if (r)
        ampdiag_trace_get_counts(r, &c);
    ok(rc == 0 && r && v == 987654321.0 && src && strcmp(src, "ru_maxrss") == 0 && c.steps == 3,
       "update_attr: the value updated in SWMR mode reads back (%.17g), the records with it", v);
    ampdiag_trace_reader_close(r);
}

static void cleanup(void)
{
    const char *files[] = {"rt.h5", "upd.h5", "cmp.h5", "quant.h5", "trc.h5", "st1.h5", "st2.h5", "st3.h5", "st4.h5", "st5.h5", "empty.h5",
                           "big.h5", "big-bg.h5", "timed.h5", "uattr.h5"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        unlink(tpath(files[i]));
    rmdir(dir);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/t_trace.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp %s: %s\n", dir, strerror(errno));
        return 1;
    }
    test_names();
    test_round_trip();
    test_update_fields();
    test_without_new_fields();
    test_layer_compute();
    test_quant_rows();
    test_traced();
    test_status();
    test_batches_and_flush();
    /* the same rows and flushes with batches and flushes written by the writer's thread */
    background = 1;
    test_batches_and_flush();
    test_round_trip();
    test_status();
    test_update_attr();
    background = 0;
    test_update_attr();
    test_file_errors();
    cleanup();
    return done_testing();
}
