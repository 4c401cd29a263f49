/* cpu_internal.h - the CPU backend's operations defined outside backend_cpu.c (its table). */
#ifndef AMPDIAG_BACKEND_CPU_INTERNAL_H
#define AMPDIAG_BACKEND_CPU_INTERNAL_H

#include "backend/backend.h"

/* x86-64 AVX-512 and AVX2 clones of a function beside its baseline one, chosen at load time (an
 * ifunc): for the element loops that vectorise (vmath.h). Without FMA contraction all compute
 * the same bits. (Not under ThreadSanitizer: gcc instruments the ifunc resolvers, which run
 * before TSan is up.) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CPU_CLONES
#endif

/* out[i] = rnd(in[i]) (in == out allowed): the vector rounding code, or the portable code when
 * backend_cpu_force_generic or AMPDIAG_ROUND_IMPL=generic turned it off. */
void cpu_round(const backend *bk, float *out, const float *in, size_t n, bk_rnd r);
/* backend_cpu_force_generic(1) is in effect: every SIMD path of the backend steps aside. */
int cpu_simd_forced_off(void);

void cpu_grad_norm(const backend *bk, const float *g, size_t n, float inv_scale, double *sumsq,
                   uint64_t *nonfinite);
void cpu_optim_step(const backend *bk, const bk_optim *c, long t, float *w, const float *g, float *m,
                    float *v, size_t n, double lr, float ginv, float gscale, float *dw_keep,
                    float *w_keep, float *w_copy, uint64_t *nonfinite);
size_t cpu_count_nonfinite(const backend *bk, const float *x, size_t n);
void cpu_update_stats(const backend *bk, const bk_optim *c, const float *w_old, const float *dw,
                      size_t n, bk_update_stats *st, ampdiag_hist *hu);

#endif
