# src/backend/cuda/cuda.mk - the CUDA parts (included from Makefile.am when configure found nvcc).
# CUDA objects go in a static archive built with nvcc; programs that use them add CUDA_LIBS.
SUFFIXES = .cu
NVCCFLAGS = $(CUDA_ARCH) -O2 -std=c++17 -Xcompiler -fPIC,-Wall,-Wextra -I$(top_srcdir)/include -I$(top_srcdir)/src
.cu.o:
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) -c $< -o $@

noinst_LIBRARIES = src/backend/cuda/libampdiag_cuda.a
src_backend_cuda_libampdiag_cuda_a_SOURCES = src/backend/cuda/numfmt_check.cu src/backend/cuda/cuda_check.h
