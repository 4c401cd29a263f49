/*
 * quant.h - the block-scaled quantisation what-if of `ampdiag run` (--whatif LIST): which
 * schemes (MX, NVFP4, FP8 blockwise, FP8 current scaling; ampdiag_qspec_parse) each traced
 * tensor gets, the 2-D shape the model gives each tensor, the counts (through the backend's
 * quant_whatif, on the tracer thread, from the tensors the statistics read) and their /quant
 * rows in the trace (traces/FORMAT.md).
 *
 * Shapes: an activation or its gradient is [rows = batch x positions, features]; a layer's
 * parameters are its first parameter as a matrix when it is 2-D (a linear weight [out, in], an
 * embedding's token table) followed by the others (bias, positions table) as a 1-D tail; a layer
 * whose parameters are 1-D (layer norm), or an output of one feature per row, is a 1-D tensor.
 */
#ifndef AMPDIAG_TRAIN_QUANT_H
#define AMPDIAG_TRAIN_QUANT_H

#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "model/model.h"

#include <stddef.h>

typedef struct quant_plan quant_plan;
typedef struct quant_slot quant_slot;

/* The plan of model m for the list (NULL: ampdiag_qspec_default()). 0 with *out NULL when there
 * is nothing to count (an empty list, "none", or a backend without quant_whatif); -1 with a
 * message naming the item for a bad list. */
int quant_plan_create(const model *m, const char *list, quant_plan **out, char *err, size_t errlen);
void quant_plan_free(quant_plan *p);
/* The schemes counted, as a list of names ("mxfp8-e4m3:floor@row,..."); "" without a plan. */
const char *quant_plan_names(const quant_plan *p);

/* One traced step's results (every layer and kind); NULL when out of memory (or p is NULL). */
quant_slot *quant_slot_new(const quant_plan *p);
void quant_slot_free(quant_slot *s);

/* Count x[0..n), the tensor of kind mk of layer li, with statistics st (for its amax), into
 * the slot. Nothing without a plan. Thread-safe for different (li, mk). */
void quant_count(const quant_plan *p, const backend *bk, quant_slot *s, int li, model_tensor_kind mk,
                 const float *x, size_t n, const ampdiag_tstats *st);
/* Write what quant_count put in the slot for (li, mk) as /quant rows of (step, li, kind);
 * then forget it. 0, or the writer's negative error code. */
int quant_write(const quant_plan *p, quant_slot *s, ampdiag_trace_writer *w, int64_t step, int li,
                model_tensor_kind mk, ampdiag_tensor_kind kind);

#endif
