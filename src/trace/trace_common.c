/*
 * trace_common.c - the trace schema as data (one field list per table), the HDF5 types built
 * from it, enumeration names, and error reporting shared by the writer and the reader.
 */
#include "trace/trace_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * Enumerations
 * ------------------------------------------------------------------------------------------ */

static const char *const kind_names[AMPDIAG_NKINDS] = {
    "activation", "activation_grad", "weight", "weight_grad", "update",
};

static const char *const event_names[AMPDIAG_NEVENT_CODES] = {
    "nan_forward", "inf_forward", "nan_backward", "inf_backward", "overflow",
    "scale_backoff", "scale_growth", "skipped_step", "clipped", "loss_spike",
    "divergence", "stop", "note", "no_loss_scaling", "hidden_scaler",
};

static const char *const status_names[] = {"running", "complete", "diverged", "interrupted"};

static const char *const scaling_names[AMPDIAG_NSCALINGS] = {"none", "delayed"};

static const char *const reason_names[AMPDIAG_NREASONS] = {
    "cadence", "every", "first", "last", "nonfinite", "skipped_step", "loss_spike",
    "grad_norm_spike", "after_event",
};
#define NSTATUS ((int)(sizeof status_names / sizeof status_names[0]))

const char *ampdiag_kind_name(int kind)
{
    return kind >= 0 && kind < AMPDIAG_NKINDS ? kind_names[kind] : NULL;
}

const char *ampdiag_event_name(int code)
{
    return code >= 0 && code < AMPDIAG_NEVENT_CODES ? event_names[code] : NULL;
}

const char *ampdiag_scaling_name(int scaling)
{
    return scaling >= 0 && scaling < AMPDIAG_NSCALINGS ? scaling_names[scaling] : NULL;
}

const char *ampdiag_reason_name(int reason)
{
    return reason >= 0 && reason < AMPDIAG_NREASONS ? reason_names[reason] : NULL;
}

int ampdiag_reason_is_event(int reason)
{
    return reason == AMPDIAG_REASON_NONFINITE || reason == AMPDIAG_REASON_SKIPPED ||
           reason == AMPDIAG_REASON_LOSS_SPIKE || reason == AMPDIAG_REASON_GRAD_SPIKE;
}

const char *ampdiag_status_name(int status)
{
    return status >= 0 && status < NSTATUS ? status_names[status] : NULL;
}

static int parse_name(const char *const *names, int n, const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

int ampdiag_kind_parse(const char *name) { return parse_name(kind_names, AMPDIAG_NKINDS, name); }
int ampdiag_event_parse(const char *name) { return parse_name(event_names, AMPDIAG_NEVENT_CODES, name); }
int ampdiag_status_parse(const char *name) { return parse_name(status_names, NSTATUS, name); }
int ampdiag_scaling_parse(const char *name) { return parse_name(scaling_names, AMPDIAG_NSCALINGS, name); }
int ampdiag_reason_parse(const char *name) { return parse_name(reason_names, AMPDIAG_NREASONS, name); }

int trace_enum_parse(trace_ftype t, const char *name)
{
    switch (t) {
    case FT_KIND: return ampdiag_kind_parse(name);
    case FT_CODE: return ampdiag_event_parse(name);
    case FT_SCALING: return ampdiag_scaling_parse(name);
    case FT_QSCHEME: return ampdiag_qscheme_parse(name);
    case FT_QRULE: return ampdiag_qrule_parse(name);
    case FT_QDIR: return ampdiag_qdir_parse(name);
    case FT_REASON: return ampdiag_reason_parse(name);
    default: return -1;
    }
}

/* The names of /quant's enums: the numerics' own (ampdiag_qscheme_name, ...; t_trace checks that
 * they agree), as constant tables. */
static const char *const qscheme_names[AMPDIAG_NQSCHEMES] = {"current", "mx", "nvfp4", "blockwise"};
static const char *const qrule_names[AMPDIAG_NQRULES] = {"floor", "rceil", "e4m3", "fp32", "pow2"};
static const char *const qdir_names[AMPDIAG_NQDIRS] = {"tensor", "rowwise", "columnwise", "tile"};

static const char *const *qnames(trace_ftype t, int *n)
{
    if (t == FT_QSCHEME) {
        *n = AMPDIAG_NQSCHEMES;
        return qscheme_names;
    }
    if (t == FT_QRULE) {
        *n = AMPDIAG_NQRULES;
        return qrule_names;
    }
    *n = AMPDIAG_NQDIRS;
    return qdir_names;
}

/* ------------------------------------------------------------------------------------------
 * Tables
 * ------------------------------------------------------------------------------------------ */

#define F(rec, member, type) {#member, type, offsetof(rec, member), 0, 0, 0}
#define FO(rec, member, type) {#member, type, offsetof(rec, member), 0, 1, 0} /* optional */
#define F1(rec, member, type) {#member, type, offsetof(rec, member), 0, 1, 1} /* optional, v1 only */
#define FS(rec, member) {#member, FT_STR, offsetof(rec, member), sizeof(((rec *)0)->member), 0, 0}
#define FSO(rec, member) {#member, FT_STR, offsetof(rec, member), sizeof(((rec *)0)->member), 1, 0}
#define NF(a) (sizeof(a) / sizeof((a)[0]))

static const trace_field layer_fields[] = {
    F(ampdiag_trace_layer, index, FT_I32),
    FS(ampdiag_trace_layer, name),
    FS(ampdiag_trace_layer, op),
    FS(ampdiag_trace_layer, shape),
    F(ampdiag_trace_layer, params, FT_U64),
    /* added in v1 after the reference traces: optional for readers (absent: "") */
    FSO(ampdiag_trace_layer, compute),
};

static const trace_field step_fields[] = {
    F(ampdiag_trace_step, step, FT_I64),
    F(ampdiag_trace_step, loss, FT_F64),
    F(ampdiag_trace_step, loss_scale, FT_F64),
    F(ampdiag_trace_step, grad_norm, FT_F64),
    F(ampdiag_trace_step, clip_coef, FT_F64),
    F(ampdiag_trace_step, skipped, FT_BOOL),
    FS(ampdiag_trace_step, skip_reason),
    F(ampdiag_trace_step, lr, FT_F64),
    F(ampdiag_trace_step, update_ratio, FT_F64),
    F(ampdiag_trace_step, nonfinite_grads, FT_U64),
    F(ampdiag_trace_step, wall_ms, FT_F64),
};

static const trace_field tensor_fields[] = {
    F(ampdiag_trace_tensor, step, FT_I64),
    F(ampdiag_trace_tensor, layer, FT_I32),
    F(ampdiag_trace_tensor, kind, FT_KIND),
    F(ampdiag_trace_tensor, count, FT_U64),
    F(ampdiag_trace_tensor, n_nan, FT_U64),
    F(ampdiag_trace_tensor, n_posinf, FT_U64),
    F(ampdiag_trace_tensor, n_neginf, FT_U64),
    F(ampdiag_trace_tensor, n_zero, FT_U64),
    F(ampdiag_trace_tensor, n_neg, FT_U64),
    F(ampdiag_trace_tensor, n_pos, FT_U64),
    F(ampdiag_trace_tensor, min, FT_F32),
    F(ampdiag_trace_tensor, max, FT_F32),
    F(ampdiag_trace_tensor, absmax, FT_F32),
    F(ampdiag_trace_tensor, absmin_nz, FT_F32),
    F(ampdiag_trace_tensor, mean, FT_F64),
    F(ampdiag_trace_tensor, rms, FT_F64),
    F(ampdiag_trace_tensor, fp16_overflow, FT_U64),
    F(ampdiag_trace_tensor, fp16_underflow, FT_U64),
    F(ampdiag_trace_tensor, fp16_subnormal, FT_U64),
    F(ampdiag_trace_tensor, bf16_overflow, FT_U64),
    F(ampdiag_trace_tensor, bf16_underflow, FT_U64),
    F(ampdiag_trace_tensor, bf16_subnormal, FT_U64),
    F(ampdiag_trace_tensor, lost_updates, FT_U64),
    /* added in v1 after the reference traces: optional for readers */
    FO(ampdiag_trace_tensor, lost_if_fp16, FT_U64),
    FO(ampdiag_trace_tensor, lost_if_bf16, FT_U64),
    /* added in v1 later still; version 2 writes them as /whatif rows */
    F1(ampdiag_trace_tensor, e4m3_overflow, FT_U64),
    F1(ampdiag_trace_tensor, e4m3_underflow, FT_U64),
    F1(ampdiag_trace_tensor, e4m3_subnormal, FT_U64),
    F1(ampdiag_trace_tensor, e5m2_overflow, FT_U64),
    F1(ampdiag_trace_tensor, e5m2_underflow, FT_U64),
    F1(ampdiag_trace_tensor, e5m2_subnormal, FT_U64),
};

static const trace_field hist_fields[] = {
    F(ampdiag_trace_hist, step, FT_I64),
    F(ampdiag_trace_hist, layer, FT_I32),
    F(ampdiag_trace_hist, kind, FT_KIND),
    {"bins", FT_HIST, offsetof(ampdiag_trace_hist, bin), 0, 0, 0},
};

static const trace_field event_fields[] = {
    F(ampdiag_trace_event, step, FT_I64),
    F(ampdiag_trace_event, layer, FT_I32),
    F(ampdiag_trace_event, code, FT_CODE),
    F(ampdiag_trace_event, value, FT_F64),
    FS(ampdiag_trace_event, message),
    /* added in v1 and v2 after traces without them: optional for readers (absent: see
     * events_legacy) */
    FO(ampdiag_trace_event, phase, FT_I32),
    FO(ampdiag_trace_event, rows_from, FT_I64),
    FO(ampdiag_trace_event, rows_to, FT_I64),
};
#define EVENT_PHASE_FIELD 5 /* its index above */

static const trace_field eval_fields[] = {
    F(ampdiag_trace_eval, step, FT_I64),
    F(ampdiag_trace_eval, loss, FT_F64),
    F(ampdiag_trace_eval, metric, FT_F64),
    /* added in v1 after the reference traces: optional for readers (absent: NaN, see reader) */
    FO(ampdiag_trace_eval, loss_se, FT_F64),
};

/* version 2 */
static const trace_field format_fields[] = {
    F(ampdiag_trace_format, index, FT_I32),
    FS(ampdiag_trace_format, name),
    F(ampdiag_trace_format, bits, FT_I32),
    F(ampdiag_trace_format, exp_bits, FT_I32),
    F(ampdiag_trace_format, mant_bits, FT_I32),
    F(ampdiag_trace_format, max_finite, FT_F64),
    F(ampdiag_trace_format, min_normal, FT_F64),
    F(ampdiag_trace_format, min_subnormal, FT_F64),
    F(ampdiag_trace_format, has_inf, FT_BOOL),
};

static const trace_field whatif_fields[] = {
    F(ampdiag_trace_whatif, step, FT_I64),
    F(ampdiag_trace_whatif, layer, FT_I32),
    F(ampdiag_trace_whatif, kind, FT_KIND),
    F(ampdiag_trace_whatif, format, FT_I32),
    F(ampdiag_trace_whatif, scaling, FT_SCALING),
    F(ampdiag_trace_whatif, scale, FT_F32),
    F(ampdiag_trace_whatif, count, FT_U64),
    F(ampdiag_trace_whatif, overflow, FT_U64),
    F(ampdiag_trace_whatif, underflow, FT_U64),
    F(ampdiag_trace_whatif, subnormal, FT_U64),
};

/* added to version 2 after its first traces (traces/FORMAT.md, "/quant") */
static const trace_field quant_fields[] = {
    F(ampdiag_trace_quant, step, FT_I64),
    F(ampdiag_trace_quant, layer, FT_I32),
    F(ampdiag_trace_quant, kind, FT_KIND),
    F(ampdiag_trace_quant, format, FT_I32),
    F(ampdiag_trace_quant, scheme, FT_QSCHEME),
    F(ampdiag_trace_quant, rule, FT_QRULE),
    F(ampdiag_trace_quant, direction, FT_QDIR),
    F(ampdiag_trace_quant, block, FT_I32),
    F(ampdiag_trace_quant, scale, FT_F32),
    F(ampdiag_trace_quant, count, FT_U64),
    F(ampdiag_trace_quant, nonfinite, FT_U64),
    F(ampdiag_trace_quant, saturated, FT_U64),
    F(ampdiag_trace_quant, flushed, FT_U64),
    F(ampdiag_trace_quant, subnormal, FT_U64),
    F(ampdiag_trace_quant, poisoned, FT_U64),
    F(ampdiag_trace_quant, blocks, FT_U64),
    F(ampdiag_trace_quant, zero_blocks, FT_U64),
    F(ampdiag_trace_quant, nonfinite_blocks, FT_U64),
    F(ampdiag_trace_quant, scale_clamped, FT_U64),
    F(ampdiag_trace_quant, scale_underflow, FT_U64),
    F(ampdiag_trace_quant, scale_subnormal, FT_U64),
    F(ampdiag_trace_quant, scale_emin, FT_I32),
    F(ampdiag_trace_quant, scale_emax, FT_I32),
    {"scale_hist", FT_QHIST, offsetof(ampdiag_trace_quant, scale_hist), 0, 0, 0},
    F(ampdiag_trace_quant, sig_sq, FT_F64),
    F(ampdiag_trace_quant, err_sq, FT_F64),
    F(ampdiag_trace_quant, max_rel_err, FT_F64),
    F(ampdiag_trace_quant, disagree, FT_U64),
    F(ampdiag_trace_quant, disagree_sq, FT_F64),
};

/* added to version 2 after /quant (traces/FORMAT.md, "/eval_examples") */
static const trace_field eval_example_fields[] = {
    F(ampdiag_trace_eval_example, step, FT_I64),
    F(ampdiag_trace_eval_example, example, FT_I64),
    F(ampdiag_trace_eval_example, loss, FT_F64),
    F(ampdiag_trace_eval_example, metric, FT_F64),
};

/* optional in every version (traces/FORMAT.md, "/traced") */
static const trace_field traced_fields[] = {
    F(ampdiag_trace_traced, step, FT_I64),
    F(ampdiag_trace_traced, reason, FT_REASON),
    F(ampdiag_trace_traced, event_step, FT_I64),
    F(ampdiag_trace_traced, cadence, FT_I32),
    F(ampdiag_trace_traced, record_ms, FT_F64),
    F(ampdiag_trace_traced, step_ms, FT_F64),
};

/*
 * Chunk rows. Shuffle + deflate compress a compound column-wise, so long chunks compress best
 * (a 1024-row /tensors chunk to about 1/11 of its size); but under SWMR every flush rewrites the
 * partly filled last chunk of each table, recompressing it and leaving the old copy as dead
 * space (HDF5 does not reuse freed space while in SWMR mode; close compacts the file). So the
 * tables that gain few rows per flush (/steps, /events, /eval, /layers) have 64-row chunks, and
 * /histograms (2.3 KB rows) 64; /tensors, which gains layers x 5 rows per step, 1024, and
 * /whatif (about 4 rows per tensor row, 45 bytes each) 2048, /quant (a few rows per tensor row,
 * 434 bytes each, mostly zeros) 256. /formats is written once; /traced gains a row per traced
 * step (41 bytes): 64.
 */
const trace_table trace_tables[TBL_N] = {
    [TBL_LAYERS] = {"/layers", "layer", layer_fields, NF(layer_fields), sizeof(ampdiag_trace_layer),
                    64, offsetof(ampdiag_trace_layer, index), 1, 1},
    [TBL_STEPS] = {"/steps", "step", step_fields, NF(step_fields), sizeof(ampdiag_trace_step),
                   64, offsetof(ampdiag_trace_step, step), 0, 1},
    [TBL_TENSORS] = {"/tensors", "tensor", tensor_fields, NF(tensor_fields),
                     sizeof(ampdiag_trace_tensor), 1024, offsetof(ampdiag_trace_tensor, step), 0, 1},
    [TBL_HISTS] = {"/histograms", "histogram", hist_fields, NF(hist_fields),
                   sizeof(ampdiag_trace_hist), 64, offsetof(ampdiag_trace_hist, step), 0, 1},
    [TBL_EVENTS] = {"/events", "event", event_fields, NF(event_fields), sizeof(ampdiag_trace_event),
                    64, offsetof(ampdiag_trace_event, step), 0, 1},
    [TBL_EVALS] = {"/eval", "eval", eval_fields, NF(eval_fields), sizeof(ampdiag_trace_eval), 64,
                   offsetof(ampdiag_trace_eval, step), 0, 1},
    [TBL_FORMATS] = {"/formats", "format", format_fields, NF(format_fields),
                     sizeof(ampdiag_trace_format), 16, offsetof(ampdiag_trace_format, index), 1, 2},
    [TBL_WHATIF] = {"/whatif", "what-if", whatif_fields, NF(whatif_fields),
                    sizeof(ampdiag_trace_whatif), 2048, offsetof(ampdiag_trace_whatif, step), 0, 2},
    [TBL_QUANT] = {"/quant", "quantisation what-if", quant_fields, NF(quant_fields), sizeof(ampdiag_trace_quant),
                   256, offsetof(ampdiag_trace_quant, step), 0, 3},
    [TBL_EVAL_EXAMPLES] = {"/eval_examples", "evaluation example", eval_example_fields, NF(eval_example_fields),
                           sizeof(ampdiag_trace_eval_example), 1024,
                           offsetof(ampdiag_trace_eval_example, step), 0, 3},
    [TBL_TRACED] = {"/traced", "traced step", traced_fields, NF(traced_fields),
                    sizeof(ampdiag_trace_traced), 64, offsetof(ampdiag_trace_traced, step), 0, 0},
};

static hid_t enum_type(const char *const *names, int n, int for_file)
{
    hid_t t = H5Tenum_create(for_file ? H5T_STD_U8LE : H5T_NATIVE_INT32);
    if (t < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        herr_t rc;
        if (for_file) {
            uint8_t v = (uint8_t)i;
            rc = H5Tenum_insert(t, names[i], &v);
        } else {
            int32_t v = i;
            rc = H5Tenum_insert(t, names[i], &v);
        }
        if (rc < 0) {
            H5Tclose(t);
            return -1;
        }
    }
    return t;
}

hid_t trace_field_type(trace_ftype t, size_t size, int for_file)
{
    switch (t) {
    case FT_I64: return H5Tcopy(for_file ? H5T_STD_I64LE : H5T_NATIVE_INT64);
    case FT_I32: return H5Tcopy(for_file ? H5T_STD_I32LE : H5T_NATIVE_INT32);
    case FT_BOOL: return H5Tcopy(for_file ? H5T_STD_U8LE : H5T_NATIVE_INT32);
    case FT_U64: return H5Tcopy(for_file ? H5T_STD_U64LE : H5T_NATIVE_UINT64);
    case FT_F32: return H5Tcopy(for_file ? H5T_IEEE_F32LE : H5T_NATIVE_FLOAT);
    case FT_F64: return H5Tcopy(for_file ? H5T_IEEE_F64LE : H5T_NATIVE_DOUBLE);
    case FT_STR: {
        hid_t s = H5Tcopy(H5T_C_S1);
        if (s < 0)
            return -1;
        if (H5Tset_size(s, size) < 0 || H5Tset_strpad(s, H5T_STR_NULLTERM) < 0 ||
            H5Tset_cset(s, H5T_CSET_UTF8) < 0) {
            H5Tclose(s);
            return -1;
        }
        return s;
    }
    case FT_KIND: return enum_type(kind_names, AMPDIAG_NKINDS, for_file);
    case FT_CODE: return enum_type(event_names, AMPDIAG_NEVENT_CODES, for_file);
    case FT_SCALING: return enum_type(scaling_names, AMPDIAG_NSCALINGS, for_file);
    case FT_QSCHEME: case FT_QRULE: case FT_QDIR: {
        int n;
        const char *const *names = qnames(t, &n);
        return enum_type(names, n, for_file);
    }
    case FT_REASON: return enum_type(reason_names, AMPDIAG_NREASONS, for_file);
    case FT_HIST: case FT_QHIST: {
        hsize_t dim = trace_ftype_array_len(t);
        return H5Tarray_create2(for_file ? H5T_STD_U64LE : H5T_NATIVE_UINT64, 1, &dim);
    }
    }
    return -1;
}

static hid_t table_type(const trace_table *tb, int for_file, int written_only)
{
    size_t total = 0;
    hid_t *ft = calloc(tb->nfields, sizeof *ft);
    if (!ft)
        return -1;
    hid_t ct = -1;
    for (size_t i = 0; i < tb->nfields; i++) {
        if (written_only && tb->fields[i].v1_only)
            continue;
        ft[i] = trace_field_type(tb->fields[i].type, tb->fields[i].size, for_file);
        if (ft[i] < 0)
            goto done;
        total += H5Tget_size(ft[i]);
    }
    ct = H5Tcreate(H5T_COMPOUND, for_file ? total : tb->rec_size);
    if (ct < 0)
        goto done;
    size_t off = 0;
    for (size_t i = 0; i < tb->nfields; i++) {
        if (!ft[i])
            continue; /* left out */
        size_t at = for_file ? off : tb->fields[i].offset;
        if (H5Tinsert(ct, tb->fields[i].name, at, ft[i]) < 0) {
            H5Tclose(ct);
            ct = -1;
            goto done;
        }
        off += H5Tget_size(ft[i]);
    }
done:
    for (size_t i = 0; i < tb->nfields; i++)
        if (ft[i] > 0)
            H5Tclose(ft[i]);
    free(ft);
    return ct;
}

hid_t trace_table_type(const trace_table *tb, int for_file) { return table_type(tb, for_file, 0); }
hid_t trace_table_wtype(const trace_table *tb, int for_file) { return table_type(tb, for_file, 1); }

void trace_fill_record(const trace_table *tb, void *rec)
{
    memset(rec, 0, tb->rec_size);
    char *p = rec;
    for (size_t i = 0; i < tb->nfields; i++) {
        if (tb->fields[i].type == FT_F32) {
            float v = NAN;
            memcpy(p + tb->fields[i].offset, &v, sizeof v);
        } else if (tb->fields[i].type == FT_F64) {
            double v = NAN;
            memcpy(p + tb->fields[i].offset, &v, sizeof v);
        }
    }
    if (tb->key_is_i32) {
        int32_t k = -1;
        memcpy(p + tb->key_offset, &k, sizeof k);
    } else {
        int64_t k = -1;
        memcpy(p + tb->key_offset, &k, sizeof k);
    }
}

/* ------------------------------------------------------------------------------------------
 * Tensor records <-> ampdiag_tstats
 * ------------------------------------------------------------------------------------------ */

void ampdiag_trace_tensor_from_tstats(ampdiag_trace_tensor *t, const ampdiag_tstats *s)
{
    t->count = s->count;
    t->n_nan = s->n_nan;
    t->n_posinf = s->n_posinf;
    t->n_neginf = s->n_neginf;
    t->n_zero = s->n_zero;
    t->n_neg = s->n_neg;
    t->n_pos = s->n_pos;
    uint64_t finite = ampdiag_tstats_finite(s);
    if (finite == 0) {
        t->min = t->max = t->absmax = NAN;
    } else {
        t->min = s->min;
        t->max = s->max;
        t->absmax = s->absmax;
    }
    t->absmin_nz = s->n_neg + s->n_pos == 0 ? NAN : s->absmin_nz;
    t->mean = ampdiag_tstats_mean(s);
    t->rms = ampdiag_tstats_rms(s);
    t->fp16_overflow = s->fp16_overflow;
    t->fp16_underflow = s->fp16_underflow;
    t->fp16_subnormal = s->fp16_subnormal;
    t->bf16_overflow = s->bf16_overflow;
    t->bf16_underflow = s->bf16_underflow;
    t->bf16_subnormal = s->bf16_subnormal;
    t->e4m3_overflow = s->e4m3_overflow;
    t->e4m3_underflow = s->e4m3_underflow;
    t->e4m3_subnormal = s->e4m3_subnormal;
    t->e5m2_overflow = s->e5m2_overflow;
    t->e5m2_underflow = s->e5m2_underflow;
    t->e5m2_subnormal = s->e5m2_subnormal;
}

void ampdiag_trace_tensor_to_tstats(const ampdiag_trace_tensor *t, ampdiag_tstats *s)
{
    ampdiag_tstats_init(s);
    s->count = t->count;
    s->n_nan = t->n_nan;
    s->n_posinf = t->n_posinf;
    s->n_neginf = t->n_neginf;
    s->n_zero = t->n_zero;
    s->n_neg = t->n_neg;
    s->n_pos = t->n_pos;
    s->fp16_overflow = t->fp16_overflow;
    s->fp16_underflow = t->fp16_underflow;
    s->fp16_subnormal = t->fp16_subnormal;
    s->bf16_overflow = t->bf16_overflow;
    s->bf16_underflow = t->bf16_underflow;
    s->bf16_subnormal = t->bf16_subnormal;
    s->e4m3_overflow = t->e4m3_overflow;
    s->e4m3_underflow = t->e4m3_underflow;
    s->e4m3_subnormal = t->e4m3_subnormal;
    s->e5m2_overflow = t->e5m2_overflow;
    s->e5m2_underflow = t->e5m2_underflow;
    s->e5m2_subnormal = t->e5m2_subnormal;
    uint64_t finite = ampdiag_tstats_finite(s);
    if (finite > 0) {
        if (!isnan(t->min)) s->min = t->min;
        if (!isnan(t->max)) s->max = t->max;
        if (!isnan(t->absmax)) s->absmax = t->absmax;
        if (!isnan(t->mean)) s->sum = t->mean * (double)finite;
        if (!isnan(t->rms)) s->sumsq = t->rms * t->rms * (double)finite;
    }
    if (!isnan(t->absmin_nz))
        s->absmin_nz = t->absmin_nz;
}

/* ------------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------------ */

static _Thread_local char errbuf[1024];

const char *ampdiag_trace_errmsg(void) { return errbuf; }

int trace_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    return code;
}

const char *ampdiag_trace_strerror(int err)
{
    switch (err) {
    case AMPDIAG_TRACE_OK: return "success";
    case AMPDIAG_TRACE_EINVAL: return "invalid argument";
    case AMPDIAG_TRACE_EIO: return "I/O error";
    case AMPDIAG_TRACE_ENOMEM: return "out of memory";
    case AMPDIAG_TRACE_EEXIST: return "file exists";
    case AMPDIAG_TRACE_ENOENT: return "no such file";
    case AMPDIAG_TRACE_ENOTHDF5: return "not an HDF5 file";
    case AMPDIAG_TRACE_ENOTTRACE: return "not an ampdiag trace";
    case AMPDIAG_TRACE_EVERSION: return "newer trace format";
    case AMPDIAG_TRACE_ESCHEMA: return "invalid trace contents";
    case AMPDIAG_TRACE_ETRUNCATED: return "truncated or corrupt file";
    }
    return "unknown error";
}

int ampdiag_trace_err_is_io(int err)
{
    return err == AMPDIAG_TRACE_EIO || err == AMPDIAG_TRACE_ENOMEM;
}

static _Thread_local trace_h5err captured;
static _Thread_local int have_captured;

void trace_h5err_capture(void)
{
    trace_h5err_get(&captured);
    have_captured = 1;
}

void trace_h5_io_end(int ok, hid_t ms, hid_t fs)
{
    if (!ok)
        trace_h5err_capture();
    if (ms >= 0)
        H5Sclose(ms);
    if (fs >= 0)
        H5Sclose(fs);
}

void trace_h5err_take(trace_h5err *e)
{
    if (have_captured)
        *e = captured;
    else
        trace_h5err_get(e);
    have_captured = 0;
}

int ampdiag_trace_process_init(void)
{
    static int done; /* HDF5 refuses a second H5dont_atexit (a fuzzer calls main many times) */
    if (done)
        return 0;
    done = 1;
    return H5dont_atexit() < 0 ? -1 : 0;
}

/* The HDF5 lock: h5_depth counts this thread's open quiet sections (a forked child inherits the
 * count with the lock, and so never waits for it); the printing silenced by the outermost
 * section is saved in saved_func / saved_data (read and written only by the lock's holder). */
static pthread_mutex_t h5_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int h5_depth;
static H5E_auto2_t saved_func;
static void *saved_data;

static void h5_enter(void)
{
    pthread_mutex_lock(&h5_lock);
    if (H5Eget_auto2(H5E_DEFAULT, &saved_func, &saved_data) < 0) {
        saved_func = NULL;
        saved_data = NULL;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static void h5_leave(void)
{
    H5Eset_auto2(H5E_DEFAULT, saved_func, saved_data);
    pthread_mutex_unlock(&h5_lock);
}

void trace_quiet_begin(trace_quiet *q)
{
    (void)q;
    if (h5_depth++ == 0)
        h5_enter();
    have_captured = 0;
}

void trace_quiet_end(const trace_quiet *q)
{
    (void)q;
    if (h5_depth > 0 && --h5_depth == 0)
        h5_leave();
}

int trace_h5_release(void)
{
    int depth = h5_depth;
    if (depth > 0) {
        h5_depth = 0;
        h5_leave();
    }
    return depth;
}

void trace_h5_reacquire(int depth)
{
    if (depth > 0 && h5_depth == 0) {
        h5_enter();
        h5_depth = depth;
    }
}

struct walk_state {
    trace_h5err *e;
    char innermost[512];
};

static herr_t walk_cb(unsigned n, const H5E_error2_t *err, void *data)
{
    (void)n;
    struct walk_state *w = data;
    const char *d = err->desc ? err->desc : "";
    if (err->min_num == H5E_NOTHDF5 || strstr(d, "file signature not found"))
        w->e->not_hdf5 = 1;
    if (err->min_num == H5E_TRUNCATED || strstr(d, "truncated file"))
        w->e->truncated = 1;
    if (strstr(d, "already open for write"))
        w->e->open_for_write = 1;
    if (strstr(d, "unable to lock the file"))
        w->e->locked = 1;
    const char *en = strstr(d, "errno = ");
    if (en && !w->e->os_errno)
        w->e->os_errno = atoi(en + 8);
    if (*d)
        snprintf(w->innermost, sizeof w->innermost, "%s", d);
    /* an OS error text quoted as "error message = '...'" beats everything */
    const char *em = strstr(d, "error message = '");
    if (em) {
        em += strlen("error message = '");
        const char *end = strchr(em, '\'');
        size_t len = end ? (size_t)(end - em) : strlen(em);
        if (len >= sizeof w->e->detail)
            len = sizeof w->e->detail - 1;
        memcpy(w->e->detail, em, len);
        w->e->detail[len] = 0;
    }
    return 0;
}

void trace_h5err_get(trace_h5err *e)
{
    struct walk_state w;
    memset(e, 0, sizeof *e);
    memset(&w, 0, sizeof w);
    w.e = e;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk_cb, &w);
    if (!e->detail[0])
        snprintf(e->detail, sizeof e->detail, "%.255s", w.innermost[0] ? w.innermost : "HDF5 error");
}

int trace_copy_text(char *dst, size_t size, const char *src, size_t srcmax)
{
    if (!src)
        src = "";
    size_t len = strnlen(src, srcmax), cut = 0;
    if (len >= size) {
        len = size - 1;
        /* do not end inside a multi-byte character: back off over continuation bytes and the
         * lead byte they belong to */
        while (len > 0 && ((unsigned char)src[len] & 0xC0) == 0x80)
            len--;
        cut = 1;
    }
    memcpy(dst, src, len);
    memset(dst + len, 0, size - len);
    return (int)cut;
}

/* ------------------------------------------------------------------------------------------
 * Rows read
 * ------------------------------------------------------------------------------------------ */

/* Enum values this version does not know (negative, see enum_mtype) all read as -1. */
static void fix_unknown_enums(const trace_table *tb, void *rows, size_t n)
{
    for (size_t f = 0; f < tb->nfields; f++) {
        if (!trace_ftype_is_enum(tb->fields[f].type))
            continue;
        for (size_t i = 0; i < n; i++) {
            char *p = (char *)rows + i * tb->rec_size + tb->fields[f].offset;
            int32_t v;
            memcpy(&v, p, sizeof v);
            if (v < 0) {
                v = -1;
                memcpy(p, &v, sizeof v);
            }
        }
    }
}

size_t trace_field_msize(const trace_field *f)
{
    switch (f->type) {
    case FT_I64: case FT_U64: case FT_F64: return 8;
    case FT_I32: case FT_BOOL: case FT_F32: case FT_KIND: case FT_CODE: case FT_SCALING: case FT_REASON:
        return 4;
    case FT_QSCHEME: case FT_QRULE: case FT_QDIR: return 4;
    case FT_STR: return f->size;
    case FT_HIST: case FT_QHIST: return trace_ftype_array_len(f->type) * sizeof(uint64_t);
    }
    return 0;
}

/* Optional fields the file lacks read as 0 (the memory type leaves them out, so HDF5 does not
 * write them); a float one as NaN (not recorded: 0 would be a value). */
static void clear_absent(const trace_table *tb, uint64_t absent, void *rows, size_t n)
{
    for (size_t f = 0; f < tb->nfields && f < 64; f++) {
        if (!(absent & (UINT64_C(1) << f)))
            continue;
        size_t size = trace_field_msize(&tb->fields[f]);
        char *p = (char *)rows + tb->fields[f].offset;
        if (tb->fields[f].type == FT_F64) {
            double nan = NAN;
            for (size_t i = 0; i < n; i++)
                memcpy(p + i * tb->rec_size, &nan, sizeof nan);
        } else if (size == sizeof(uint64_t)) { /* the common case: one store each */
            uint64_t zero = 0;
            for (size_t i = 0; i < n; i++)
                memcpy(p + i * tb->rec_size, &zero, sizeof zero);
        } else {
            for (size_t i = 0; i < n; i++)
                memset(p + i * tb->rec_size, 0, size);
        }
    }
}

/* Every fixed-length string ends within its field. HDF5 terminates a string it converts, but a
 * string stored as the memory type is (NUL-terminated UTF-8 of the same size, as this writer
 * stores it) is copied as it is: a file whose string fills its width has no NUL there. Its
 * last byte becomes one, as HDF5's conversion would make it. */
static void terminate_strings(const trace_table *tb, void *rows, size_t n)
{
    for (size_t f = 0; f < tb->nfields; f++) {
        if (tb->fields[f].type != FT_STR || tb->fields[f].size == 0)
            continue;
        char *p = (char *)rows + tb->fields[f].offset + tb->fields[f].size - 1;
        for (size_t i = 0; i < n; i++)
            p[i * tb->rec_size] = 0;
    }
}

/* Events of a trace written before their phase and rows were fields: ampdiag run named an
 * evaluation's batch at the start of the message ("eval: validation rows 0-63: NaN in fc1
 * ..."), so the phase and rows are read from there, once, here; every reader above sees them as
 * the fields. */
static void events_legacy(ampdiag_trace_event *ev, size_t n)
{
    static const char eval[] = "eval: ";
    for (size_t i = 0; i < n; i++) {
        long a, b;
        char rest[2];
        ev[i].rows_from = ev[i].rows_to = -1;
        ev[i].phase = memcmp(ev[i].message, eval, sizeof eval - 1) == 0 ? AMPDIAG_PHASE_EVAL : AMPDIAG_PHASE_TRAIN;
        if (ev[i].phase == AMPDIAG_PHASE_EVAL &&
            sscanf(ev[i].message + sizeof eval - 1, "validation rows %ld-%ld%1[:]", &a, &b, rest) == 3 && a >= 0 &&
            b >= a) {
            ev[i].rows_from = a;
            ev[i].rows_to = b;
        }
    }
}

void trace_rows_fix(const trace_table *tb, uint64_t absent, void *rows, size_t n)
{
    terminate_strings(tb, rows, n);
    fix_unknown_enums(tb, rows, n);
    if (absent)
        clear_absent(tb, absent, rows, n);
}

void trace_events_fix(const trace_table *tb, uint64_t absent, void *rows, size_t n)
{
    if (tb != &trace_tables[TBL_EVENTS])
        return;
    if (absent & (UINT64_C(1) << EVENT_PHASE_FIELD))
        events_legacy(rows, n);
    else
        for (size_t i = 0; i < n; i++) { /* a phase this version does not know: a training step's */
            ampdiag_trace_event *e = (ampdiag_trace_event *)rows + i;
            if (e->phase != AMPDIAG_PHASE_EVAL)
                e->phase = AMPDIAG_PHASE_TRAIN;
            if (e->rows_from < 0 || e->rows_to < e->rows_from)
                e->rows_from = e->rows_to = -1;
        }
}

int trace_rows_bad_step(const trace_table *tb, const void *rows, size_t n)
{
    if (tb->key_is_i32)
        return 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t k;
        memcpy(&k, (const char *)rows + i * tb->rec_size + tb->key_offset, sizeof k);
        bad |= k > AMPDIAG_TRACE_MAX_STEP || k < -AMPDIAG_TRACE_MAX_STEP;
    }
    return bad;
}

/* ------------------------------------------------------------------------------------------
 * /quant rows and ampdiag_qstats
 * ------------------------------------------------------------------------------------------ */

void ampdiag_trace_quant_from_qstats(ampdiag_trace_quant *t, const ampdiag_qstats *q)
{
    memset(t, 0, sizeof *t);
    t->format = (int32_t)q->spec.elem;
    t->scheme = (int32_t)q->spec.scheme;
    t->rule = (int32_t)q->spec.rule;
    t->direction = (int32_t)q->spec.dir;
    t->block = q->spec.block;
    t->scale = q->scale;
    t->count = q->count;
    t->nonfinite = q->nonfinite;
    t->saturated = q->saturated;
    t->flushed = q->flushed;
    t->subnormal = q->subnormal;
    t->poisoned = q->poisoned;
    t->blocks = q->blocks;
    t->zero_blocks = q->zero_blocks;
    t->nonfinite_blocks = q->nonfinite_blocks;
    t->scale_clamped = q->scale_clamped;
    t->scale_underflow = q->scale_underflow;
    t->scale_subnormal = q->scale_subnormal;
    t->scale_emin = q->scale_emin;
    t->scale_emax = q->scale_emax;
    memcpy(t->scale_hist, q->scale_hist, sizeof t->scale_hist);
    t->sig_sq = q->sig_sq;
    t->err_sq = q->err_sq;
    t->max_rel_err = q->max_rel_err;
    t->disagree = q->disagree;
    t->disagree_sq = q->disagree_sq;
}

void ampdiag_trace_quant_to_qstats(const ampdiag_trace_quant *t, ampdiag_qstats *q)
{
    memset(q, 0, sizeof *q);
    q->spec.elem = (ampdiag_format)t->format;
    q->spec.scheme = (ampdiag_qscheme)t->scheme;
    q->spec.rule = (ampdiag_qrule)t->rule;
    q->spec.dir = (ampdiag_qdir)t->direction;
    q->spec.block = t->block;
    q->computed = 1;
    q->scale = t->scale;
    q->count = t->count;
    q->nonfinite = t->nonfinite;
    q->saturated = t->saturated;
    q->flushed = t->flushed;
    q->subnormal = t->subnormal;
    q->poisoned = t->poisoned;
    q->blocks = t->blocks;
    q->zero_blocks = t->zero_blocks;
    q->nonfinite_blocks = t->nonfinite_blocks;
    q->scale_clamped = t->scale_clamped;
    q->scale_underflow = t->scale_underflow;
    q->scale_subnormal = t->scale_subnormal;
    q->scale_emin = t->scale_emin;
    q->scale_emax = t->scale_emax;
    memcpy(q->scale_hist, t->scale_hist, sizeof q->scale_hist);
    q->sig_sq = t->sig_sq;
    q->err_sq = t->err_sq;
    q->max_rel_err = t->max_rel_err;
    q->disagree = t->disagree;
    q->disagree_sq = t->disagree_sq;
}
