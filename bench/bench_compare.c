/*
 * bench_compare.c - how long `ampdiag compare` takes on long traces. Writes two synthetic
 * 100k-step traces (fp32 and fp16, 8 layers, tensor records every 100 steps, histograms every
 * 1000) through the public writer, then times each phase in process (read + summarise,
 * compare, rules, text and JSON reports) and the whole command (./ampdiag compare) when the
 * program is in the current directory.
 *
 * usage: bench_compare [--steps N] [--trace-every N] [--hist-every N] [--keep]
 */
#include "analysis/compare.h"
#include "analysis/findings.h"
#include "analysis/load.h"
#include "analysis/recommend.h"
#include "messages/messages.h"
#include "report/report.h"

#include "../tests/compare_synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long arg_long(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "bench_compare: %s needs a number\n", argv[*i]);
        exit(2);
    }
    char *end;
    long v = strtol(argv[++*i], &end, 10);
    if (*end || v <= 0) {
        fprintf(stderr, "bench_compare: bad number '%s'\n", argv[*i]);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    long steps = 100000, trace_every = 100, hist_every = 1000;
    int keep = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--steps") == 0)
            steps = arg_long(argc, argv, &i);
        else if (strcmp(argv[i], "--trace-every") == 0)
            trace_every = arg_long(argc, argv, &i);
        else if (strcmp(argv[i], "--hist-every") == 0)
            hist_every = arg_long(argc, argv, &i);
        else if (strcmp(argv[i], "--keep") == 0)
            keep = 1;
        else {
            fprintf(stderr, "usage: bench_compare [--steps N] [--trace-every N] [--hist-every N] [--keep]\n");
            return 2;
        }
    }
    const char *paths[2] = {"bench-compare-fp32.h5", "bench-compare-fp16.h5"};
    static const long skips[] = {5000, 17000, 40000, 77000};
    double t0 = now();
    for (int k = 0; k < 2; k++) {
        cs_spec s;
        cs_spec_init(&s);
        s.precision = k ? "fp16" : "fp32";
        s.nsteps = steps;
        s.trace_every = trace_every;
        s.hist_every = hist_every;
        s.eval_every = 1000;
        s.nlayers = 8;
        s.tau = (double)steps / 4;
        s.scale = k ? 65536 : 1;
        s.hist_e1 = -12;
        s.hist_e2 = -30;
        if (k) {
            s.skips = skips;
            s.nskips = sizeof skips / sizeof skips[0];
        }
        int rc = cs_write(paths[k], &s);
        if (rc < 0) {
            fprintf(stderr, "bench_compare: cannot write %s: %s\n", paths[k], ampdiag_trace_errmsg());
            return 3;
        }
    }
    double tw = now() - t0;
    struct stat sb;
    long long bytes = 0;
    for (int k = 0; k < 2; k++)
        if (stat(paths[k], &sb) == 0)
            bytes += (long long)sb.st_size;
    printf("compare benchmark: 2 traces x %ld steps, 8 layers, tensor records every %ld steps, "
           "histograms every %ld (%.1f MB, written in %.2f s)\n",
           steps, trace_every, hist_every, (double)bytes / 1e6, tw);

    double best_load = 1e9, best_cmp = 1e9, best_rec = 1e9, best_txt = 1e9, best_json = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        an_run runs[2];
        char err[512];
        double a = now();
        for (int k = 0; k < 2; k++)
            if (an_load(paths[k], NULL, &runs[k], err, sizeof err)) {
                fprintf(stderr, "bench_compare: %s\n", err);
                return 3;
            }
        double b = now();
        an_comparison c;
        if (an_compare(runs, 2, 0, &c)) {
            fprintf(stderr, "bench_compare: out of memory\n");
            return 3;
        }
        double cc = now();
        recommendation R;
        if (recommend(runs, 2, &c, TGT_ANY, 0, &R)) {
            fprintf(stderr, "bench_compare: out of memory\n");
            return 3;
        }
        double d = now();
        FILE *null = fopen("/dev/null", "w");
        if (!null) {
            perror("/dev/null");
            return 3;
        }
        report_opts ro;
        memset(&ro, 0, sizeof ro);
        report_text(null, runs, 2, &c, &R, &ro);
        double e = now();
        report_json(null, runs, 2, &c, &R, &ro);
        double f = now();
        fclose(null);
        if (b - a < best_load) best_load = b - a;
        if (cc - b < best_cmp) best_cmp = cc - b;
        if (d - cc < best_rec) best_rec = d - cc;
        if (e - d < best_txt) best_txt = e - d;
        if (f - e < best_json) best_json = f - e;
        if (rep == 0) {
            char v[2000];
            msg_ctx m = {.runs = runs, .nruns = 2, .baseline = 0, .R = &R};
            msg_verdict(v, sizeof v, &m);
            printf("  verdict: %s\n", v);
        }
        rec_free(&R);
        an_comparison_free(&c);
        an_free(&runs[0]);
        an_free(&runs[1]);
    }
    printf("  read + summarise both traces  %8.1f ms  (%.1f ms per trace)\n", 1e3 * best_load, 5e2 * best_load);
    printf("  compare                       %8.2f ms\n", 1e3 * best_cmp);
    printf("  rules                         %8.2f ms\n", 1e3 * best_rec);
    printf("  text report                   %8.2f ms\n", 1e3 * best_txt);
    printf("  json report                   %8.2f ms\n", 1e3 * best_json);
    printf("  total in process              %8.1f ms (best of 3)\n",
           1e3 * (best_load + best_cmp + best_rec + best_txt + best_json));
    if (access("./ampdiag", X_OK) == 0) {
        double best = 1e9;
        for (int rep = 0; rep < 3; rep++) {
            double a = now();
            int rc = system("./ampdiag compare bench-compare-fp32.h5 bench-compare-fp16.h5 > /dev/null");
            double b = now();
            if (rc != 0) {
                fprintf(stderr, "bench_compare: ./ampdiag compare failed (%d)\n", rc);
                break;
            }
            if (b - a < best)
                best = b - a;
        }
        if (best < 1e9)
            printf("  ./ampdiag compare (wall)      %8.1f ms (best of 3, process start included)\n", 1e3 * best);
    }
    if (!keep)
        for (int k = 0; k < 2; k++)
            remove(paths[k]);
    return 0;
}
