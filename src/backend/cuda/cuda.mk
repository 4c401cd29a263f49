# src/backend/cuda/cuda.mk - the CUDA backend (included from Makefile.am when configure found
# nvcc and cuBLAS). Its objects go in a static archive built with nvcc; the program and the
# tests that link the training libraries add it (CUDA_ARCHIVE) and CUDA_LIBS. The installed
# libampdiag holds none of it.
#
# -fmad=false: no multiply-add contraction, as the C build (C11 mode) makes none, so that the
# kernels' FP32 arithmetic is the CPU backend's (kernels/bodies.h). Every warning is an error.
SUFFIXES = .cu
NVCCFLAGS = $(CUDA_ARCH) -O2 -std=c++17 -fmad=false --extended-lambda -Werror all-warnings \
	-Xcompiler -fPIC,-Wall,-Wextra,-Werror \
	-I$(top_builddir) -I$(top_srcdir)/include -I$(top_srcdir)/src -I$(top_srcdir)
.cu.o:
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) -c $< -o $@

noinst_LIBRARIES = src/backend/cuda/libampdiag_cuda.a
src_backend_cuda_libampdiag_cuda_a_SOURCES = $(CUDA_SRC) $(CUDA_HDR)

# the suffix rule knows no header dependencies: every object depends on every header
CUDA_OBJECTS = src/backend/cuda/numfmt_check.$(OBJEXT) src/backend/cuda/backend_cuda.$(OBJEXT) \
	src/backend/cuda/ops_cuda.$(OBJEXT) src/backend/cuda/stats_cuda.$(OBJEXT)
$(CUDA_OBJECTS): $(CUDA_HDR) src/backend/backend.h src/numerics/numfmt.h include/ampdiag.h config.h

# The device kernels against a plain read of the same memory (make bench; nvcc links it alone).
noinst_PROGRAMS += bench/bench_gpu_kernels
bench_bench_gpu_kernels_SOURCES =
bench/bench_gpu_kernels$(EXEEXT): bench/bench_gpu_kernels.cu $(CUDA_HDR) src/numerics/numfmt.h include/ampdiag.h config.h
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) $(srcdir)/bench/bench_gpu_kernels.cu -o $@ $(CUDA_LIBS)
