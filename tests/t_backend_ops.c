/*
 * t_backend_ops.c - the operation-by-operation comparison (src/backend/opcheck.h) as TAP: the
 * CPU backend as it runs (its F16C / AVX2 rounding passes, the AVX2 statistics kernels where
 * the CPU has them) against its portable code, a CPU table with a reordered GEMM against the
 * same (the per-output bound at work), and every other backend this build has (cuda) against
 * the same reference, or SKIP where it cannot run.
 */
#include "backend/opcheck.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
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

/* The mutation runs' lines are counted, not printed: lines, and failed lines of FP32 (with and
 * without FTZ) and of the 16-bit formats. */
static int mutation_count, fail32, fail16;
static void count_line(void *arg, int pass, const char *todo, const char *text)
{
    (void)arg, (void)todo;
    mutation_count++;
    if (!pass && strstr(text, " FP32"))
        fail32++;
    else if (!pass)
        fail16++;
}
static const opcheck_out quiet = {count_line, NULL, NULL};

static void checked(int rc, const char *err)
{
    if (rc < 0) {
        printf("Bail out! %s\n", err);
        exit(1);
    }
}

/* Every entry of backend.h's struct backend (each "(*name)(" in it) is one the comparison
 * checks (opcheck_covered), so that an entry added to the table without a check fails here. */
static void test_coverage(void)
{
    const char *srcdir = getenv("srcdir");
    char path[4096], line[512], missing[1024] = "";
    snprintf(path, sizeof path, "%s/src/backend/backend.h", srcdir ? srcdir : ".");
    FILE *f = fopen(path, "r");
    if (!f) {
        ok(0, "read %s", path);
        return;
    }
    int in = 0, n = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "struct backend {", 16) == 0)
            in = 1;
        else if (in && strncmp(line, "};", 2) == 0)
            break;
        const char *p = in ? strstr(line, "(*") : NULL;
        if (!p)
            continue;
        char name[64];
        if (sscanf(p + 2, "%63[a-z_0-9]", name) != 1 || strncmp(p + 2 + strlen(name), ")(", 2) != 0)
            continue; /* (a pointer-to-array parameter such as "(*counts)[...]" is not an entry) */
        n++;
        int found = 0;
        for (int i = 0; opcheck_covered(i); i++)
            found |= strcmp(opcheck_covered(i), name) == 0;
        if (!found && strlen(missing) + strlen(name) + 2 < sizeof missing)
            strcat(strcat(missing, " "), name);
    }
    fclose(f);
    ok(n >= 35 && !missing[0], "every one of the %d entries of backend.h's table has a check in opcheck.c%s%s", n,
       missing[0] ? "; missing:" : "", missing);
    int found = 0;
    for (int i = 0; opcheck_covered(i); i++)
        found |= strcmp(opcheck_covered(i), "frobnicate") == 0;
    ok(!found, "mutation: an entry named frobnicate would be reported as missing");
}

int main(void)
{
    test_coverage();
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
    checked(opcheck_reordered(ref, 0.0, &out, err, sizeof err), err);
    /* the bounds can fail: the same stand-ins with every output off by a relative error after
     * its rounding. 2^-16 is within one spacing of an FP16 or BF16 output (which the bound must
     * allow: the backends may round a sum that differs in its last float32 bits either way), so
     * it must fail every FP32 line; 2^-6 is beyond a BF16 spacing and must fail every line. */
    mutation_count = fail32 = fail16 = 0;
    checked(opcheck_reordered(ref, 0x1p-16, &quiet, err, sizeof err), err);
    ok(fail32 == 6 && mutation_count == 18, "mutation: GEMM and attention outputs off by a relative 2^-16 fail "
       "%d of the 6 FP32 lines (gemm, attention_fwd, attention_bwd, with and without FTZ; %d of 12 FP16/BF16 lines)",
       fail32, fail16);
    mutation_count = fail32 = fail16 = 0;
    checked(opcheck_reordered(ref, 0x1p-6, &quiet, err, sizeof err), err);
    ok(fail32 + fail16 == 18 && mutation_count == 18, "mutation: off by a relative 2^-6 they fail %d of the 18 lines "
       "in every format", fail32 + fail16);
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
