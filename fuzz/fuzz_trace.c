/*
 * fuzz_trace.c - libFuzzer target: a trace file as every command reads it. The input is written
 * to a file and loaded through the one loader (an_load, with the chart points plot keeps), its
 * findings rendered as `ampdiag info` does (text and JSON), compared with itself and judged by
 * the rules as `compare --fail-on` does, and the histograms of its first layer read at the steps a chart would ask for. Any
 * outcome but a crash, a sanitizer report or a hang is fine: refusing the file is the usual one.
 */
#include "ampdiag_trace.h"
#include "analysis/load.h"
#include "analysis/findings.h"
#include "analysis/recommend.h"
#include "report/info.h"

#include "fuzz_file.h"

static void read_hists(const an_run *run)
{
    if (run->nlayers == 0 || run->nhist_steps == 0)
        return;
    enum { NS = 4 };
    int64_t steps[NS];
    size_t ns = 0;
    for (size_t i = 0; i < run->nhist_steps && ns < NS; i++)
        steps[ns++] = run->hist_steps[i * (run->nhist_steps > NS ? run->nhist_steps / NS : 1)];
    const int kinds[2] = {AMPDIAG_KIND_ACTIVATION, AMPDIAG_KIND_WEIGHT_GRAD};
    ampdiag_trace_hist got[2 * NS];
    int have[2 * NS];
    char err[512];
    (void)an_read_hists(run, 0, kinds, 2, steps, ns, got, have, err, sizeof err);
}

static void compare_self(const char *path, an_run *first)
{
    an_run runs[2];
    an_options ao = {.warmup = -1, .quiet = 1, .keep_points = 0};
    char err[512];
    runs[0] = *first;
    if (an_load(path, &ao, &runs[1], err, sizeof err) == 0) {
        an_comparison c;
        recommendation R;
        memset(&R, 0, sizeof R);
        if (an_compare(runs, 2, 0, &c) == 0)
            (void)recommend(runs, 2, &c, TGT_ANY, FAIL_NAN | FAIL_SKIPS | FAIL_DIVERGENCE | FAIL_OVERFLOW, &R);
        rec_free(&R);
        an_comparison_free(&c);
    }
    *first = runs[0];
    an_free(&runs[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write(data, size, ".h5");
    if (!path)
        return 0;
    an_run run;
    an_options ao = {.warmup = -1, .quiet = 1,
                     .keep_points = 1u << AMPDIAG_KIND_ACTIVATION |
                                    1u << AMPDIAG_KIND_ACTIVATION_GRAD |
                                    1u << AMPDIAG_KIND_WEIGHT_GRAD};
    char err[512];
    if (an_load(path, &ao, &run, err, sizeof err) == 0) {
        report_info_text(fuzz_devnull(), &run, run.find, 5);
        report_info_json(fuzz_devnull(), &run, run.find);
        read_hists(&run);
        compare_self(path, &run);
    }
    an_free(&run);
    return 0;
}
