/*
 * t_public_writer.c - a trace written by another program through the public API alone
 * (include/ampdiag_trace.h), following traces/FORMAT.md: it copies a trace of `ampdiag run`
 * record by record (the /whatif and /quant rows included), but of its root attributes only those
 * FORMAT.md documents for writers
 * (typed settings; not the `hyperparameters` / `scaler` text, nor anything ampdiag adds for
 * itself), so that tests/t_public_writer.sh can check that such a trace gets every finding and
 * every rule ampdiag's own trace gets. It includes no header of src/.
 *
 *   t_public_writer IN OUT
 */
#include "ampdiag.h"
#include "ampdiag_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The root attributes FORMAT.md lists for writers (the managed ones are the writer's). */
static const char *const documented[] = {
    "precision", "model", "data", "seed", "optimizer", "lr", "lr_schedule", "clip", "loss_scale",
    "device", "device_name", "command_line", "steps_planned", "batch", "eval_metric", "fp32_layers",
    "optimizer_state_format", "optimizer_eps", "optimizer_beta1", "optimizer_beta2",
    "optimizer_momentum", "optimizer_weight_decay", "scaler_init_scale", "scaler_growth_factor",
    "scaler_backoff_factor", "scaler_growth_interval", "scaler_min_scale", "scaler_hysteresis",
    "grad_stats", "fp8_amax_history", "fp8_margin", "fp8_amax_compute_algo", "start_time",
    "data_rows", "data_val_rows", "data_val_targets", "data_classes", "data_val_classes", "data_val_chance",
    "data_labels_sorted", "input_min", "input_max", "input_rms", "input_std_min", "input_std_max",
    "standardize",
    "quant_schemes", "quant_every", "rank", "world_size", "dist_backend", "grad_reduce_dtype", "sharding",
};

static int fail(const char *what)
{
    fprintf(stderr, "t_public_writer: %s: %s\n", what, ampdiag_trace_errmsg());
    return 1;
}

static int copy_attrs(ampdiag_trace_reader *r, ampdiag_trace_writer *w)
{
    for (size_t i = 0; i < sizeof documented / sizeof documented[0]; i++) {
        const ampdiag_trace_attr *a = ampdiag_trace_attr_find(r, documented[i]);
        int rc = 0;
        if (!a)
            continue;
        if (a->type == AMPDIAG_ATTR_STR)
            rc = ampdiag_trace_set_attr_str(w, a->name, a->s);
        else if (a->type == AMPDIAG_ATTR_INT)
            rc = ampdiag_trace_set_attr_int(w, a->name, a->i);
        else if (a->type == AMPDIAG_ATTR_DOUBLE)
            rc = ampdiag_trace_set_attr_double(w, a->name, a->d);
        if (rc < 0)
            return fail(a->name);
    }
    return 0;
}

/* A tensor record with its /whatif rows: the unscaled FP8 counts go back into the statistics
 * (append_tensor writes them from there), the delayed ones are appended as rows. *at is the
 * next /whatif row: `ampdiag run` writes a tensor's rows right after it. */
static int copy_tensor(ampdiag_trace_writer *w, const ampdiag_trace_tensor *t, const ampdiag_trace_whatif *wi,
                       size_t nw, size_t *at, const ampdiag_trace_format *fm, size_t nf)
{
    ampdiag_tstats s;
    ampdiag_trace_tensor_to_tstats(t, &s);
    size_t first = *at;
    for (; *at < nw && wi[*at].step == t->step && wi[*at].layer == t->layer && wi[*at].kind == t->kind; (*at)++) {
        const ampdiag_trace_whatif *x = &wi[*at];
        ampdiag_format f;
        if (x->format < 0 || (size_t)x->format >= nf || ampdiag_format_lookup(fm[x->format].name, &f) != 0)
            continue;
        if (x->scaling == AMPDIAG_SCALING_NONE) {
            s.whatif[f][AMPDIAG_WHATIF_OVERFLOW] = x->overflow;
            s.whatif[f][AMPDIAG_WHATIF_UNDERFLOW] = x->underflow;
            s.whatif[f][AMPDIAG_WHATIF_SUBNORMAL] = x->subnormal;
        }
    }
    int rc = t->kind == AMPDIAG_KIND_UPDATE
                 ? ampdiag_trace_append_update(w, t->step, t->layer, &s, t->lost_updates, t->lost_if_fp16,
                                               t->lost_if_bf16)
                 : ampdiag_trace_append_tensor(w, t->step, t->layer, (ampdiag_tensor_kind)t->kind, &s,
                                               t->lost_updates);
    for (size_t i = first; rc >= 0 && i < *at; i++) {
        const ampdiag_trace_whatif *x = &wi[i];
        ampdiag_format f;
        const uint64_t c[AMPDIAG_WHATIF_NCLASSES] = {x->overflow, x->underflow, x->subnormal};
        if (x->scaling == AMPDIAG_SCALING_DELAYED && x->format >= 0 && (size_t)x->format < nf &&
            ampdiag_format_lookup(fm[x->format].name, &f) == 0)
            rc = ampdiag_trace_append_whatif(w, x->step, x->layer, (ampdiag_tensor_kind)x->kind, f,
                                             AMPDIAG_SCALING_DELAYED, x->scale, x->count, c);
    }
    return rc < 0 ? fail("tensor record") : 0;
}

typedef struct tables {
    ampdiag_trace_layer *layers;
    ampdiag_trace_step *steps;
    ampdiag_trace_tensor *tensors;
    ampdiag_trace_hist *hists;
    ampdiag_trace_event *events;
    ampdiag_trace_eval *evals;
    ampdiag_trace_format *formats;
    ampdiag_trace_whatif *whatif;
    ampdiag_trace_eval_example *examples;
    ampdiag_trace_quant *quant;
    size_t nl, ns, nt, nh, ne, nv, nf, nw, nx, nq;
} tables;

static int read_all(ampdiag_trace_reader *r, tables *T)
{
    if (ampdiag_trace_read_layers(r, &T->layers, &T->nl) || ampdiag_trace_read_steps(r, &T->steps, &T->ns) ||
        ampdiag_trace_read_tensors(r, 0, SIZE_MAX, &T->tensors, &T->nt) ||
        ampdiag_trace_read_hists(r, 0, SIZE_MAX, &T->hists, &T->nh) ||
        ampdiag_trace_read_events(r, &T->events, &T->ne) || ampdiag_trace_read_evals(r, &T->evals, &T->nv) ||
        ampdiag_trace_read_formats(r, &T->formats, &T->nf) ||
        ampdiag_trace_read_whatif(r, 0, SIZE_MAX, &T->whatif, &T->nw) ||
        ampdiag_trace_read_eval_examples(r, 0, SIZE_MAX, &T->examples, &T->nx) ||
        ampdiag_trace_read_quant(r, 0, SIZE_MAX, &T->quant, &T->nq))
        return fail("read");
    return 0;
}

static void free_all(tables *T)
{
    free(T->layers);
    free(T->steps);
    free(T->tensors);
    free(T->hists);
    free(T->events);
    free(T->evals);
    free(T->formats);
    free(T->whatif);
    free(T->examples);
    free(T->quant);
}

/* The /quant rows (block-scaled what-if), their element format matched by name. */
static int copy_quant(ampdiag_trace_writer *w, const tables *T)
{
    for (size_t i = 0; i < T->nq; i++) {
        const ampdiag_trace_quant *x = &T->quant[i];
        ampdiag_qstats q;
        ampdiag_format f = AMPDIAG_FP32;
        for (size_t k = 0; k < T->nf; k++)
            if (T->formats[k].index == x->format && ampdiag_format_lookup(T->formats[k].name, &f) != 0)
                return fail("quant row format");
        ampdiag_trace_quant_to_qstats(x, &q);
        q.spec.elem = f;
        if (ampdiag_trace_append_quant(w, x->step, x->layer, (ampdiag_tensor_kind)x->kind, &q) < 0)
            return fail("quant row");
    }
    return 0;
}

static int write_all(ampdiag_trace_writer *w, const tables *T)
{
    for (size_t i = 0; i < T->nl; i++)
        if (ampdiag_trace_add_layer_compute(w, T->layers[i].name, T->layers[i].op, T->layers[i].shape,
                                            T->layers[i].params, T->layers[i].compute) < 0)
            return fail("layer");
    size_t at = 0;
    for (size_t i = 0; i < T->nt; i++)
        if (copy_tensor(w, &T->tensors[i], T->whatif, T->nw, &at, T->formats, T->nf))
            return 1;
    if (copy_quant(w, T))
        return 1;
    for (size_t i = 0; i < T->nh; i++) {
        ampdiag_hist h;
        memcpy(h.bin, T->hists[i].bin, sizeof h.bin);
        if (ampdiag_trace_append_hist(w, T->hists[i].step, T->hists[i].layer,
                                      (ampdiag_tensor_kind)T->hists[i].kind, &h) < 0)
            return fail("histogram");
    }
    for (size_t i = 0; i < T->ne; i++)
        if (ampdiag_trace_append_event(w, T->events[i].step, T->events[i].layer,
                                       (ampdiag_event_code)T->events[i].code, T->events[i].value,
                                       T->events[i].message) < 0)
            return fail("event");
    for (size_t i = 0; i < T->nv; i++)
        if (ampdiag_trace_append_eval_se(w, T->evals[i].step, T->evals[i].loss, T->evals[i].metric,
                                         T->evals[i].loss_se) < 0)
            return fail("eval");
    /* the examples of each evaluation, as runs of rows of one step (0..n-1, in order) */
    for (size_t i = 0; i < T->nx;) {
        size_t j = i;
        while (j < T->nx && T->examples[j].step == T->examples[i].step &&
               T->examples[j].example == (int64_t)(j - i))
            j++;
        double *loss = malloc((j - i) * sizeof *loss), *metric = malloc((j - i) * sizeof *metric);
        int bad = !loss || !metric;
        for (size_t k = i; !bad && k < j; k++) {
            loss[k - i] = T->examples[k].loss;
            metric[k - i] = T->examples[k].metric;
        }
        bad = bad || ampdiag_trace_append_eval_examples(w, T->examples[i].step, loss, metric, j - i) < 0;
        free(loss);
        free(metric);
        if (bad)
            return fail("eval examples");
        i = j > i ? j : i + 1;
    }
    for (size_t i = 0; i < T->ns; i++)
        if (ampdiag_trace_append_step(w, &T->steps[i]) < 0)
            return fail("step");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: t_public_writer IN OUT\n");
        return 2;
    }
    ampdiag_trace_reader *r;
    ampdiag_trace_writer *w;
    tables T;
    memset(&T, 0, sizeof T);
    if (ampdiag_trace_open(argv[1], AMPDIAG_TRACE_READ_QUIET, &r))
        return fail(argv[1]);
    ampdiag_trace_options o;
    ampdiag_trace_options_init(&o);
    o.overwrite = 1;
    int rc = read_all(r, &T);
    const char *st = ampdiag_trace_status_text(r);
    int status = ampdiag_status_parse(st ? st : "");
    if (!rc && ampdiag_trace_create(argv[2], &o, &w))
        rc = fail(argv[2]);
    else if (!rc) {
        rc = copy_attrs(r, w) || write_all(w, &T);
        if (ampdiag_trace_close(w, status < 0 ? AMPDIAG_STATUS_COMPLETE : (ampdiag_trace_status)status) && !rc)
            rc = fail("close");
    }
    free_all(&T);
    ampdiag_trace_reader_close(r);
    return rc;
}
