/*
 * optim_setup.h - the optimizer step's scalars for the kernel bodies (kernels/bodies.h's
 * ck_optim), computed once a step on the host from the backend's optimizer configuration.
 * Plain C, so that tests/t_cuda_kernels.c uses the same setup as the CUDA backend.
 */
#ifndef AMPDIAG_CUDA_OPTIM_SETUP_H
#define AMPDIAG_CUDA_OPTIM_SETUP_H

#include "backend/backend.h"
#include "kernels/bodies.h"

#include <math.h>
#include <string.h>

/* The scalars of step t (including this one) at learning rate lr. Host only: AdamW's bias
 * corrections in double as PyTorch computes them from Python floats, then held as floats. */
static inline ck_optim ck_optim_setup(const bk_optim *c, long t, double lr)
{
    ck_optim k;
    memset(&k, 0, sizeof k);
    k.adamw = c->kind == BK_ADAMW;
    k.srk = ck_rnd_kind(c->state_fmt, c->round_flags);
    k.wrk = ck_rnd_kind(c->weight_fmt, c->round_flags);
    k.state_fp32 = c->state_fmt == AMPDIAG_FP32;
    k.first = t <= 1;
    k.lr = (float)lr;
    k.mom = (float)c->momentum;
    k.wd = (float)c->weight_decay;
    if (k.adamw) {
        double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
        k.b1 = (float)c->beta1;
        k.b2 = (float)c->beta2;
        k.omb1 = (float)(1.0 - c->beta1);
        k.omb2 = (float)(1.0 - c->beta2);
        k.bc1 = (float)bc1;
        k.bc2 = (float)bc2;
        k.sqrt_bc2 = (float)sqrt(bc2);
        k.step = (float)(-(double)k.lr / bc1);
        k.lrwd = (float)(c->weight_decay * (double)k.lr);
        k.eps = ck_rnd(k.srk, (float)c->eps);
    }
    return k;
}

#endif /* AMPDIAG_CUDA_OPTIM_SETUP_H */
