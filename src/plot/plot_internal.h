/*
 * plot_internal.h - what the files of src/plot/ share (not for use outside it).
 *
 * plot.c holds the table of chart descriptions (chart_defs[]: each chart's template, size, the
 * instances it has and the function that writes its data) and the one driver that makes every
 * chart from it: the data and the chart's own variables (its chart_def's make function), then
 * the script: the common variables, the title (what the chart shows, the runs it draws and
 * their model and data, each run's own), the runs' colours and labels, the chart's variables
 * and its template. The make functions are in plot_series.c (loss, loss scale, gradient norm),
 * plot_layers.c (layer ranges, what-if heatmaps) and plot_hist.c (exponent histograms); the
 * runs are loaded and named in plot_runs.c; gnuplot's files in plot_gp.c; gnuplot is run by
 * plot_draw.c.
 */
#ifndef AMPDIAG_PLOT_INTERNAL_H
#define AMPDIAG_PLOT_INTERNAL_H

#include "plot/plot.h"
#include "analysis/columns.h"
#include "analysis/load.h"
#include "analysis/ranks.h"
#include "util/vec.h"

#include "ampdiag.h"
#include "ampdiag_trace.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#define MAX_PANELS 12     /* small multiples per layer-ranges chart */
#define MAX_HIST_STEPS 6  /* histograms overlaid per panel */
#define HEAT_MAX_COLS 1200/* heatmap columns (steps are merged, keeping the largest fraction) */
#define SERIES_COLS 2048  /* chart columns of a per-step series (loss, gradient norm, loss scale) */
#define MAX_LOG_LABELS 8  /* labels of a log axis */
#define MAX_BANDS 12      /* format bands of a range chart */

/* The tensor kinds drawn per layer. */
#define NSER 3
extern const int plot_ser_kind[NSER];
extern const char *const plot_ser_words[NSER];

struct tser {
    const an_points *p; /* the loader's chart columns of one (layer, kind) */
    const an_column *c;
    size_t n;
    uint64_t count, under, over;
    double absmax, absmin_nz; /* over the trace: -1 / +inf while none */
};

struct run {
    const an_run *a;   /* the trace, through the analysis loader (points of the drawn kinds kept) */
    const char *path;
    const char *precision;
    const char *label; /* shown on charts: the same label compare's report gives the run */
    char tag[64];      /* in file names */
    char color[8];     /* #rrggbb */
    double clip;       /* the run's own clip value, 0 = off */
    int scaled;        /* gradient records are loss-scaled: some loss scale other than 1 */
    const an_layer *layers;
    size_t nlayers;
    int *lmap;         /* run layer index -> union index */
    const an_step *steps;
    size_t nsteps;
    const ampdiag_trace_event *events;
    size_t nevents;
    const ampdiag_trace_eval *evals;
    size_t nevals;
    struct tser *ts;   /* [nunion * NSER] */
    const int64_t *hsteps; /* distinct histogram steps, ascending */
    size_t nhsteps;
};

struct ctx {
    const plot_options *opt;
    const char *outdir;
    const char *tdir;
    const char *ext;
    plot_result *res;
    char *err;
    size_t errlen;
    struct run *runs;
    an_run *an;        /* [nruns], loaded by the analysis */
    int nruns;
    char (*lname)[AMPDIAG_TRACE_NAME_LEN]; /* union of the runs' layer names */
    size_t nunion;
    int64_t xmin, xmax;
    int *sel;          /* union layers on the layer-ranges charts */
    size_t nsel;
    int sel_auto;      /* chosen by headroom (not --layers) and fewer than all */
    int *hsel;         /* union layers of the histogram charts */
    size_t nhsel;
};

/* One chart being made: what its chart_def's make function fills in. */
typedef struct chart {
    int run;                 /* per-run charts: the run; -1 */
    int sub;                 /* the kind index (NSER), what-if column or union layer; -1 */
    char name[140];          /* file stem: NAME.EXT, NAME.gp */
    char what[400];          /* the title's first part: "Training loss" */
    char subtitle[700];
    char desc[512];          /* one line for the command's output */
    VEC(int) runs;           /* the runs drawn, in the legend's order (their colours, labels) */
    FILE *vars;              /* the chart's own script variables */
    char *vbuf;
    size_t vlen;
} chart;

enum { CHART_SKIPPED = 1 }; /* a make function that draws nothing (it says why: plot_note) */

typedef enum chart_each { EACH_ONE, EACH_KIND, EACH_RUN_COLUMN, EACH_RUN_QUANT, EACH_RUN_LAYER, EACH_RANKS_RUN } chart_each;

typedef struct chart_def {
    const char *tmpl;        /* plots/TMPL.gp */
    int w, h;                /* pixels */
    chart_each each;         /* its instances: one, per kind, per (run, shown what-if column), per
                                (run, /quant column --quant names), per (run, histogram layer), per
                                run read from its ranks' traces */
    int (*make)(struct ctx *c, chart *ch); /* data files, ch's words and variables: 0,
                                              CHART_SKIPPED or a PLOT_E code */
} chart_def;

/* ---------------------------------------------------------------- plot_gp.c */
struct out {
    FILE *f;
    char path[PATH_MAX];
};

int plot_fail(struct ctx *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void plot_note(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int out_open(struct ctx *c, struct out *o, const char *name, const char *mode);
int out_close(struct ctx *c, struct out *o);
void out_abort(struct out *o);
int write_f32(struct ctx *c, const char *name, const float *v, size_t n);
void put_num(FILE *f, double v);
void gp_var_str(FILE *f, const char *name, const char *value, int text);
void gp_var_num(FILE *f, const char *name, double v);
enum { GP_TIC_LABEL = 2 }; /* gp_array_str's text: strings shown as tic labels (escaped as formats too) */
void gp_array_str(FILE *f, const char *name, const char *const *v, size_t n, int text);
void gp_array_num(FILE *f, const char *name, const double *v, size_t n);
/* The chart's script: the common variables, the runs' titles and colours, the chart's own
 * variables, the template. */
int gp_script(struct ctx *c, const chart_def *d, chart *ch, const char *title);
/* ytics_spec, a gnuplot tic list of at most MAX_LOG_LABELS labels for a log10 axis over
 * [lo, hi] (2x and 5x the powers of ten when it spans at most two decades, every k-th power
 * when it spans more than MAX_LOG_LABELS); and mytics. */
void gp_log10_tics(FILE *f, double lo, double hi);
/* Smallest k in 1, 2, 4, ... with span / k <= maxtics. */
int tic_binades(double span, int maxtics);

/* The bands of formats a range chart shades (overflow, subnormal, flush to zero), those that
 * fall in [ymin, ymax]: band_n, band_lo[], band_hi[], band_color[], band_alpha[],
 * band_title[] (legend entries only for these). cols: what-if columns (of run 0's table) whose
 * formats to draw. */
void gp_format_bands(FILE *f, const an_run *r, const int *cols, size_t ncols, double ymin, double ymax);

/* ---------------------------------------------------------------- plot_runs.c */
int plot_load(struct ctx *c, const char *const *paths, int n);
void plot_free_runs(struct ctx *c);
int plot_select_layers(struct ctx *c);
int union_layer(const struct ctx *c, const char *name);
const char *kind_name(int kind);
/* "fp32, fp16 and bf16" */
void run_list(const struct ctx *c, const int *idx, size_t n, char *dst, size_t len);
/* "mlp on synthetic:blobs" of the runs idx[0..n), each its own: one when they share it, else
 * each with its run's label. */
void run_context(const struct ctx *c, const int *idx, size_t n, char *dst, size_t len);
const an_step *find_step(const struct run *r, int64_t step);
/* The what-if columns (of run r's table) the charts show: FP16 (BF16 too on the range charts),
 * the run's own format, and those --what-if names. At most AN_CHART_WI. */
size_t plot_whatif_columns(const struct ctx *c, const an_run *r, int with_bf16, int *out);
/* The union layer's file-name part. */
void layer_file_part(const struct ctx *c, int u, char *dst, size_t n);

/* ---------------------------------------------------------------- the make functions */
int chart_loss(struct ctx *c, chart *ch);
int chart_loss_scale(struct ctx *c, chart *ch);
int chart_grad_norm(struct ctx *c, chart *ch);
int chart_layer_ranges(struct ctx *c, chart *ch);
int chart_heatmap(struct ctx *c, chart *ch);
int chart_hist(struct ctx *c, chart *ch);
int chart_ranks(struct ctx *c, chart *ch);
int chart_quant(struct ctx *c, chart *ch);
/* plot_quant.c: the /quant columns of run r --quant names, at most max, into out. */
size_t plot_quant_columns(const struct ctx *c, const an_run *r, int *out, size_t max);

/* ---------------------------------------------------------------- plot_draw.c */
int plot_make_dirs(struct ctx *c, const char *dir);
int plot_write_draw_all(struct ctx *c);
int plot_draw_all(struct ctx *c);

#endif
