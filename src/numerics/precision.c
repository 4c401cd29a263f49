/*
 * precision.c - the precision policies' names and formats (precision.h).
 */
#include "numerics/precision.h"

#include <strings.h>

static const char *const prec_names[PREC_COUNT] = {"fp32", "fp16", "bf16", "bf16-pure"};

int precision_parse(const char *name, precision *p)
{
    if (!name)
        return -1;
    for (int i = 0; i < PREC_COUNT; i++)
        if (strcasecmp(name, prec_names[i]) == 0) {
            *p = (precision)i;
            return 0;
        }
    return -1;
}

const char *precision_name(precision p)
{
    return (int)p >= 0 && p < PREC_COUNT ? prec_names[p] : "?";
}

ampdiag_format precision_format(precision p)
{
    switch (p) {
    case PREC_FP16: return AMPDIAG_FP16;
    case PREC_BF16:
    case PREC_BF16_PURE: return AMPDIAG_BF16;
    default: return AMPDIAG_FP32;
    }
}

ampdiag_format precision_weights_format(precision p)
{
    return p == PREC_BF16_PURE ? AMPDIAG_BF16 : AMPDIAG_FP32;
}
