/*
 * rules_speed.c - the step times of the viable precisions (docs/recommendations.md, "Speed"):
 * where two runs of precisions that are both viable differ in median step time by more than
 * STEP_TIME_FACTOR, an item names the faster one with both times. Reported as evidence, in its
 * own section: the precision verdict does not weigh it (the rules above decide on numerics).
 */
#include "analysis/rules.h"

#include <string.h>

/* Whether precision p is viable by the rules above: FP32 when it trains, FP16 and BF16 as their
 * assessment says. */
static int viable(const recommendation *R, precision p)
{
    switch (p) {
    case PREC_FP32: return R->precision != REC_UNDECIDED;
    case PREC_FP16: return R->fp16.viable;
    case PREC_BF16: return R->bf16.viable;
    default: return 0;
    }
}

/* Reads: the figure FIG_STEP_TIME of the first healthy run of each viable precision at the
 * baseline's lr and model. Item figures (of the faster run): the slower run, both times (ms),
 * their ratio. */
void rec_speed_rules(const an_run *runs, size_t n, const an_comparison *c, recommendation *R)
{
    const an_run *b = &runs[c->baseline];
    long pick[PREC_COUNT];
    for (int p = 0; p < PREC_COUNT; p++)
        pick[p] = -1;
    for (size_t i = 0; i < n; i++) {
        const an_run *r = &runs[i];
        if ((int)r->prec < 0 || r->prec >= PREC_COUNT || pick[r->prec] >= 0 || !viable(R, r->prec) ||
            run_failed(r) || !lr_eq(r->lr, b->lr) || strcmp(r->model, b->model) != 0 ||
            !(an_fig(r, FIG_STEP_TIME).v > 0))
            continue;
        pick[r->prec] = (long)i;
    }
    for (int p = 0; p < PREC_COUNT; p++)
        for (int q = 0; q < PREC_COUNT; q++) {
            if (pick[p] < 0 || pick[q] < 0 || p == q)
                continue;
            double tp = an_fig(&runs[pick[p]], FIG_STEP_TIME).v, tq = an_fig(&runs[pick[q]], FIG_STEP_TIME).v;
            if (tq / tp > an_k(K_STEP_TIME_FACTOR))
                SAY(R, SEC_SPEED, R_SPEED_FASTER, NULL, (int)pick[p], (double)pick[q], tp, tq, tq / tp);
        }
}
