/*
 * quant.h - the /quant rows of one what-if column read again, step by step, for the charts
 * (the loader keeps their sums per cell: an_qcell, run.h).
 */
#ifndef AMPDIAG_ANALYSIS_QUANT_H
#define AMPDIAG_ANALYSIS_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/run.h"

/* One /quant row of a column: its step, layer and kind, SQNR (dB: NaN without signal, +inf
 * without error) and the shares of its finite values flushed to zero and saturated. */
typedef struct an_qpoint {
    int64_t step;
    int32_t layer, kind;
    float sqnr_db, flush, saturated;
} an_qpoint;

/* The rows of /quant column col of run r (an_whatif_is_quant), in the trace's order, into *out
 * (malloc'd, *n of them; NULL and 0 when none). Reads the trace again. Returns 0 or an
 * ampdiag_trace error code (message in err). */
int an_read_quant(const an_run *r, int col, an_qpoint **out, size_t *n, char *err, size_t errlen);

#endif
