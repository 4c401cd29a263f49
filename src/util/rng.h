/*
 * rng.h - the one random number generator of ampdiag: splitmix64, small and the same sequence
 * on every machine, so a seed reproduces a run bit for bit.
 */
#ifndef AMPDIAG_RNG_H
#define AMPDIAG_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct rng {
    uint64_t s;
} rng;

static inline rng rng_seed(uint64_t seed) { rng r = {seed}; return r; }

static inline uint64_t rng_next(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double rng_uniform(rng *r) { return (double)(rng_next(r) >> 11) * 0x1p-53; }

/* Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; bias below 2^-32 for small n). */
static inline uint32_t rng_below(rng *r, uint32_t n)
{
    return (uint32_t)(((rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* Standard normal (Box-Muller, one value per call). */
static inline double rng_normal(rng *r)
{
    double u1 = 1.0 - rng_uniform(r); /* (0, 1] */
    double u2 = rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
