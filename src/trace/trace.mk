# trace.mk - the HDF5 trace format v2 (traces/FORMAT.md): writer, reader and validation
# (src/trace/*.c: libampdiag's only HDF5 users; src/train/data.c and weights.c read data sets
# and weights files with HDF5 too), `ampdiag info`, their tests, the
# reference traces and the trace benchmark. Included from Makefile.am.

libampdiag_base_la_SOURCES += \
	include/ampdiag_trace.h src/trace/trace_internal.h \
	src/trace/trace_common.c src/trace/trace.c src/trace/trace_read.c src/trace/trace_sandbox.c \
	src/trace/h5safe.c src/trace/h5safe.h src/trace/trace_chunks.c src/trace/trace_chunks.h \
	src/trace/trace_notes.h src/trace/trace_rank.c

ampdiag_SOURCES += src/cli/cmd_info.c

# ---------------------------------------------------------------- tests
# t_trace: round trip of every record type; t_trace_validate: every way a file can fail to be a
# trace (it builds bad files with the HDF5 API); t_trace_crash: SIGKILLed writers and a write
# failure (file size limit); t_trace_ref: the reference traces in traces/; t_info.sh: the CLI.
check_PROGRAMS += tests/t_trace tests/t_trace_validate tests/t_trace_crash tests/t_trace_ref \
	tests/t_public_writer tests/t_trace_rank
tests_t_trace_SOURCES = tests/t_trace.c tests/trace_synth.h
tests_t_trace_LDADD = libampdiag.la -lm
tests_t_trace_validate_SOURCES = tests/t_trace_validate.c tests/trace_synth.h
tests_t_trace_validate_CFLAGS = $(AM_CFLAGS) $(HDF5_CFLAGS)
tests_t_trace_validate_LDADD = libampdiag.la $(HDF5_LIBS) -lz -lm
tests_t_trace_crash_SOURCES = tests/t_trace_crash.c tests/trace_synth.h
tests_t_trace_crash_LDADD = libampdiag.la -lm
tests_t_trace_ref_SOURCES = tests/t_trace_ref.c tests/trace_synth.h
tests_t_trace_ref_LDADD = libampdiag.la -lm
# t_public_writer: a trace copied through the public API alone (t_public_writer.sh runs it)
tests_t_public_writer_SOURCES = tests/t_public_writer.c
tests_t_public_writer_LDADD = libampdiag.la
# t_trace_rank: one rank's trace of a distributed run (ampdiag_trace_set_rank / _get_rank)
tests_t_trace_rank_SOURCES = tests/t_trace_rank.c
tests_t_trace_rank_LDADD = libampdiag.la
TESTS += tests/t_trace tests/t_trace_validate tests/t_trace_crash tests/t_trace_ref tests/t_info.sh \
	tests/t_public_writer.sh tests/t_trace_rank

TRACE_REFERENCE = traces/v1-fp32-complete.h5 traces/v1-fp16-diverged.h5 traces/v1-cutoff.h5 \
	traces/v2-fp32-delayed.h5
EXTRA_DIST += tests/t_info.sh tests/t_public_writer.sh tests/valgrind-hdf5.supp tests/lsan-hdf5.supp traces/FORMAT.md \
	traces/README.md \
	$(TRACE_REFERENCE)

# The trace tests under valgrind. Children of t_trace_crash exit without cleaning up on
# purpose (they stand for killed runs), hence --child-silent-after-fork; the suppressions file
# covers a leak inside HDF5 1.10 when it reads corrupt metadata. (Under ASan, the same with
# ASAN_OPTIONS=fast_unwind_on_malloc=0 LSAN_OPTIONS=suppressions=tests/lsan-hdf5.supp.)
VALGRIND_TRACE = valgrind -q --leak-check=full --error-exitcode=1 --child-silent-after-fork=yes \
	--suppressions=$(srcdir)/tests/valgrind-hdf5.supp
check-valgrind-trace: tests/t_trace tests/t_trace_validate tests/t_trace_crash tests/t_trace_ref ampdiag
	@for t in t_trace t_trace_validate t_trace_crash t_trace_ref; do \
	  echo "valgrind tests/$$t"; \
	  srcdir=$(srcdir) $(LIBTOOL) --mode=execute $(VALGRIND_TRACE) ./tests/$$t > tests/$$t.vg.log \
	    || { echo "tests/$$t failed under valgrind (see tests/$$t.vg.log)"; exit 1; }; \
	done
	srcdir=$(srcdir) AMPDIAG="$(LIBTOOL) --mode=execute $(VALGRIND_TRACE) ./ampdiag" \
	  $(SHELL) $(srcdir)/tests/t_info.sh > tests/t_info.vg.log || { cat tests/t_info.vg.log; exit 1; }
CLEANFILES += tests/t_trace.vg.log tests/t_trace_validate.vg.log tests/t_trace_crash.vg.log \
	tests/t_trace_ref.vg.log tests/t_info.vg.log

# Rewrite the reference traces (only when their content is meant to change: every later version
# must still read the committed ones).
reference-traces: tests/t_trace_ref
	./tests/t_trace_ref --write $(srcdir)/traces

# ---------------------------------------------------------------- benchmark
noinst_PROGRAMS += bench/bench_trace
bench_bench_trace_SOURCES = bench/bench_trace.c
bench_bench_trace_LDADD = libampdiag.la -lm

bench-trace: bench/bench_trace
	./bench/bench_trace

bench: bench-trace

.PHONY: bench-trace reference-traces check-valgrind-trace

# t_sandbox: the child process that parses untrusted files first (limits on CPU time and memory)
check_PROGRAMS += tests/t_sandbox
tests_t_sandbox_SOURCES = tests/t_sandbox.c
tests_t_sandbox_CFLAGS = $(AM_CFLAGS) $(HDF5_CFLAGS)
tests_t_sandbox_LDADD = libampdiag_base.la $(HDF5_LIBS)
TESTS += tests/t_sandbox
# t_hostile: traces and inputs built to hurt (external links and storage, virtual datasets,
# absurd extents and steps, a huge loss scale, terminal escapes, run's inputs as its outputs,
# NaN option values); it runs ./ampdiag.
check_PROGRAMS += tests/t_hostile
tests_t_hostile_SOURCES = tests/t_hostile.c
tests_t_hostile_CFLAGS = $(AM_CFLAGS) $(HDF5_CFLAGS)
tests_t_hostile_LDADD = libampdiag.la $(HDF5_LIBS) -lm
TESTS += tests/t_hostile

# t_fulldisk.sh: a run on a full filesystem (a small tmpfs, where the test may mount one) and
# under a file-size limit ends with exit 3, its trace readable up to the last flush.
# t_kill.sh: runs SIGKILLed at random times leave traces that open (10 kills; check-kill: 100).
TESTS += tests/t_fulldisk.sh tests/t_kill.sh
EXTRA_DIST += tests/t_fulldisk.sh tests/t_kill.sh
check-kill: ampdiag$(EXEEXT)
	KILLS=100 AMPDIAG=./ampdiag$(EXEEXT) $(SHELL) $(srcdir)/tests/t_kill.sh
.PHONY: check-kill
# t_inputs.sh: overlong paths, output directories that cannot be, data and weights files that
# point to other files: refused before any work with the right exit status
TESTS += tests/t_inputs.sh
EXTRA_DIST += tests/t_inputs.sh
# t_outputs.sh: outputs checked before any work, only regular files ever replaced (--overwrite
# included), every exit 2 saying why
TESTS += tests/t_outputs.sh
EXTRA_DIST += tests/t_outputs.sh
