/*
 * report_internal.h - what the renderers of a comparison share (report_text.c, report_md.c,
 * report_json.c): the table of runs side by side, the verdict line, the notes. Not for use
 * outside src/report/.
 */
#ifndef AMPDIAG_REPORT_INTERNAL_H
#define AMPDIAG_REPORT_INTERNAL_H

#include "messages/messages.h"
#include "report/report.h"

/* The rows of the table of runs. */
enum {
    ROW_STATUS,
    ROW_STEPS,
    ROW_STEP_TIME, /* median step time (runs that timed their steps) */
    ROW_PEAK_MEMORY, /* peak memory, with its source (where two runs or more measured the same) */
    ROW_LOSS,     /* the loss the gaps are measured on: final eval loss or final-window loss */
    ROW_CURVE,
    ROW_EVAL_ACC, /* final eval accuracy (runs whose eval metric is an accuracy) */
    ROW_NONFINITE,
    ROW_SKIPPED,
    ROW_SCALE,
    ROW_HEADROOM,
    ROW_FLUSH,
    ROW_FLUSH_AT_SCALE,
    ROW_LOST,
    ROW_RATIO,
    ROW_SPIKES,
    ROW_DIVERGED,
    NROWS
};

/* A comparison and its recommendation, as the renderers read them. */
typedef struct report_in {
    const an_run *runs;
    size_t n;
    const an_comparison *c;
    const recommendation *R;
    msg_ctx m;
} report_in;

void report_in_init(report_in *in, const an_run *runs, size_t n, const an_comparison *c,
                    const recommendation *R);

/* The row's label (a figure's name) and whether the runs have it. */
const char *report_row_label(const report_in *in, int row);
int report_row_wanted(const report_in *in, int row);
/* The source of the peak memory the table compares: the first run's that two runs or more
 * measured; NULL when none did. */
const char *report_peak_source(const report_in *in);
/* The cell of run i in a row. */
void report_cell(char *buf, size_t n, const report_in *in, size_t i, int row);
/* The header of run i's column: "fp32 (baseline)". */
void report_run_header(char *buf, size_t n, const report_in *in, size_t i);
/* The notes under the table: what the loss row measures, the noise band (with its source),
 * what "*" means. Calls note(label, text, arg) for each. */
void report_table_notes(const report_in *in, void (*note)(const char *label, const char *text, void *arg),
                        void *arg);

/* The vocabulary the advice is given in: the baseline's writer's (messages.h, msg_run_vocab). */
msg_vocab report_vocab(const report_in *in);
/* The Apply lines: each decision's words and how to apply it in the report's vocabulary, one
 * line per distinct way (two loss-scale options say the same in PyTorch), in decision order.
 * Calls line(what, how, arg) for each; returns how many. */
size_t report_apply_lines(const report_in *in, void (*line)(const char *what, const char *how, void *arg),
                          void *arg);

/* The comparison's notes: its findings but the gaps and deviations (those are in the table). */
int report_is_note(const an_finding *f);
/* The what-if line when sections are hidden ("" when none would be shown). */
void report_whatif_hidden(char *buf, size_t n, const an_run *runs, size_t nruns, const char *list);

#endif
