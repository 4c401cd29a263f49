/*
 * trace_replay.c - a long trace made from a short real one, for the reader benchmark
 * (bench/bench_readers.sh): every record of TEMPLATE (an `ampdiag run` trace) is written again,
 * through the public trace writer, at the steps that replay it, until the new trace holds
 * STEPS steps. The first steps are the template's; after its last step the replay runs back and
 * forth over the template's second half (last, last - 1, ..., middle, middle + 1, ...), so that
 * the loss and every series stay continuous and the records keep the values, the noise and the
 * compressibility of a real run. Tensor records, histograms, events and evaluations of a template
 * step are written at each step that replays it; the root attributes are copied (steps_planned
 * set to STEPS, start_time kept: the same template and length give the same trace but its end_time).
 *
 * --spike STEP: the step record of STEP gets a loss 1000 times its own and the first layer's
 * activation record there an absmax 2^20 times its own (a single-step spike a chart must show).
 *
 * Usage: trace_replay TEMPLATE.h5 STEPS OUT.h5 [--spike STEP]
 */
#include "ampdiag.h"
#include "ampdiag_trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The template's records, and where each of its steps' records start in them. */
struct tmpl {
    ampdiag_trace_layer *layers;
    ampdiag_trace_step *steps;
    ampdiag_trace_tensor *tensors;
    ampdiag_trace_hist *hists;
    ampdiag_trace_event *events;
    ampdiag_trace_eval *evals;
    size_t nl, ns, nt, nh, nev, nevals;
};

/* The template step that output step s replays. */
static size_t replay_index(size_t s, size_t n)
{
    if (s < n || n < 3)
        return s < n ? s : (n ? n - 1 : 0);
    size_t half = n / 2, len = n - 1 - half; /* bounce between n - 1 and half */
    size_t m = (s - (n - 1)) % (2 * len);
    return m <= len ? n - 1 - m : half + (m - len);
}

static int read_template(const char *path, struct tmpl *t)
{
    ampdiag_trace_reader *r;
    if (ampdiag_trace_open(path, 0, &r))
        return -1;
    ampdiag_trace_counts c;
    ampdiag_trace_get_counts(r, &c);
    int rc = ampdiag_trace_read_layers(r, &t->layers, &t->nl) ||
             ampdiag_trace_read_steps(r, &t->steps, &t->ns) ||
             ampdiag_trace_read_tensors(r, 0, c.tensors, &t->tensors, &t->nt) ||
             ampdiag_trace_read_hists(r, 0, c.hists, &t->hists, &t->nh) ||
             ampdiag_trace_read_events(r, &t->events, &t->nev) ||
             ampdiag_trace_read_evals(r, &t->evals, &t->nevals);
    ampdiag_trace_reader_close(r);
    return rc ? -1 : 0;
}

static void free_template(struct tmpl *t)
{
    free(t->layers);
    free(t->steps);
    free(t->tensors);
    free(t->hists);
    free(t->events);
    free(t->evals);
}

/* The root attributes the writer lets a caller set, copied from the template. */
static int copy_attrs(const char *path, ampdiag_trace_writer *w, long steps)
{
    static const char *const managed[] = {"format", "format_version", "tool_version", "status",
                                          "end_time", AMPDIAG_ATTR_STEPS_PLANNED};
    ampdiag_trace_reader *r;
    if (ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET, &r))
        return -1;
    int rc = 0;
    for (size_t i = 0; i < ampdiag_trace_nattrs(r) && !rc; i++) {
        const ampdiag_trace_attr *a = ampdiag_trace_attr_at(r, i);
        int skip = 0;
        for (size_t k = 0; k < sizeof managed / sizeof managed[0]; k++)
            skip |= strcmp(a->name, managed[k]) == 0;
        if (skip)
            continue;
        if (a->type == AMPDIAG_ATTR_STR)
            rc = ampdiag_trace_set_attr_str(w, a->name, a->s);
        else if (a->type == AMPDIAG_ATTR_INT)
            rc = ampdiag_trace_set_attr_int(w, a->name, a->i);
        else if (a->type == AMPDIAG_ATTR_DOUBLE)
            rc = ampdiag_trace_set_attr_double(w, a->name, a->d);
    }
    ampdiag_trace_reader_close(r);
    if (!rc)
        rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_STEPS_PLANNED, steps);
    return rc;
}

/* Every record of template step index i, written at step s. */
static int write_step(ampdiag_trace_writer *w, const struct tmpl *t, const size_t *first, size_t i,
                      int64_t s, int spike)
{
    int64_t ts = t->steps[i].step;
    int rc = 0;
    for (size_t k = first[i]; k < first[i + 1] && !rc; k++) {
        const ampdiag_trace_tensor *x = &t->tensors[k];
        ampdiag_tstats st;
        ampdiag_trace_tensor_to_tstats(x, &st);
        if (spike && x->layer == 0 && x->kind == AMPDIAG_KIND_ACTIVATION) {
            st.absmax = ldexpf(st.absmax, 20);
            st.max = ldexpf(st.max, 20);
        }
        if (x->kind == AMPDIAG_KIND_UPDATE)
            rc = ampdiag_trace_append_update(w, s, x->layer, &st, x->lost_updates, x->lost_if_fp16,
                                             x->lost_if_bf16);
        else
            rc = ampdiag_trace_append_tensor(w, s, x->layer, (ampdiag_tensor_kind)x->kind, &st,
                                             x->lost_updates);
    }
    for (size_t k = 0; k < t->nh && !rc; k++)
        if (t->hists[k].step == ts)
            rc = ampdiag_trace_append_hist(w, s, t->hists[k].layer,
                                           (ampdiag_tensor_kind)t->hists[k].kind,
                                           (const ampdiag_hist *)t->hists[k].bin);
    for (size_t k = 0; k < t->nev && !rc; k++)
        if (t->events[k].step == ts)
            rc = ampdiag_trace_append_event(w, s, t->events[k].layer,
                                            (ampdiag_event_code)t->events[k].code,
                                            t->events[k].value, t->events[k].message);
    for (size_t k = 0; k < t->nevals && !rc; k++)
        if (t->evals[k].step == ts)
            rc = ampdiag_trace_append_eval_se(w, s, t->evals[k].loss, t->evals[k].metric,
                                              t->evals[k].loss_se);
    if (!rc) {
        ampdiag_trace_step r = t->steps[i];
        r.step = s;
        if (spike)
            r.loss *= 1000;
        rc = ampdiag_trace_append_step(w, &r);
    }
    return rc;
}

/* first[i]: the first tensor row of template step i (rows in step order, as a writer appends). */
static size_t *index_tensors(const struct tmpl *t)
{
    size_t *first = malloc((t->ns + 1) * sizeof *first);
    if (!first)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < t->ns; i++) {
        while (k < t->nt && t->tensors[k].step < t->steps[i].step)
            k++;
        first[i] = k;
    }
    first[t->ns] = t->nt;
    for (size_t i = 0; i + 1 < t->ns; i++) /* the rows up to the next step's */
        if (first[i + 1] < first[i])
            first[i + 1] = first[i];
    return first;
}

int main(int argc, char **argv)
{
    long steps = argc >= 4 ? atol(argv[2]) : 0, spike = -1;
    if (argc == 6 && strcmp(argv[4], "--spike") == 0)
        spike = atol(argv[5]);
    if ((argc != 4 && argc != 6) || steps <= 0 || (argc == 6 && spike < 0)) {
        fprintf(stderr, "usage: trace_replay TEMPLATE.h5 STEPS OUT.h5 [--spike STEP]\n");
        return 2;
    }
    struct tmpl t;
    memset(&t, 0, sizeof t);
    if (read_template(argv[1], &t) || t.ns == 0) {
        fprintf(stderr, "trace_replay: %s\n", t.ns ? ampdiag_trace_errmsg() : "no steps in the template");
        free_template(&t);
        return 2;
    }
    size_t *first = index_tensors(&t);
    ampdiag_trace_options o;
    ampdiag_trace_options_init(&o);
    o.overwrite = 1;
    o.flush_every_steps = 1000;
    o.flush_seconds = 0;
    ampdiag_trace_writer *w = NULL;
    int rc = !first || ampdiag_trace_create(argv[3], &o, &w) || copy_attrs(argv[1], w, steps);
    for (size_t l = 0; l < t.nl && !rc; l++)
        rc = ampdiag_trace_add_layer_compute(w, t.layers[l].name, t.layers[l].op, t.layers[l].shape,
                                             t.layers[l].params, t.layers[l].compute) < 0;
    for (long s = 0; s < steps && !rc; s++)
        rc = write_step(w, &t, first, replay_index((size_t)s, t.ns), s, s == spike);
    rc |= w ? ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE) != 0 : 1;
    if (rc)
        fprintf(stderr, "trace_replay: %s: %s\n", argv[3], ampdiag_trace_errmsg());
    free(first);
    free_template(&t);
    return rc ? 3 : 0;
}
