# fuzz/fuzz.mk - the libFuzzer targets, built and run by `make fuzz` (Makefile.am passes the
# variables below; GNU make). Every source of src/ (but the CUDA ones) is compiled again with
# clang's -fsanitize=fuzzer-no-link,address,undefined into fuzz/build/ (main renamed ampdiag_main
# for the command-line target); each target links its fuzz/fuzz_NAME.c with them.
#
#   make fuzz                                  every target for FUZZ_SECONDS (60) each
#   make fuzz FUZZ_TARGETS=trace FUZZ_SECONDS=900
#   make fuzz-build                            build only
#
# A run starts from the committed seeds (fuzz/corpus/NAME) and keeps what it finds in
# fuzz/build/corpus/NAME; a crash, sanitizer report or hang is saved as
# fuzz/build/artifacts/NAME-crash-* (or -timeout-, -oom-) and makes `make fuzz` fail. Turn each
# into a regression file (fuzz/regress/, docs/fuzzing.md) once it is fixed.

srcdir ?= .
top_builddir ?= .
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= trace trace_h5 model_spec data weights cli
FUZZ_FLAGS ?=

B := fuzz/build
# clang 14 does not know the "f16c" feature of __builtin_cpu_supports (gcc does): the fuzz build
# takes the generic (non-SIMD) code paths everywhere; the readers under test have none.
NO_CPU_DISPATCH := '-D__builtin_cpu_supports(feature)=0'
SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
CFLAGS_F := -std=c11 -g -O1 $(SAN) -fsanitize=fuzzer-no-link $(NO_CPU_DISPATCH) -DAMPDIAG_NO_DEVICE_BACKENDS \
	-I$(srcdir)/include -I$(srcdir)/src -I$(top_builddir) -I$(srcdir)/fuzz \
	-D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L $(HDF5_CFLAGS) $(BLAS_CFLAGS)
LIBS_F := $(HDF5_LIBS) $(BLAS_LIBS) $(LIBS) -lpthread -lm

SRCS := $(sort $(wildcard $(srcdir)/src/*/*.c $(srcdir)/src/backend/cpu/*.c))
OBJS := $(patsubst $(srcdir)/%.c,$(B)/obj/%.o,$(SRCS))
BINS := $(patsubst %,$(B)/fuzz_%,$(FUZZ_TARGETS))

# per target: libFuzzer options (the command-line target leaves commands by longjmp, which
# skips their frees: no leak detection there)
# The probe's child (src/trace/trace_sandbox.c) inherits libFuzzer's malloc limit, and a damaged
# file can make HDF5 ask for gigabytes there: the program kills that child at 512 MiB and
# refuses the file, but libFuzzer would save the input as an "oom" first. The file readers run
# with a malloc limit libFuzzer never reaches (the RSS limit still applies to the fuzzer itself).
OPTS_file := -timeout=10 -malloc_limit_mb=1048576
OPTS_trace := $(OPTS_file)
OPTS_trace_h5 := $(OPTS_file)
OPTS_model_spec := -timeout=10 -max_len=4096
OPTS_data := $(OPTS_file)
OPTS_weights := $(OPTS_file)
OPTS_cli := -timeout=10 -max_len=1024 -detect_leaks=0

# A small quarantine: the readers fork a child per file (the probe, src/trace/trace_sandbox.c),
# and a fork copies the fuzzer's page tables (3 times the executions per second of the default).
ASAN_RUN := allocator_may_return_null=1:quarantine_size_mb=16:malloc_context_size=10

.PHONY: build run
build: $(BINS)

$(B)/obj/src/cli/main.o: EXTRA := -Dmain=ampdiag_main
$(B)/obj/%.o: $(srcdir)/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CFLAGS_F) $(EXTRA) -c $< -o $@

$(B)/libampdiag_fuzz.a: $(OBJS)
	rm -f $@
	ar rcs $@ $(OBJS)

$(B)/fuzz_%: $(srcdir)/fuzz/fuzz_%.c $(srcdir)/fuzz/fuzz_file.h $(B)/libampdiag_fuzz.a
	$(FUZZ_CC) $(CFLAGS_F) -fsanitize=fuzzer $< $(B)/libampdiag_fuzz.a $(LIBS_F) -o $@
$(B)/fuzz_trace_h5: $(srcdir)/fuzz/fuzz_trace.c

# Each target in turn; the status is that of the worst run.
run: build
	@status=0; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(B)/corpus/$$t $(B)/artifacts; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s (log: $(B)/fuzz_$$t.log)"; \
	  case $$t in trace) o='$(OPTS_trace)';; trace_h5) o='$(OPTS_trace_h5)';; model_spec) o='$(OPTS_model_spec)';; \
	    data) o='$(OPTS_data)';; weights) o='$(OPTS_weights)';; cli) o='$(OPTS_cli)';; esac; \
	  if ASAN_OPTIONS=$${ASAN_OPTIONS:-$(ASAN_RUN)} \
	     LSAN_OPTIONS=$${LSAN_OPTIONS:-suppressions=$(abspath $(srcdir))/fuzz/lsan.supp} \
	     $(B)/fuzz_$$t $$o -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -close_fd_mask=3 \
	       -print_final_stats=1 -artifact_prefix=$(B)/artifacts/$$t- $(FUZZ_FLAGS) \
	       $(B)/corpus/$$t $(srcdir)/fuzz/corpus/$${t%_h5} >$(B)/fuzz_$$t.log 2>&1; then \
	    tail -n 14 $(B)/fuzz_$$t.log | grep -E '^(stat::|Done|#)' | tr '\n' ' '; echo; \
	  else \
	    status=1; echo "fuzz: $$t FOUND A FAILURE:"; tail -n 40 $(B)/fuzz_$$t.log; \
	  fi; \
	done; exit $$status
