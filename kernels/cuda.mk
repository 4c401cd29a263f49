# kernels/cuda.mk - the CUDA parts (included from Makefile.am when configure found nvcc).
# CUDA objects go in a static archive built with nvcc; programs that use them add CUDA_LIBS.
SUFFIXES = .cu
NVCCFLAGS = $(CUDA_ARCH) -O2 -std=c++17 -Xcompiler -fPIC,-Wall,-Wextra -I$(top_srcdir)/src -I$(top_srcdir)/kernels
.cu.o:
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) -c $< -o $@

noinst_LIBRARIES = kernels/libampdiag_cuda.a
kernels_libampdiag_cuda_a_SOURCES = kernels/numfmt_check.cu kernels/cuda_check.h
