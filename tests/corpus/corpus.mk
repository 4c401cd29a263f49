# tests/corpus/corpus.mk - the advice corpus (docs/advice-corpus.md): a seeded generator of
# configurations nobody tuned the rules to, their ground truth from FP32 runs over an lr grid,
# and the harness that judges compare's advice and tune by re-running them. Included from
# Makefile.am.
#
# t_advice_corpus.sh (make check): the fixed-seed subset of 30 configurations and the failures
# of issue 26 (cases.json): no false verification, no healthy configuration harmed; each
# failure's expected outcome, TODO while known-failures.txt lists it. A few minutes.
# t_advice_harness.sh: the corpus's own parts (selftest.py: generator, adapter, bands, data.py).
TESTS += tests/t_advice_harness.sh tests/t_advice_corpus.sh
EXTRA_DIST += tests/t_advice_harness.sh tests/corpus/selftest.py \
	tests/t_advice_corpus.sh tests/corpus/corpus.mk tests/corpus/gen.py tests/corpus/data.py \
	tests/corpus/adapter.py tests/corpus/harness.py tests/corpus/cases.json tests/corpus/known-failures.txt \
	docs/advice-corpus.md

# make check-advice: the hand-written cases, the failures of issue 26 and the corpus (200
# configurations by default; about an hour on two cores): the goals of issue 26 measured.
# ADVICE_FLAGS='--seed S -n N -j J -o DIR' (-o keeps the results and resumes from them).
check-advice: ampdiag$(EXEEXT)
	AMPDIAG=./ampdiag$(EXEEXT) $(SHELL) $(srcdir)/tests/advice.sh $(ADVICE_FLAGS)
EXTRA_DIST += tests/advice.sh
.PHONY: check-advice
