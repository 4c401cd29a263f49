/*
 * bench_trace.c - what tracing costs on disk and in time.
 *
 * A 10-layer model traced every step: 5 tensor records per layer (activation, activation
 * gradient, weight, weight gradient, update), an exponent histogram per (layer, kind) every 10
 * steps, one step record and an event now and then. Reports bytes per traced step (file size /
 * steps, while the run goes on and after close, which compacts the file) and writer throughput
 * (records per second, and microseconds per traced step including create and close) for a few
 * flush intervals, then reader throughput. The statistics are precomputed: this measures the
 * trace writer, not the statistics kernel (bench_tstats does that).
 *
 * Usage: bench_trace [steps (default 5000)] [layers (default 10)]
 */
#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "../tests/trace_synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define NVARIANTS 64 /* distinct precomputed records per (layer, kind) */

struct pre {
    ampdiag_tstats st[NVARIANTS];
    ampdiag_hist h[NVARIANTS];
};

static int run(const char *path, int steps, int layers, unsigned every, const struct pre *pre,
               double *secs, uint64_t *records, off_t *run_size)
{
    ampdiag_trace_options o;
    ampdiag_trace_options_init(&o);
    o.overwrite = 1;
    o.flush_every_steps = every;
    ampdiag_trace_writer *w;
    double t0 = now();
    if (ampdiag_trace_create(path, &o, &w))
        return -1;
    ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_PRECISION, "fp16");
    for (int l = 0; l < layers; l++) {
        char name[32];
        snprintf(name, sizeof name, "blocks.%d.mlp.fc", l);
        ampdiag_trace_add_layer(w, name, "linear", "[256, 256]", 65792);
    }
    int rc = 0;
    for (int s = 0; s < steps && !rc; s++) {
        for (int l = 0; l < layers && !rc; l++)
            for (int k = 0; k < AMPDIAG_NKINDS && !rc; k++) {
                int v = (s * 7 + l * 5 + k) % NVARIANTS;
                const struct pre *p = &pre[k];
                rc = ampdiag_trace_append_tensor(w, s, l, (ampdiag_tensor_kind)k, &p->st[v], 0);
                if (!rc && s % 10 == 0)
                    rc = ampdiag_trace_append_hist(w, s, l, (ampdiag_tensor_kind)k, &p->h[v]);
            }
        if (!rc && s % 100 == 37)
            rc = ampdiag_trace_append_event(w, s, -1, AMPDIAG_EV_SCALE_GROWTH, 65536, "loss scale 32768 -> 65536");
        ampdiag_trace_step r;
        synth_step(&synth_specs[0], s % 64, &r);
        r.step = s;
        if (!rc)
            rc = ampdiag_trace_append_step(w, &r);
    }
    ampdiag_trace_writer_info info;
    ampdiag_trace_writer_get_info(w, &info);
    /* the size while the run goes on (SWMR leaves dead space at each flush) ... */
    rc |= ampdiag_trace_flush(w);
    struct stat st;
    *run_size = stat(path, &st) == 0 ? st.st_size : 0;
    /* ... and after close, which compacts */
    rc |= ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE);
    *secs = now() - t0;
    *records = info.steps + info.tensors + info.hists + info.events + info.layers;
    return rc;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 5000;
    int layers = argc > 2 ? atoi(argv[2]) : 10;
    if (steps <= 0 || layers <= 0 || layers > 100000) {
        fprintf(stderr, "usage: bench_trace [steps] [layers]\n");
        return 2;
    }
    const char *tmp = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_trace.%ld.h5", tmp && *tmp ? tmp : "/tmp", (long)getpid());

    static struct pre pre[AMPDIAG_NKINDS];
    float x[4096];
    for (int k = 0; k < AMPDIAG_NKINDS; k++)
        for (int v = 0; v < NVARIANTS; v++) {
            for (int i = 0; i < 4096; i += SYNTH_N)
                synth_tensor(NULL, v, i / SYNTH_N, k, x + i);
            ampdiag_tstats_compute(x, 4096, &pre[k].st[v], &pre[k].h[v]);
        }

    printf("trace writer: %d layers x %d tensor kinds per step, histograms every 10 steps, %d steps\n",
           layers, AMPDIAG_NKINDS, steps);
    printf("%-12s %16s %16s %12s %10s %9s\n", "flush every", "bytes/step (run)", "(after close)",
           "records/s", "us/step", "file MB");
    static const unsigned everies[] = {1, 10, 100};
    for (size_t i = 0; i < sizeof everies / sizeof everies[0]; i++) {
        double best = 1e30, secs;
        uint64_t records = 0;
        off_t run_size = 0;
        for (int rep = 0; rep < 3; rep++) {
            if (run(path, steps, layers, everies[i], pre, &secs, &records, &run_size)) {
                fprintf(stderr, "bench_trace: %s\n", ampdiag_trace_errmsg());
                unlink(path);
                return 1;
            }
            if (secs < best)
                best = secs;
        }
        struct stat st;
        stat(path, &st);
        char label[32];
        snprintf(label, sizeof label, "%u step%s", everies[i], everies[i] > 1 ? "s" : "");
        printf("%-12s %16.0f %16.0f %12.0f %10.1f %9.2f\n", label, (double)run_size / steps,
               (double)st.st_size / steps, (double)records / best, 1e6 * best / steps,
               (double)st.st_size / 1e6);
    }

    /* reader */
    double t0 = now();
    ampdiag_trace_reader *r;
    if (ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET, &r)) {
        fprintf(stderr, "bench_trace: %s\n", ampdiag_trace_errmsg());
        unlink(path);
        return 1;
    }
    ampdiag_trace_tensor *t;
    ampdiag_trace_hist *h;
    ampdiag_trace_step *s;
    size_t nt = 0, nh = 0, ns = 0;
    int rc = ampdiag_trace_read_tensors(r, 0, SIZE_MAX, &t, &nt) |
             ampdiag_trace_read_hists(r, 0, SIZE_MAX, &h, &nh) | ampdiag_trace_read_steps(r, &s, &ns);
    double secs = now() - t0;
    ampdiag_trace_reader_close(r);
    free(t);
    free(h);
    free(s);
    unlink(path);
    if (rc) {
        fprintf(stderr, "bench_trace: %s\n", ampdiag_trace_errmsg());
        return 1;
    }
    printf("trace reader: open + read %zu tensor, %zu histogram and %zu step records in %.3f s "
           "(%.0f records/s)\n",
           nt, nh, ns, secs, (double)(nt + nh + ns) / secs);
    return 0;
}
