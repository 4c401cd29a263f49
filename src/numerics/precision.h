/*
 * precision.h - the precision policies (docs/ARCHITECTURE.md, DESIGN.md section 3) as one enum
 * for both sides of the program: the training loop runs a policy, the trace records its name
 * ("fp32", "fp16", "bf16", "bf16-pure"), and the reading side parses that name back into the
 * same enum once, when it loads the trace.
 */
#ifndef AMPDIAG_PRECISION_H
#define AMPDIAG_PRECISION_H

#include "ampdiag.h"

typedef enum precision {
    PREC_FP32,      /* everything FP32 */
    PREC_FP16,      /* autocast-style FP16, FP32 master weights */
    PREC_BF16,      /* autocast-style BF16, FP32 master weights */
    PREC_BF16_PURE, /* BF16 compute as PREC_BF16, parameters and their gradients held in BF16 */
    PREC_COUNT      /* (the reading side: a trace whose precision this version does not know) */
} precision;

/* "fp32", "fp16", "bf16", "bf16-pure" (case-insensitive). 0, or -1 when unknown. */
int precision_parse(const char *name, precision *p);
/* The name, "?" for PREC_COUNT or out of range. */
const char *precision_name(precision p);
/* The 16-bit format a policy computes in (AMPDIAG_FP32 for PREC_FP32). */
ampdiag_format precision_format(precision p);
/* The format the weights are stored in: BF16 for bf16-pure, FP32 otherwise. */
ampdiag_format precision_weights_format(precision p);

#endif
