# plot.mk - charts: src/plot/plot.c writes the chart data and scripts and runs gnuplot,
# `ampdiag plot` (src/cli/cmd_plot.c), the chart templates plots/*.gp (installed in
# $(pkgdatadir)/plots, where users can restyle them) and their tests. Included from Makefile.am.

# A convenience library of its own, so that only plot.c gets the template directories compiled in
# (the chart table and its driver in plot.c, the charts in plot_series.c, plot_layers.c and
# plot_hist.c, the runs in plot_runs.c, gnuplot's files in plot_gp.c, gnuplot run by plot_draw.c):
# $(pkgdatadir)/plots once installed, $(abs_top_srcdir)/plots for the build tree (make check,
# make distcheck); $AMPDIAG_PLOTS_DIR overrides both at run time.
noinst_LTLIBRARIES += libampdiag_plot.la
libampdiag_plot_la_SOURCES = src/plot/plot.h src/plot/plot_internal.h src/plot/plot.c src/plot/plot_gp.c \
	src/plot/plot_runs.c src/plot/plot_series.c src/plot/plot_layers.c src/plot/plot_hist.c src/plot/plot_quant.c \
	src/plot/plot_draw.c
libampdiag_plot_la_CPPFLAGS = $(AM_CPPFLAGS) -DAMPDIAG_PKGDATADIR='"$(pkgdatadir)"' \
	-DAMPDIAG_SRCDIR='"$(abs_top_srcdir)"'

ampdiag_SOURCES += src/cli/cmd_plot.c

plotsdir = $(pkgdatadir)/plots
dist_plots_DATA = plots/loss.gp plots/loss-scale.gp plots/grad-norm.gp plots/layer-ranges.gp plots/ranks.gp \
	plots/fp16-heatmap.gp plots/quant-heatmap.gp plots/exponent-histogram.gp

# t_plot: plot_traces() on synthetic traces with known values (data files, chart list, errors);
# t_plot_cli.sh: `ampdiag plot` on real runs: every chart drawn without a gnuplot warning, PNG and
# SVG of the expected size, gnuplot missing (exit 3, scripts written), bad input (exit 2).
check_PROGRAMS += tests/t_plot
tests_t_plot_SOURCES = tests/t_plot.c
tests_t_plot_LDADD = libampdiag_plot.la $(AMPDIAG_ANALYSIS_LIBS) -lm
TESTS += tests/t_plot tests/t_plot_cli.sh
EXTRA_DIST += tests/t_plot_cli.sh

# Example charts shown in the README (made by `ampdiag plot`, see docs/charts/README.md).
EXTRA_DIST += docs/charts/README.md docs/charts/ranks-poison.png docs/charts/loss.png docs/charts/layer-ranges-activation_grad.png \
	docs/charts/fp16-heatmap-fp32.png docs/charts/exponent-histogram-fp16-fc4.png \
	docs/charts/quant-heatmap-nvfp4-e4m3-2d-fp32.png
