/*
 * fp8.h - what casting the traced tensors to FP8 would do, from the E4M3 / E5M2 what-if
 * columns of the run's cells (unscaled, and under Transformer Engine's delayed scaling): the
 * findings every renderer prints, which tensors an FP8 recipe would hurt, and why.
 */
#ifndef AMPDIAG_ANALYSIS_FP8_H
#define AMPDIAG_ANALYSIS_FP8_H

#include "analysis/findings.h"

#include <stddef.h>

/* The findings (part of an_findings_of). */
void an_fp8_findings_of(const an_run *r, an_fp8_findings *f);

/* Why FP8 would hurt the tensor, as one clause without the tensor's name (renderers add it,
 * escaped): "3.1% of values would flush to zero in E4M3 even with delayed scaling: its dynamic
 * range 2^-30..2^8 (38.0 binades) is wider than E4M3's 2^-9..448 (17.8)". */
void an_fp8_why(const an_fp8_hurt *h, char *buf, size_t n);

/* The recipe's format for a kind: E4M3 for activations and weights, E5M2 for gradients. */
ampdiag_format an_fp8_recipe_format(int kind);

#endif
