/*
 * opbound.h - how far two correct backends may differ, output by output, where they add the
 * same terms in another order: the allowances behind opcheck.c's per-output comparisons of
 * GEMMs and of the causal attention (cuBLAS on a GPU against OpenBLAS and the CPU's own loops).
 *
 * Every allowance is a bound, not a measured tolerance: each backend's result lies within a
 * rounding-error bound of a value computed exactly from the same inputs (Higham, Accuracy and
 * Stability of Numerical Algorithms, 3.1: a sum of n terms in any order is within
 * gamma_n = n u / (1 - n u) of sum|term|, u = 2^-24), so two of them lie within twice that bound
 * of each other; a rounding to an FP16 or BF16 output adds one spacing of that format. The
 * attention chains such sums through the softmax, whose sensitivity is bounded too (below).
 * An allowance is INFINITY where a sum or its rounding may overflow in one order only (the
 * output is then not compared), and 0 where a term is NaN or inf (both backends must then agree
 * on the NaN or inf).
 */
#ifndef AMPDIAG_OPBOUND_H
#define AMPDIAG_OPBOUND_H

#include "backend/backend.h"

/* The spacing of format r's values at magnitude x (a float32 output: 0, its rounding is in the
 * sum's bound), or with FTZ below twice its min normal, the min normal (what a flush loses). */
double opbound_spacing(bk_rnd r, double x);
/* The smallest magnitude format r rounds to inf (FLT_MAX for FP32). */
double opbound_max(bk_rnd r);
/* gamma_n = n 2^-24 / (1 - n 2^-24). */
double opbound_gamma(int n);

/* attention_fwd (backend.h) of qkv [B,T,3C] in format r: the allowance of each value of out
 * [B,T,C], att and att_r [B,NH,T,T] (arrays of those sizes).
 *   S = scale Q K^T: each side within gamma_(hs+2) scale sum|q k| of the exact scores, then
 *   rounded to r (one spacing); so each side's rounded score lies within dev_j of the exact one,
 *   and within dev = max_j dev_j over the causal row.
 *   P = softmax(S): a change of at most dev in every score changes each exact probability by a
 *   factor within e^(+-2 dev); the float32 softmax (exp within 1 ulp, a sequential sum of t + 1
 *   terms, a division, a product) adds a relative (t + 10) u. att_r = rnd(P) adds a spacing.
 *   out = att_r V: the sum of the att_r differences times |V|, plus the GEMM bound of each side,
 *   plus a spacing of the output.
 * A row whose scores hold a NaN or inf term, or may overflow, is unbounded with every output
 * that depends on it. */
void opbound_attention_fwd(int B, int T, int C, int NH, bk_rnd r, const float *qkv, double *a_out,
                           double *a_att, double *a_att_r);

/* attention_bwd of dout [B,T,C], qkv [B,T,3C], att and att_r [B,NH,T,T] (the same inputs on
 * both sides): the allowance of each value of dqkv [B,T,3C].
 *   dV = att_r^T dY: a GEMM of identical inputs (its bound).
 *   dP = dY V^T, rounded (GEMM bound and a spacing); dot_t = sum_j P_tj dP_tj in float32 in
 *   the same order on both sides (the dP differences weighted by P, plus each side's summation
 *   bound); dS = rnd(P (dP - dot)) (both differences times P, two float32 roundings a side, a
 *   spacing).
 *   dQ = scale dS K, dK = scale dS^T Q: the dS differences times |K| or |Q|, plus each side's
 *   GEMM bound and a spacing. */
void opbound_attention_bwd(int B, int T, int C, int NH, bk_rnd r, const float *dout, const float *qkv,
                           const float *att, const float *att_r, double *a_dqkv);

#endif
