/*
 * opcheck.h - the operation-by-operation comparison of two backends (opcheck.c): every entry of
 * the backend table run on a backend under test and on a reference with the same inputs
 * (random values of many magnitudes, NaN, inf, signed zeros, float32 subnormals and every
 * FP16/BF16 threshold with its neighbours; sizes that are not multiples of the vector widths;
 * each rounding format with and without FTZ), every buffer guarded by sentinels, the outputs
 * compared bit for bit unless a tolerance row of opcheck.c allows a reordered sum's difference.
 *
 * Used by tests/t_backend_ops (TAP) and by `ampdiag selftest` (src/train/selftest.c). One run
 * at a time: the reference switches process-wide settings while it runs (the CPU backend's
 * portable code, AMPDIAG_TSTATS_IMPL), and restores them.
 */
#ifndef AMPDIAG_OPCHECK_H
#define AMPDIAG_OPCHECK_H

#include "backend/backend.h"

#include <stddef.h>

/* Where a run's lines go. line: one check, passed or not; todo is NULL, or, for a failure the
 * tolerance table knows to be not yet bounded, why (a known failure, not counted). note: the
 * details of a failure and what is under test (may be NULL). */
typedef struct opcheck_out {
    void (*line)(void *arg, int pass, const char *todo, const char *text);
    void (*note)(void *arg, const char *text);
    void *arg;
} opcheck_out;

/* The reference: the CPU backend's portable code (scalar rounding, the portable statistics
 * kernel), as a backend table of its own. */
const backend *opcheck_reference(void);

/* Every operation of under_test's table against ref's (under_test's buffers are its own; ref
 * runs on the host). Returns the number of checks that failed (known failures aside), or -1
 * with the reason in err when the run could not go on (out of memory). */
int opcheck_run(const backend *under_test, const backend *ref, const opcheck_out *o, char *err,
                size_t errlen);

/* The names of the backend table's entries the comparison checks (index 0, 1, ... until
 * NULL): tests/t_backend_ops fails when backend.h's table has an entry this list lacks. */
const char *opcheck_covered(int i);

/* The GEMM and attention checks of a CPU table whose GEMM and attention add each output's
 * products in reverse order: the per-output bounds (opbound.h) that other backends are held to,
 * at work without them. perturb != 0 multiplies every output of those operations by
 * 1 + perturb after its rounding (a mutation the bounds must catch). Returns as opcheck_run. */
int opcheck_reordered(const backend *ref, double perturb, const opcheck_out *o, char *err, size_t errlen);

#endif
