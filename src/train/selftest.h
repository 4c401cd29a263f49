/*
 * selftest.h - `ampdiag selftest`: does this build compute here what it should?
 *
 * The checks, in order (each reported as it finishes):
 *   CPU    the CPU backend's rounding (the SIMD code this CPU runs) against numfmt.h on every
 *          256th float32 bit pattern, FP16 and BF16, with and without FTZ; every operation of
 *          the CPU backend (its SIMD code) against its portable code (src/backend/opcheck.h);
 *   CPU    short runs of the mlp and transformer presets in fp32, fp16 and bf16: finite losses,
 *          and a repeated run that gives the same losses bit for bit;
 *   device (when a device backend can run here: --device, or cuda by default where it is built)
 *          the backend's own exhaustive check (the CUDA backend: numfmt.h's device code against
 *          CUDA's conversions on all 2^32 float32 patterns); the statistics (tstats with its
 *          histogram, grad_norm's non-finite count, update_stats' lost updates) of crafted
 *          tensors against the CPU's, exactly; every backend operation against the CPU's portable
 *          code (selftest_backend_ops); the same runs on the device, whose
 *          per-step losses must agree with the CPU's within selftest_tolerance, and a repeated
 *          device run that gives the same losses bit for bit (deterministic reductions).
 */
#ifndef AMPDIAG_SELFTEST_H
#define AMPDIAG_SELFTEST_H

#include "backend/backend.h"
#include "model/model.h"

#include <stddef.h>

typedef enum { ST_PASS = 0, ST_FAIL = 1, ST_SKIP = 2 } st_status;

/* One check's outcome. */
typedef struct st_report {
    st_status status;
    char what[96];    /* "runs: transformer bf16 on cuda against cpu" */
    char detail[400]; /* what was measured, or why it was skipped / failed */
    double measured;  /* a run's largest loss difference (NaN for other checks) */
    double limit;     /* its tolerance (NaN for other checks) */
} st_report;

typedef void (*st_sink)(const st_report *r, void *arg);

typedef struct selftest_options {
    const char *device; /* the backend to check against the CPU; NULL: cuda where it can run */
    const backend *bk;  /* the backend itself, instead of by name (tests); NULL */
    long steps;         /* per run (20) */
    const char *dir;    /* the runs' traces are kept here; NULL: a temporary folder, removed */
} selftest_options;

/* Selftest's exit codes besides 0 (as train.h's). */
#define SELFTEST_EUSAGE 2 /* the device named cannot run here (message in err) */
#define SELFTEST_EIO 3    /* a folder or a trace could not be written or read */

/* Run every check, each outcome to sink; *failed the number of checks that failed. 0, or
 * SELFTEST_EUSAGE / SELFTEST_EIO with a message in err. */
int selftest_run(const selftest_options *o, st_sink sink, void *arg, int *failed, char *err, size_t errlen);

/* How far a device run's per-step loss may be from the CPU's in a precision, relative to
 * max(1, |loss|): the GEMMs sum in another order (cuBLAS, OpenBLAS), and expf/logf may differ
 * in the last bit, so the runs drift apart by rounding; 16-bit formats amplify a difference
 * when a value lands on the other side of a rounding boundary. 1e-4 for fp32, 1e-2 for fp16,
 * bf16, and for fp32 when the GEMMs may use TF32 (tf32 non-zero). */
double selftest_tolerance(precision p, int tf32);

/* The operation-by-operation comparison of a backend with a reference on the same inputs
 * (src/backend/opcheck.h; the CPU backend's portable code is opcheck_reference()): ST_PASS or
 * ST_FAIL, with the number of checks, the first failure and the known differences in r. */
st_status selftest_backend_ops(const backend *under_test, const backend *ref, st_report *r);
#endif
