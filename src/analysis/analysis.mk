# analysis.mk - trace analysis (src/analysis/analyze.*: one loader, one set of findings), the
# recommendation rules (src/analysis/recommend.*, documented in docs/recommendations.md), the
# text / Markdown / JSON reports (src/report/, JSON in docs/compare-json.md), `ampdiag compare`
# and `ampdiag sweep`, their tests and the compare benchmark. Included from Makefile.am.

noinst_LTLIBRARIES += libampdiag_analysis.la libampdiag_messages.la libampdiag_report.la
libampdiag_analysis_la_SOURCES = \
	src/analysis/run.h src/analysis/cells.c \
	src/analysis/load.h src/analysis/load_internal.h src/analysis/load.c src/analysis/steps.c \
	src/analysis/records.c src/analysis/quant.h src/analysis/quant.c src/analysis/load_many.c \
	src/analysis/columns.h src/analysis/columns.c src/analysis/hist.h src/analysis/hist.c \
	src/analysis/evidence.h src/analysis/evidence.c src/analysis/figures.h src/analysis/figures.c \
	src/analysis/findings.h src/analysis/findings_internal.h src/analysis/findings.c \
	src/analysis/findings_range.c src/analysis/recipe.h src/analysis/recipe.c \
	src/analysis/compare.h src/analysis/compare.c \
	src/analysis/recommend.h src/analysis/rules.h src/analysis/recommend.c \
	src/analysis/rules_prec.c src/analysis/rules_bf16.c src/analysis/rules_verdict.c \
	src/analysis/rules_lr.c src/analysis/rules_clip.c src/analysis/rules_claim.c src/analysis/rules_recipe.c \
	src/analysis/rules_speed.c \
	src/analysis/lrfind.h src/analysis/lrfind.c \
	src/analysis/ranks.h src/analysis/ranks_internal.h src/analysis/group.c src/analysis/ranks.c \
	src/analysis/ranks_steps.c
libampdiag_messages_la_SOURCES = src/messages/messages.h src/messages/messages_internal.h \
	src/messages/expand.c src/messages/msgtab.c src/messages/figtab.c src/messages/docs.c \
	src/messages/verdict.c src/messages/apply.c
libampdiag_report_la_SOURCES = src/report/report.h src/report/report_internal.h \
	src/report/report_common.c src/report/report_text.c src/report/report_md.c \
	src/report/report_json.c src/report/json_evidence.c src/report/whatif.h src/report/whatif.c \
	src/report/recipe.h src/report/recipe.c \
	src/report/info.h src/report/info.c src/report/info_json.c src/report/summary.c \
	src/report/ranks.c

ampdiag_SOURCES += src/cli/compare.h src/cli/cmd_compare.c src/cli/cmd_sweep.c src/cli/cmd_tune.c \
	src/cli/cmd_lrfind.c

# ---------------------------------------------------------------- tests
# t_compare: the analysis and the rules on synthetic traces with known values (percentiles,
# loss scale boundaries, unscaling, skip rates, divergence, noise band, JSON escaping);
# t_compare_cli.sh: `ampdiag compare` on traces of the scenario presets (the verdict and reason
# each must get), JSON validity, --fail-on exit codes, bad input; t_sweep.sh: `ampdiag sweep`.
# t_messages: the message table's templates, number styles and ids (src/messages/)
check_PROGRAMS += tests/t_messages
tests_t_messages_SOURCES = tests/t_messages.c
tests_t_messages_LDADD = $(AMPDIAG_ANALYSIS_LIBS) -lm
TESTS += tests/t_messages
# t_recipe: the block-scaled what-if read into the analysis: two layers alike per tensor and
# unlike per block, the loader's sums, the recipes' plans in info, compare and plot
check_PROGRAMS += tests/t_recipe
tests_t_recipe_SOURCES = tests/t_recipe.c tests/trace_rows.h
tests_t_recipe_CFLAGS = $(AM_CFLAGS) $(HDF5_CFLAGS)
tests_t_recipe_LDADD = $(AMPDIAG_ANALYSIS_LIBS) $(HDF5_LIBS) -lm
TESTS += tests/t_recipe
# t_format_axis.sh: a format added to the table (a dummy one, in a trace) reaches every report
TESTS += tests/t_format_axis.sh
EXTRA_DIST += tests/t_format_axis.sh
# t_advice_cases: issue 26's four failures on data of its own (written there), through run,
# compare's rules and tune, each fixed by the mechanisms, not a special case
check_PROGRAMS += tests/t_advice_cases
tests_t_advice_cases_SOURCES = tests/t_advice_cases.c
tests_t_advice_cases_CFLAGS = $(AM_CFLAGS) $(HDF5_CFLAGS)
tests_t_advice_cases_LDADD = $(AMPDIAG_ANALYSIS_LIBS) $(HDF5_LIBS) -lm
TESTS += tests/t_advice_cases
check_PROGRAMS += tests/t_compare
tests_t_compare_SOURCES = tests/t_compare.c tests/compare_synth.h
tests_t_compare_LDADD = libampdiag_report.la $(AMPDIAG_ANALYSIS_LIBS) -lm
TESTS += tests/t_compare tests/t_compare_cli.sh tests/t_sweep.sh
# t_apply: advice in the run's terms (PyTorch's for a trace ampdiag.torch wrote, ampdiag run's
# options otherwise), the median step time, the eval accuracy and the Speed item
check_PROGRAMS += tests/t_apply
tests_t_apply_SOURCES = tests/t_apply.c tests/compare_synth.h
tests_t_apply_LDADD = libampdiag_report.la $(AMPDIAG_ANALYSIS_LIBS) -lm
TESTS += tests/t_apply
# t_ranks: a distributed run's rank traces read together (src/analysis/ranks.h), on synthetic
# per-rank traces written through the public writer (no PyTorch); t_ranks_cli.sh: info,
# compare and plot of them (text, Markdown, JSON, the ranks chart, exit codes)
check_PROGRAMS += tests/t_ranks
tests_t_ranks_SOURCES = tests/t_ranks.c
tests_t_ranks_LDADD = $(AMPDIAG_ANALYSIS_LIBS) -lm
TESTS += tests/t_ranks tests/t_ranks_cli.sh
EXTRA_DIST += tests/t_ranks_cli.sh
# t_consistency.sh: run's summary, info, compare and plot give every shared figure alike
TESTS += tests/t_consistency.sh
EXTRA_DIST += tests/t_consistency.sh
# t_tune.sh: ampdiag tune, the advice followed and the resulting run checked
TESTS += tests/t_tune.sh
EXTRA_DIST += tests/t_tune.sh
# t_lrfind.sh: ampdiag lrfind, the suggestion followed
TESTS += tests/t_lrfind.sh
EXTRA_DIST += tests/t_lrfind.sh

EXTRA_DIST += tests/t_compare_cli.sh tests/t_sweep.sh docs/recommendations.md docs/compare-json.md

# ---------------------------------------------------------------- benchmark
noinst_PROGRAMS += bench/bench_compare
bench_bench_compare_SOURCES = bench/bench_compare.c tests/compare_synth.h
bench_bench_compare_LDADD = libampdiag_report.la $(AMPDIAG_ANALYSIS_LIBS) -lm

bench-compare: bench/bench_compare ampdiag
	./bench/bench_compare

bench: bench-compare

.PHONY: bench-compare

# The readers on long traces (info, compare, plot of 1k, 10k and 100k steps): bench_readers.sh
# makes the traces with trace_replay from a short real run (bench/trace_replay.c).
noinst_PROGRAMS += bench/trace_replay
bench_trace_replay_SOURCES = bench/trace_replay.c
bench_trace_replay_LDADD = libampdiag_base.la -lm
EXTRA_DIST += bench/bench_readers.sh
# t_long_trace.sh: info and compare of 30000-step traces (made by trace_replay) print what the
# loader printed before chart columns (tests/long/), plot's data of a 100000-step trace is small
# and shows a single-step spike
TESTS += tests/t_long_trace.sh
EXTRA_DIST += tests/t_long_trace.sh tests/long/info-fp32.txt tests/long/info-fp16.txt \
	tests/long/compare.txt tests/long/compare.json

bench-readers: bench/trace_replay ampdiag
	$(SHELL) $(srcdir)/bench/bench_readers.sh ./ampdiag

bench: bench-readers

.PHONY: bench-readers
# t_typed_attrs.sh: the settings the rules read, as typed attributes alone or as the older
# text alone, give the same findings and verdict
TESTS += tests/t_typed_attrs.sh
EXTRA_DIST += tests/t_typed_attrs.sh
# t_fp8_trace.sh: an FP32 run's FP8 E4M3/E5M2 what-if counts against PyTorch's casts of the same
# weights; info's FP8 lines
TESTS += tests/t_fp8_trace.sh
EXTRA_DIST += tests/t_fp8_trace.sh
