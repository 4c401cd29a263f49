/*
 * load.c - one trace into a run (load.h): the root attributes, the tables (layers, steps,
 * events, evaluations), then the steps' summary (steps.c), the per-layer records (records.c),
 * and the run's findings and figures, computed once (findings.c, figures.c). The tables are
 * read in ranges; every per-step computation is linear or n log n, so a 100k-step trace reads
 * in about a second.
 */
#include "analysis/findings.h"
#include "analysis/load_internal.h"
#include "analysis/ranks.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void copy_attr(ampdiag_trace_reader *r, const char *name, char *dst, size_t n)
{
    const char *s = ampdiag_trace_attr_str(r, name);
    snprintf(dst, n, "%s", s ? s : "");
}

/* The number after "key=" in a "k1=v1 k2=v2" attribute; dflt when absent. */
static double kv_double(const char *s, const char *key, double dflt)
{
    size_t kl = strlen(key);
    for (const char *p = s; p && *p;) {
        while (*p == ' ')
            p++;
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            char *end;
            double v = strtod(p + kl + 1, &end);
            return end == p + kl + 1 ? dflt : v;
        }
        p = strchr(p, ' ');
    }
    return dflt;
}

static void kv_str(const char *s, const char *key, char *dst, size_t n)
{
    size_t kl = strlen(key);
    dst[0] = 0;
    for (const char *p = s; p && *p;) {
        while (*p == ' ')
            p++;
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t len = strcspn(v, " ");
            if (len >= n)
                len = n - 1;
            memcpy(dst, v, len);
            dst[len] = 0;
            return;
        }
        p = strchr(p, ' ');
    }
}

/* A setting from its typed attribute, else from key=value text (older traces), else dflt. */
static double typed_or_kv(ampdiag_trace_reader *rd, const char *attr, const char *kv, const char *key,
                          double dflt)
{
    const ampdiag_trace_attr *a = ampdiag_trace_attr_find(rd, attr);
    if (a && (a->type == AMPDIAG_ATTR_DOUBLE || a->type == AMPDIAG_ATTR_INT))
        return a->d;
    return kv_double(kv, key, dflt);
}

static int is_fp32_op(const char *op)
{
    return strstr(op, "_ce") || strstr(op, "loss") || strstr(op, "cross_entropy");
}

/* A layer that a mixed-precision run (fp16, bf16: 16-bit compute, FP32 weights) recorded as
 * computing in FP32: an op autocast keeps in FP32 (traces/FORMAT.md, /layers compute). */
static int kept_fp32(const an_run *r, const char *compute)
{
    return strcmp(compute, "fp32") == 0 && (r->prec == PREC_FP16 || r->prec == PREC_BF16);
}

static int in_list(const char *list, const char *name)
{
    char item[AMPDIAG_TRACE_NAME_LEN * 2];
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len && len < sizeof item) {
            memcpy(item, p, len);
            item[len] = 0;
            if (strcmp(item, name) == 0 || fnmatch(item, name, 0) == 0)
                return 1;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* Every root attribute, copied (the reader's strings live only as long as the reader). */
static int copy_attrs(ampdiag_trace_reader *rd, an_run *r)
{
    size_t n = ampdiag_trace_nattrs(rd);
    r->attrs = calloc(n ? n : 1, sizeof *r->attrs);
    if (!r->attrs)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const ampdiag_trace_attr *a = ampdiag_trace_attr_at(rd, i);
        an_attr *d = &r->attrs[r->nattrs++];
        d->type = a->type;
        d->i = a->i;
        d->d = a->d;
        if (!(d->name = strdup(a->name ? a->name : "")) || (a->s && !(d->s = strdup(a->s))))
            return -1;
    }
    return 0;
}

static void init_run(an_run *r)
{
    memset(r, 0, sizeof *r);
    r->seed = r->steps_planned = r->batch = -1;
    r->lr = r->clip = r->adam_eps = NAN;
    r->fwd_nonfinite_step = -1;
    r->fwd_nonfinite_layer = -1;
    r->first_nonfinite.step = r->first_forward.step = r->eval_forward.step = -1;
    r->eval_forward.rows_from = r->eval_forward.rows_to = -1;
    r->divergence_step = -1;
    r->ratio_median = r->step_ratio_median = NAN;
    r->rec_step_min = INT64_MAX;
    r->rec_step_max = INT64_MIN;
    r->env_width = 1;
    r->ex1_step = -1;
    r->data_rows = r->data_val_rows = r->data_val_targets = r->data_classes = r->data_val_classes = -1;
    r->data_val_chance = r->input_min = r->input_max = r->input_rms = NAN;
    r->input_std_min = r->input_std_max = NAN;
    r->data_labels_sorted = r->standardized = -1;
}

/* What an_load has read from the trace and not yet handed to the run. */
typedef struct load_ctx {
    const char *path;
    char *err;
    size_t errlen;
    ampdiag_trace_reader *rd;
    ampdiag_trace_layer *layers; /* [nl]: freed at the end */
    an_step *st;                 /* [ns]: r->steps */
    ampdiag_trace_event *ev;     /* [nev]: handed to r->events */
    size_t nl, ns, nev;
    ampdiag_trace_counts cnt;
} load_ctx;

/* The run's configuration from the root attributes: precision, model, data, optimizer and
 * its hyperparameters, loss scaling, schedule, FP32 layers, scenario, command line, seed, sizes. */
static void read_config_attrs(ampdiag_trace_reader *rd, an_run *r)
{
    copy_attr(rd, AMPDIAG_ATTR_PRECISION, r->precision, sizeof r->precision);
    copy_attr(rd, AMPDIAG_ATTR_MODEL, r->model, sizeof r->model);
    copy_attr(rd, AMPDIAG_ATTR_DATA, r->data, sizeof r->data);
    copy_attr(rd, AMPDIAG_ATTR_OPTIMIZER, r->optimizer, sizeof r->optimizer);
    copy_attr(rd, AMPDIAG_ATTR_LOSS_SCALE, r->loss_scale_mode, sizeof r->loss_scale_mode);
    const char *gs = ampdiag_trace_attr_str(rd, "grad_stats");
    r->grads_unscaled = gs && strcmp(gs, "unscaled") == 0;
    copy_attr(rd, AMPDIAG_ATTR_HYPERPARAMETERS, r->hyper, sizeof r->hyper);
    copy_attr(rd, AMPDIAG_ATTR_LR_SCHEDULE, r->schedule, sizeof r->schedule);
    copy_attr(rd, AMPDIAG_ATTR_FP32_LAYERS, r->fp32_layers, sizeof r->fp32_layers);
    copy_attr(rd, "scenario", r->scenario, sizeof r->scenario);
    copy_attr(rd, AMPDIAG_ATTR_COMMAND_LINE, r->command_line, sizeof r->command_line);
    r->seed = ampdiag_trace_attr_int(rd, AMPDIAG_ATTR_SEED, -1);
    r->steps_planned = ampdiag_trace_attr_int(rd, AMPDIAG_ATTR_STEPS_PLANNED, -1);
    r->batch = ampdiag_trace_attr_int(rd, AMPDIAG_ATTR_BATCH, -1);
    r->lr = ampdiag_trace_attr_double(rd, AMPDIAG_ATTR_LR, NAN);
    r->clip = ampdiag_trace_attr_double(rd, AMPDIAG_ATTR_CLIP, NAN);
    /* the typed settings; traces without them (older writers) say the same in "k=v" strings */
    const char *scaler = ampdiag_trace_attr_str(rd, AMPDIAG_ATTR_SCALER);
    r->scaler_min = typed_or_kv(rd, AMPDIAG_ATTR_SCALER_MIN, scaler, "min", 0);
    r->scaler_init = typed_or_kv(rd, AMPDIAG_ATTR_SCALER_INIT, scaler, "init", NAN);
    r->adam_eps = typed_or_kv(rd, AMPDIAG_ATTR_OPT_EPS, r->hyper, "eps", NAN);
    const char *state = ampdiag_trace_attr_str(rd, AMPDIAG_ATTR_OPT_STATE_FORMAT);
    if (state)
        snprintf(r->optim_state, sizeof r->optim_state, "%s", state);
    else
        kv_str(r->hyper, "state", r->optim_state, sizeof r->optim_state);
    if (precision_parse(r->precision, &r->prec))
        r->prec = PREC_COUNT;
    r->weights_16bit = r->prec == PREC_BF16_PURE;
    /* the data as the run saw it (recorded since the initial evaluation was) */
    r->data_rows = ampdiag_trace_attr_int(rd, AMPDIAG_ATTR_DATA_ROWS, -1);
    r->data_val_rows = ampdiag_trace_attr_int(rd, AMPDIAG_ATTR_DATA_VAL_ROWS, -1);
    r->data_val_targets = ampdiag_trace_attr_int(rd, AMPDIAG_ATTR_DATA_VAL_TARGETS, -1);
    r->data_classes = ampdiag_trace_attr_int(rd, AMPDIAG_ATTR_DATA_CLASSES, -1);
    r->data_val_classes = ampdiag_trace_attr_int(rd, AMPDIAG_ATTR_DATA_VAL_CLASSES, -1);
    r->data_val_chance = ampdiag_trace_attr_double(rd, AMPDIAG_ATTR_DATA_VAL_CHANCE, NAN);
    r->data_labels_sorted = (int)ampdiag_trace_attr_int(rd, AMPDIAG_ATTR_DATA_LABELS_SORTED, -1);
    r->input_min = ampdiag_trace_attr_double(rd, AMPDIAG_ATTR_INPUT_MIN, NAN);
    r->input_max = ampdiag_trace_attr_double(rd, AMPDIAG_ATTR_INPUT_MAX, NAN);
    r->input_rms = ampdiag_trace_attr_double(rd, AMPDIAG_ATTR_INPUT_RMS, NAN);
    r->input_std_min = ampdiag_trace_attr_double(rd, AMPDIAG_ATTR_INPUT_STD_MIN, NAN);
    r->input_std_max = ampdiag_trace_attr_double(rd, AMPDIAG_ATTR_INPUT_STD_MAX, NAN);
    const char *std = ampdiag_trace_attr_str(rd, AMPDIAG_ATTR_STANDARDIZE);
    r->standardized = !std ? -1 : strcmp(std, "on") == 0;
    /* peak memory: only with the source that says what it is */
    r->peak_memory = NAN;
    copy_attr(rd, AMPDIAG_ATTR_PEAK_MEMORY_SOURCE, r->peak_memory_source, sizeof r->peak_memory_source);
    double pm = ampdiag_trace_attr_double(rd, AMPDIAG_ATTR_PEAK_MEMORY, NAN);
    if (r->peak_memory_source[0] && isfinite(pm) && pm > 0)
        r->peak_memory = pm;
}

/* The examples of the initial evaluation (step -1) and of the last evaluation that has them,
 * each in example order (ex0_*, ex1_*); rows of other evaluations, examples out of range and
 * duplicates are ignored. 0 or an AMPDIAG_TRACE_ error. */
static int read_examples(load_ctx *L, an_run *r)
{
    if (L->cnt.eval_examples == 0)
        return 0;
    ampdiag_trace_eval_example *x;
    size_t n;
    int rc = ampdiag_trace_read_eval_examples(L->rd, 0, SIZE_MAX, &x, &n);
    if (rc)
        return rc;
    int64_t last = -1;
    size_t n0 = 0, n1 = 0;
    for (size_t i = 0; i < n; i++)
        if (x[i].step > last)
            last = x[i].step;
    for (size_t i = 0; i < n; i++) {
        if (x[i].example < 0 || (uint64_t)x[i].example >= (uint64_t)n)
            continue;
        size_t e = (size_t)x[i].example + 1;
        if (x[i].step == -1 && e > n0)
            n0 = e;
        else if (last >= 0 && x[i].step == last && e > n1)
            n1 = e;
    }
    double **arr[4] = {&r->ex0_loss, &r->ex0_metric, &r->ex1_loss, &r->ex1_metric};
    size_t len[4] = {n0, n0, n1, n1};
    for (int k = 0; k < 4; k++) {
        if (!len[k])
            continue;
        if (!(*arr[k] = malloc(len[k] * sizeof **arr[k]))) {
            free(x);
            return AMPDIAG_TRACE_ENOMEM;
        }
        for (size_t i = 0; i < len[k]; i++)
            (*arr[k])[i] = NAN;
    }
    for (size_t i = 0; i < n; i++) {
        if (x[i].example < 0 || (uint64_t)x[i].example >= (uint64_t)n)
            continue;
        size_t e = (size_t)x[i].example;
        if (x[i].step == -1 && e < n0) {
            r->ex0_loss[e] = x[i].loss;
            r->ex0_metric[e] = x[i].metric;
        } else if (last >= 0 && x[i].step == last && e < n1) {
            r->ex1_loss[e] = x[i].loss;
            r->ex1_metric[e] = x[i].metric;
        }
    }
    r->nex0 = n0;
    r->nex1 = n1;
    r->ex1_step = n1 ? last : -1;
    free(x);
    return 0;
}

/* The rank attributes of a distributed run's trace (an_rank_attrs): checked by the reader. */
static void read_rank_attrs(ampdiag_trace_reader *rd, an_run *r)
{
    ampdiag_trace_rank d;
    an_rank_attrs *a = &r->dist;
    int rc = ampdiag_trace_get_rank(rd, &d);
    a->have = rc < 0 ? -1 : rc;
    if (rc < 0)
        snprintf(a->err, sizeof a->err, "%s", ampdiag_trace_errmsg());
    if (rc != 1)
        return;
    a->rank = d.rank;
    a->world_size = d.world_size;
    snprintf(a->sharding, sizeof a->sharding, "%s", d.sharding);
    snprintf(a->backend, sizeof a->backend, "%s", d.backend);
    snprintf(a->reduce_dtype, sizeof a->reduce_dtype, "%s", d.reduce_dtype);
}

/* The trace's own state: status, cut off, repaired, format, device, tool, times; then every
 * root attribute copied. 0, or -1 when out of memory. */
static int read_trace_attrs(ampdiag_trace_reader *rd, an_run *r)
{
    r->status = ampdiag_trace_status_of(rd);
    snprintf(r->status_text, sizeof r->status_text, "%s", ampdiag_trace_status_text(rd));
    r->cut_off = ampdiag_trace_cut_off(rd);
    r->repaired = ampdiag_trace_was_repaired(rd);
    r->format_version = ampdiag_trace_format_version(rd);
    copy_attr(rd, AMPDIAG_ATTR_EVAL_METRIC, r->eval_metric, sizeof r->eval_metric);
    copy_attr(rd, AMPDIAG_ATTR_DEVICE, r->device, sizeof r->device);
    copy_attr(rd, AMPDIAG_ATTR_DEVICE_NAME, r->device_name, sizeof r->device_name);
    copy_attr(rd, "tool_version", r->tool_version, sizeof r->tool_version);
    copy_attr(rd, AMPDIAG_ATTR_START_TIME, r->start_time, sizeof r->start_time);
    copy_attr(rd, "end_time", r->end_time, sizeof r->end_time);
    read_rank_attrs(rd, r);
    return copy_attrs(rd, r);
}

/* The tables: layers, steps, events and evaluations (and the counts of the others), and room
 * for the run's layers and step index. 0 or an AMPDIAG_TRACE_ error (message in L->err). */
/* /steps into r->steps (an_step), STEP_BATCH rows at a time: the records read are not all held.
 * The reason of the first skipped step is kept in r. 0 or an AMPDIAG_TRACE_ error. */
#define STEP_BATCH 4096
static int read_steps(load_ctx *L, an_run *r)
{
    size_t ns = L->cnt.steps;
    if (!(r->steps = malloc((ns ? ns : 1) * sizeof *r->steps)))
        return AMPDIAG_TRACE_ENOMEM;
    L->st = r->steps;
    L->ns = 0;
    int reason_kept = 0;
    while (L->ns < ns) {
        ampdiag_trace_step *b;
        size_t n;
        int rc = ampdiag_trace_read_steps_range(L->rd, L->ns, STEP_BATCH, &b, &n);
        if (rc)
            return rc;
        for (size_t i = 0; i < n; i++) {
            const ampdiag_trace_step *s = &b[i];
            if (s->skipped && !reason_kept++)
                snprintf(r->first_skip_reason, sizeof r->first_skip_reason, "%s", s->skip_reason);
            L->st[L->ns + i] = (an_step){s->step, s->loss, s->loss_scale, s->grad_norm, s->clip_coef,
                                         s->lr, s->update_ratio, s->skipped, s->wall_ms};
        }
        free(b);
        L->ns += n;
        if (n == 0)
            break;
    }
    return 0;
}

/* The table sizes, the optional fields, the layers. 0 or an AMPDIAG_TRACE_ error. */
static int read_layers(load_ctx *L, an_run *r)
{
    /* the what-if lost-update counts: absent (read as 0) in traces of older writers */
    r->lost_if_fields = ampdiag_trace_has_field(L->rd, "/tensors", "lost_if_fp16") &&
                        ampdiag_trace_has_field(L->rd, "/tensors", "lost_if_bf16");
    ampdiag_trace_get_counts(L->rd, &L->cnt);
    r->counts = L->cnt;
    return ampdiag_trace_read_layers(L->rd, &L->layers, &L->nl);
}

/* Room for the run's layers and its step index. 0 or AMPDIAG_TRACE_ENOMEM (message in L->err). */
static int alloc_index(load_ctx *L, an_run *r)
{
    size_t nl = L->nl, ns = L->ns;
    r->nlayers = nl;
    r->layers = calloc(nl ? nl : 1, sizeof *r->layers);
    r->st_step = malloc((ns ? ns : 1) * sizeof *r->st_step);
    r->st_loss = malloc((ns ? ns : 1) * sizeof *r->st_loss);
    if (!r->layers || !r->st_step || !r->st_loss)
        return an_load_fail(L->err, L->errlen, AMPDIAG_TRACE_ENOMEM, L->path, "steps");
    return 0;
}

static int read_tables(load_ctx *L, an_run *r)
{
    int rc;
    if ((rc = read_layers(L, r)) || (rc = read_steps(L, r)) ||
        (rc = ampdiag_trace_read_events(L->rd, &L->ev, &L->nev)) ||
        (rc = ampdiag_trace_read_evals(L->rd, &r->evals, &r->nevals)) || (rc = read_examples(L, r)))
        return an_load_fail(L->err, L->errlen, rc, L->path, "tables");
    return alloc_index(L, r);
}

/* The run's layers from the trace's table, their cells empty; the parameter count. */
static void init_layers(an_run *r, const ampdiag_trace_layer *layers, size_t nl)
{
    for (size_t l = 0; l < nl; l++) {
        an_layer *L = &r->layers[l];
        /* bounded: a fixed-length string that fills its width has no NUL */
        snprintf(L->name, sizeof L->name, "%.*s", (int)sizeof layers[l].name - 1, layers[l].name);
        snprintf(L->op, sizeof L->op, "%.*s", (int)sizeof layers[l].op - 1, layers[l].op);
        snprintf(L->shape, sizeof L->shape, "%.*s", (int)sizeof layers[l].shape - 1, layers[l].shape);
        L->params = layers[l].params;
        snprintf(L->compute, sizeof L->compute, "%.*s", (int)sizeof layers[l].compute - 1,
                 layers[l].compute);
        L->fp32_op = is_fp32_op(L->op) || kept_fp32(r, L->compute);
        L->island = in_list(r->fp32_layers, L->name);
        L->ratio_median = NAN;
        for (int k = 0; k < AMPDIAG_NKINDS; k++)
            an_cell_init(&L->cell[k]);
        r->params += L->params;
    }
}

/* The step index (st_step, st_loss). The steps must be in increasing step order for the
 * lookups (a writer appends them so). 0 or AMPDIAG_TRACE_ESCHEMA (message in L->err). */
static int index_steps(load_ctx *L, an_run *r)
{
    const an_step *st = L->st;
    r->nsteps = L->ns;
    for (size_t i = 0; i < L->ns; i++) {
        r->st_step[i] = st[i].step;
        r->st_loss[i] = st[i].loss;
        if (i && st[i].step <= st[i - 1].step) {
            snprintf(L->err, L->errlen, "'%s': /steps is not in increasing step order (step %" PRId64
                     " after %" PRId64 ")", L->path, st[i].step, st[i - 1].step);
            return AMPDIAG_TRACE_ESCHEMA;
        }
    }
    return 0;
}


int an_load_fail(char *err, size_t errlen, int rc, const char *path, const char *what)
{
    if (rc == AMPDIAG_TRACE_ENOMEM)
        snprintf(err, errlen, "out of memory reading '%s' (%s)", path, what);
    else
        snprintf(err, errlen, "%s", ampdiag_trace_errmsg());
    return rc;
}

/* The run's analysis once its records are read: findings and figures. 0 or
 * AMPDIAG_TRACE_ENOMEM (message in L->err). */
static int analyse(load_ctx *L, an_run *r)
{
    if (an_findings_of(r, 0))
        return an_load_fail(L->err, L->errlen, AMPDIAG_TRACE_ENOMEM, L->path, "findings");
    return 0;
}

int an_load_begin(const char *path, const an_options *opt, an_run *r, ampdiag_trace_reader **rd,
                  char *err, size_t errlen)
{
    *rd = NULL;
    init_run(r);
    r->path = strdup(path);
    if (!r->path)
        return an_load_fail(err, errlen, AMPDIAG_TRACE_ENOMEM, path, "path");
    int rc = ampdiag_trace_open(path, opt && opt->quiet ? AMPDIAG_TRACE_READ_QUIET : 0, rd);
    return rc ? an_load_fail(err, errlen, rc, path, "open") : 0;
}

/* The steps' summary, events, divergence, spikes and clip statistics (steps.c). 0 or
 * AMPDIAG_TRACE_ENOMEM (message in L->err). */
static int summarise(load_ctx *L, an_run *r, const an_options *opt)
{
    an_summarise_steps(r, opt);
    an_scale_from_events(r);
    an_scan_events(r);
    an_find_divergence(r);
    if (an_spikes_and_clip(r) || an_step_ratio_median(r))
        return an_load_fail(L->err, L->errlen, AMPDIAG_TRACE_ENOMEM, L->path, "steps");
    return 0;
}

int an_load_finish(ampdiag_trace_reader *rd, const an_options *opt, an_run *r, char *err,
                   size_t errlen)
{
    load_ctx L;
    memset(&L, 0, sizeof L);
    L.path = r->path;
    L.err = err;
    L.errlen = errlen;
    L.rd = rd;
    read_config_attrs(L.rd, r);
    int rc = 0;
    if (read_trace_attrs(L.rd, r)) {
        rc = an_load_fail(err, errlen, AMPDIAG_TRACE_ENOMEM, L.path, "attributes");
        ampdiag_trace_reader_close(L.rd);
        return rc;
    }
    if ((rc = read_tables(&L, r)))
        goto out;
    init_layers(r, L.layers, L.nl);
    r->events = L.ev;
    r->nevents = L.nev;
    L.ev = NULL;
    /* a run alone is labelled by its precision (an_label_runs labels runs shown together) */
    snprintf(r->label, sizeof r->label, "%s", r->precision[0] ? r->precision : "?");
    if ((rc = index_steps(&L, r)) || (rc = summarise(&L, r, opt)) ||
        (rc = an_load_records(L.rd, r, opt, err, errlen)) || (rc = analyse(&L, r)))
        goto out;
out:
    free(L.layers);
    free(L.ev);
    ampdiag_trace_reader_close(L.rd);
    return rc;
}

/* The merged run's tables: the reference's layers, the steps, events and evaluations the merge
 * made (handed over). 0 or an AMPDIAG_TRACE_ error (message in L->err). */
static int merged_tables(load_ctx *L, an_merge_src *m, an_run *r)
{
    int rc = read_layers(L, r);
    if (rc)
        return an_load_fail(L->err, L->errlen, rc, L->path, "layers");
    r->steps = L->st = m->steps;
    L->ns = m->nsteps;
    r->events = m->events;
    r->nevents = m->nevents;
    r->evals = m->evals;
    r->nevals = m->nevals;
    m->steps = NULL;
    m->events = NULL;
    m->evals = NULL;
    snprintf(r->first_skip_reason, sizeof r->first_skip_reason, "%s", m->first_skip_reason);
    return alloc_index(L, r);
}

int an_load_merged(const char *path, const an_options *opt, an_merge_src *m, an_run *r, char *err,
                   size_t errlen)
{
    init_run(r);
    if (!(r->path = strdup(path)))
        return an_load_fail(err, errlen, AMPDIAG_TRACE_ENOMEM, path, "path");
    load_ctx L = {.path = r->path, .err = err, .errlen = errlen, .rd = m->ref};
    read_config_attrs(m->ref, r);
    int rc = 0;
    if (read_trace_attrs(m->ref, r))
        return an_load_fail(err, errlen, AMPDIAG_TRACE_ENOMEM, L.path, "attributes");
    if ((rc = merged_tables(&L, m, r)))
        goto out;
    init_layers(r, L.layers, L.nl);
    snprintf(r->label, sizeof r->label, "%s", r->precision[0] ? r->precision : "?");
    if ((rc = index_steps(&L, r)))
        goto out;
    an_tensor_pass *tp = an_tensor_pass_begin(m->ref, r, opt);
    if (!tp) {
        rc = an_load_fail(err, errlen, AMPDIAG_TRACE_ENOMEM, L.path, "tensor records");
        goto out;
    }
    rc = m->records(m->ctx, r, tp, err, errlen);
    if (an_tensor_pass_end(r, tp, rc == 0) && !rc)
        rc = an_load_fail(err, errlen, AMPDIAG_TRACE_ENOMEM, L.path, "tensor records");
    if (rc || (rc = summarise(&L, r, opt)) || (rc = m->finish(m->ctx, r, err, errlen)))
        goto out;
    rc = analyse(&L, r);
out:
    free(L.layers);
    return rc;
}

int an_load(const char *path, const an_options *opt, an_run *r, char *err, size_t errlen)
{
    ampdiag_trace_reader *rd;
    int rc = an_load_begin(path, opt, r, &rd, err, errlen);
    return rc ? rc : an_load_finish(rd, opt, r, err, errlen);
}

void an_free(an_run *r)
{
    if (!r)
        return;
    for (size_t l = 0; r->layers && l < r->nlayers; l++) {
        for (int k = 0; k < AMPDIAG_NKINDS; k++) {
            free(r->layers[l].cell[k].hist);
            free(r->layers[l].cell[k].q);
            vec_free(&r->layers[l].pts[k]);
        }
        vec_free(&r->layers[l].act_rms);
    }
    free(r->layers);
    free(r->st_step);
    free(r->st_loss);
    free(r->steps);
    free(r->events);
    vec_free(&r->hist_steps);
    an_findings_free(r);
    for (size_t i = 0; r->attrs && i < r->nattrs; i++) {
        free(r->attrs[i].name);
        free(r->attrs[i].s);
    }
    free(r->attrs);
    free(r->evals);
    free(r->ex0_loss);
    free(r->ex0_metric);
    free(r->ex1_loss);
    free(r->ex1_metric);
    free(r->path);
    an_ranks_free(r->ranks);
    memset(r, 0, sizeof *r);
}
