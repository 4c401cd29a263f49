# model.mk - the compute layer of the training loop: backend interface, CPU backend, layers,
# models, their tests and the step benchmark. Included from Makefile.am.

libampdiag_train_la_SOURCES += \
	src/backend/backend.h src/backend/cpu/backend_cpu.c src/backend/cpu/optim_cpu.c \
	src/backend/cpu/cpu_internal.h src/numerics/vmath.h src/backend/registry.c \
	src/backend/opcheck.h src/backend/opcheck.c src/backend/opbound.h src/backend/opbound.c \
	src/model/layers.h src/model/layers.c \
	src/model/model.h src/model/model.c src/model/model_spec.c

check_PROGRAMS += tests/t_layers tests/t_model tests/t_backend_ops
tests_t_layers_SOURCES = tests/t_layers.c tests/layers_ref.c tests/layers_ref.h
tests_t_layers_LDADD = $(AMPDIAG_TRAIN_LIBS) -lm
tests_t_model_SOURCES = tests/t_model.c tests/layers_ref.c tests/layers_ref.h
tests_t_model_LDADD = $(AMPDIAG_TRAIN_LIBS) -lm
# every operation of the backend table against the CPU backend's portable code
tests_t_backend_ops_SOURCES = tests/t_backend_ops.c
tests_t_backend_ops_LDADD = $(AMPDIAG_TRAIN_LIBS) -lm
TESTS += tests/t_layers tests/t_model tests/t_backend_ops
CLEANFILES += t_model_spec.tmp

EXTRA_DIST += docs/model-spec.md

# The vector rounding code (F16C, AVX2) against numfmt.h on all 2^32 float32 inputs.
check-exhaustive: check-exhaustive-round
check-exhaustive-round: tests/t_layers
	AMPDIAG_EXHAUSTIVE=1 ./tests/t_layers

noinst_PROGRAMS += bench/bench_step
bench_bench_step_SOURCES = bench/bench_step.c
bench_bench_step_CPPFLAGS = $(AM_CPPFLAGS) $(BLAS_CFLAGS)
bench_bench_step_LDADD = $(AMPDIAG_TRAIN_LIBS) $(BLAS_LIBS) -lm

bench-step: bench/bench_step
	./bench/bench_step

.PHONY: bench-step check-exhaustive-round
