# compare.mk - `ampdiag compare` and `ampdiag sweep` (issue 5): trace analysis (src/analyze.*),
# the recommendation rules (src/recommend.*, documented in docs/recommendations.md), the text /
# Markdown / JSON reports (src/report.*, JSON in docs/compare-json.md), their tests and the
# compare benchmark. Included from Makefile.am.

# A convenience library, so that the tests and the benchmark link the same analysis code.
noinst_LTLIBRARIES += libampdiag_compare.la
libampdiag_compare_la_SOURCES = \
	src/analyze.h src/analyze.c \
	src/recommend.h src/recommend.c \
	src/report.h src/report.c

ampdiag_SOURCES += src/compare.h src/cmd_compare.c src/cmd_sweep.c
ampdiag_LDADD += libampdiag_compare.la libampdiag.la

# ---------------------------------------------------------------- tests
# t_compare: the analysis and the rules on synthetic traces with known values (percentiles,
# loss scale boundaries, unscaling, skip rates, divergence, noise band, JSON escaping);
# t_compare_cli.sh: `ampdiag compare` on traces of the scenario presets (the verdict and reason
# each must get), JSON validity, --fail-on exit codes, bad input; t_sweep.sh: `ampdiag sweep`.
check_PROGRAMS += tests/t_compare
tests_t_compare_SOURCES = tests/t_compare.c tests/compare_synth.h
tests_t_compare_LDADD = libampdiag_compare.la libampdiag.la -lm
TESTS += tests/t_compare tests/t_compare_cli.sh tests/t_sweep.sh
EXTRA_DIST += tests/t_compare_cli.sh tests/t_sweep.sh docs/recommendations.md docs/compare-json.md

# ---------------------------------------------------------------- benchmark
noinst_PROGRAMS += bench/bench_compare
bench_bench_compare_SOURCES = bench/bench_compare.c tests/compare_synth.h
bench_bench_compare_LDADD = libampdiag_compare.la libampdiag.la -lm

bench-compare: bench/bench_compare ampdiag
	./bench/bench_compare

bench: bench-compare

.PHONY: bench-compare
