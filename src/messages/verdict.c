/*
 * verdict.c - the verdict line and the remedies' lines (messages.h).
 */
#include "messages/messages_internal.h"

#include <math.h>
#include <stdio.h>

void msg_verdict(char *buf, size_t n, const msg_ctx *m)
{
    const recommendation *R = m->R;
    char v[2000], a[600], b[600], sc[32];
    msg_section(v, sizeof v, m, SEC_VERDICT, "; ");
    a[0] = b[0] = 0;
    if (R->fp16.summary >= 0)
        msg_item_short(a, sizeof a, m, &R->items.v[R->fp16.summary]);
    if (R->bf16.summary >= 0)
        msg_item_short(b, sizeof b, m, &R->items.v[R->bf16.summary]);
    msg_scale(sc, sizeof sc, ldexp(1.0, R->scale ? (int)(R->scale->v[an_finding_fig(F_LOSS_SCALE, "log2")])
                                                 : (int)an_k(K_SCALE_INIT_LOG2)));
    switch (R->precision) {
    case REC_BF16:
        if (R->fp16.viable)
            snprintf(buf, n, "%s. fp16 + dynamic loss scaling (initial %s) works too.", v, sc);
        else if (a[0])
            snprintf(buf, n, "%s. Not fp16: %s.", v, a);
        else
            snprintf(buf, n, "%s.", v);
        break;
    case REC_FP16:
        if (b[0])
            snprintf(buf, n, "%s. Not bf16: %s.", v, b);
        else
            snprintf(buf, n, "%s.", v);
        break;
    case REC_FP32:
        snprintf(buf, n, "%s. Not fp16: %s; not bf16: %s.", v, a[0] ? a : "see below", b[0] ? b : "see below");
        break;
    default:
        snprintf(buf, n, "%s.", v);
        break;
    }
}

void msg_remedy(char *buf, size_t n, const msg_ctx *m, const rec_decision *d)
{
    char why[800];
    msg_decision_why(why, sizeof why, m, d);
    snprintf(buf, n, "%s %s (%s): %s", d->option, d->option_value,
             d->scope == REM_EVERY_RUN ? "every run" : "the recommended precision's run", why);
}

