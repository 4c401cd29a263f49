/*
 * t_backend_ops.c - the operation-by-operation comparison (src/backend/opcheck.h) as TAP: the
 * CPU backend as it runs (its F16C / AVX2 rounding passes, the AVX2 statistics kernels where
 * the CPU has them) against its portable code, a CPU table with a reordered GEMM against the
 * same (the per-output bound at work), and every other backend this build has (cuda) against
 * the same reference, or SKIP where it cannot run.
 */
#include "backend/opcheck.h"
#include "tap.h"

#include <string.h>

static void tap_line(void *arg, int pass, const char *todo, const char *text)
{
    (void)arg;
    if (todo)
        ok(pass, "%s # TODO %s", text, todo);
    else
        ok(pass, "%s", text);
}

static void tap_note(void *arg, const char *text)
{
    (void)arg;
    diag("%s", text);
}

static void checked(int rc, const char *err)
{
    if (rc < 0) {
        printf("Bail out! %s\n", err);
        exit(1);
    }
}

int main(void)
{
    const opcheck_out out = {tap_line, tap_note, NULL};
    const backend *cpu = backend_cpu(), *ref = opcheck_reference();
    char err[256] = "";
    diag("CPU rounding code: %s; statistics kernel: %s", backend_cpu_round_impl(),
         ampdiag_tstats_impl());
    backend_cpu_force_generic(1);
    ok(strcmp(backend_cpu_round_impl(), "generic") == 0,
       "backend_cpu_force_generic(1) selects the portable code (the reference's)");
    backend_cpu_force_generic(0);
    checked(opcheck_run(cpu, ref, &out, err, sizeof err), err);
    checked(opcheck_reordered_gemm(ref, &out, err, sizeof err), err);
    /* every other backend this build has, against the same reference */
    for (int i = 0; i < backend_count(); i++) {
        int built = 0;
        const char *name = backend_name_at(i, &built);
        if (strcmp(name, "cpu") == 0)
            continue;
        const backend *bk = built ? backend_by_name(name, err, sizeof err) : NULL;
        if (bk)
            checked(opcheck_run(bk, ref, &out, err, sizeof err), err);
        else
            skip("the %s backend: %s", name, built ? err : "not built");
    }
    return done_testing();
}
