/*
 * plot.h - gnuplot charts of one or more traces (`ampdiag plot`, `ampdiag compare --plots`).
 *
 * plot_traces() reads the traces, writes into an output directory, per chart, the data (text
 * tables for series, raw float32 matrices for heatmaps) and a self-contained gnuplot script
 * (the chart's variables followed by its template plots/NAME.gp), then runs
 * `gnuplot -d SCRIPT` for each. Runs are overlaid on one chart where that makes sense and are
 * coloured and labelled by precision the same way on every chart.
 *
 * Charts (file names say what they show; EXT is png or svg; RUN is a run's label, LAYER a
 * layer name, both reduced to [A-Za-z0-9._-]):
 *   loss.EXT                       training (and eval) loss of every run; skipped steps and
 *                                  NaN/inf events marked
 *   loss-scale.EXT                 loss scale of every run that used one (log2), backoffs and
 *                                  growths marked
 *   grad-norm.EXT                  global gradient norm (unscaled, before clipping), with the
 *                                  clip value asked for and the runs' own clip drawn
 *   layer-ranges-KIND.EXT          per layer (small multiples): largest and smallest non-zero
 *                                  |x| of KIND (activation, activation_grad, weight_grad)
 *                                  against step, FP16/BF16 limits drawn as bands
 *   fp16-heatmap-RUN.EXT           layer x step: fraction of values that would flush to zero /
 *                                  overflow in FP16, for activations and gradients: without
 *                                  loss scaling for a run that had none, the cells a loss scale
 *                                  would keep marked; of an FP16 run, the change in its share of
 *                                  zeros against an FP32 run drawn with it (or its own share,
 *                                  said so); FORMAT-heatmap-RUN.EXT the same for each what-if
 *                                  format --what-if names (e4m3-heatmap-RUN.EXT, ...)
 *   quant-heatmap-COLUMN-RUN.EXT   layer x step, a panel per tensor kind: the SQNR in dB (or the
 *                                  share flushed to zero) of a /quant column (a block-scaled
 *                                  what-if) --quant names
 *   exponent-histogram-RUN-LAYER.EXT   log2 exponent histograms of LAYER's gradients at chosen
 *                                  steps, FP16/BF16 windows shaded; for a loss-scaled run both
 *                                  as held (scaled) and unscaled
 *   ranks-RUN.EXT                  a run read from its ranks' traces (analysis/ranks.h): one
 *                                  line per rank of the training loss, the gradient norm and
 *                                  the loss scale (where a rank used one)
 *
 * Each chart NAME.EXT comes with NAME.gp and NAME*.dat / NAME*.bin in the output directory;
 * `cd DIR && gnuplot NAME.gp` redraws it anywhere, and draw-all.sh redraws them all.
 */
#ifndef AMPDIAG_PLOT_H
#define AMPDIAG_PLOT_H

#include <stddef.h>
#include <stdint.h>

typedef enum plot_format { PLOT_PNG = 0, PLOT_SVG = 1 } plot_format;

typedef struct plot_options {
    plot_format format;          /* PLOT_PNG (default) or PLOT_SVG */
    double clip;                 /* clip value to draw on grad-norm; NaN (default) = none */
    const char *clip_label;      /* its legend text; NULL = "clip value X" */
    const char *const *layers;   /* layer names for the per-layer charts; NULL = automatic */
    size_t nlayers;
    const int64_t *hist_steps;   /* steps for the exponent histograms (the nearest recorded
                                    histogram step is used); NULL = up to 4 spread over the run */
    size_t nhist_steps;
    const char *gnuplot;         /* gnuplot program (default "gnuplot", looked up on PATH) */
    const char *templates;       /* template directory; NULL = plot_templates_dir() */
    int draw;                    /* 1 (default): run gnuplot; 0: write data and scripts only */
    int jobs;                    /* gnuplot processes at once; 0 (default) = online CPUs */
    const char *whatif;          /* what-if columns beyond FP16 (and BF16's bands) to chart, as
                                    --what-if names them ("e4m3,e5m2", "fp8", "all"); NULL: none */
    int alone;                   /* 1: a rank-0 trace by itself, not with the ranks beside it */
    const char *quant;           /* /quant columns to chart as quant-heatmap-*: their names, recipes'
                                    names (their columns) or "all"; NULL: none */
    int quant_flush;             /* 1: those heatmaps show the share flushed to zero, 0: the SQNR */
} plot_options;

void plot_options_init(plot_options *opt);

typedef struct plot_chart {
    char file[160];    /* chart file name inside the output directory ("loss.png") */
    char script[160];  /* its script ("loss.gp") */
    char desc[512];    /* one line saying what the chart shows */
    int width, height; /* its size in pixels (SVG: user units) */
    int drawn;         /* 1 when gnuplot made the file and exited 0 */
    int warned;        /* 1 when gnuplot wrote anything on stderr (kept in NAME.log) */
    char message[256]; /* first line of gnuplot's stderr, or why it failed ("" if nothing) */
} plot_chart;

typedef struct plot_result {
    plot_chart *charts;    /* in a fixed order: loss, loss-scale, grad-norm, layer-ranges-*,
                              fp16-heatmap-*, quant-heatmap-*, exponent-histogram-*, ranks-* */
    size_t n;
    int gnuplot_missing;   /* gnuplot could not be run: data and scripts are written */
    char notes[512];       /* charts left out and why ("loss-scale: no run used a loss scale") */
} plot_result;

void plot_result_free(plot_result *res);

/* Return codes of plot_traces. */
enum {
    PLOT_OK = 0,
    PLOT_EINPUT = -1,     /* bad option, unreadable or invalid trace, nothing to plot (exit 2) */
    PLOT_EIO = -2,        /* the output directory or a file in it could not be written (3) */
    PLOT_ENOMEM = -3,     /* out of memory (3) */
    PLOT_ENOGNUPLOT = -4, /* gnuplot is not installed: data and scripts written, no charts (3) */
    PLOT_EGNUPLOT = -5    /* gnuplot failed on some chart (see res->charts[i].message) (3) */
};

/* The ampdiag exit status for a return code (0, 2 or 3). */
int plot_exit_status(int rc);

/*
 * Chart the n traces paths[0..n) into outdir (created if missing; existing chart files are
 * replaced); a path may name a distributed run's rank traces (analysis/ranks.h: a glob, or a
 * rank-0 trace with its siblings), charted as one run. res (may be NULL) receives the charts made, also on PLOT_ENOGNUPLOT and
 * PLOT_EGNUPLOT; free it with plot_result_free. On failure err says what went wrong, naming
 * the file or option. Returns PLOT_OK or a negative PLOT_E* code.
 */
int plot_traces(const char *const *paths, int n, const char *outdir, const plot_options *opt,
                plot_result *res, char *err, size_t errlen);

/* Where the templates are looked up: $AMPDIAG_PLOTS_DIR, else the installed
 * $(pkgdatadir)/plots, else plots/ in the source tree the program was built from (the first
 * that holds loss.gp). */
const char *plot_templates_dir(void);

#endif
