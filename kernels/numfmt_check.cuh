/*
 * numfmt_check.cuh - the device side of the format check (CUDA C++ only): numfmt.h's rounding
 * compiled for the device against CUDA's own conversions (__float2half_rn,
 * __float2bfloat16_rn and their decodings) over every float32 and every 16-bit pattern; the
 * mismatches counted into bad[0..3]. Launched by src/backend/cuda/numfmt_check.cu.
 */
#ifndef AMPDIAG_KERNELS_NUMFMT_CHECK_CUH
#define AMPDIAG_KERNELS_NUMFMT_CHECK_CUH

#include "numerics/numfmt.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

static __global__ void encode_all(unsigned long long *bad)
{
    unsigned long long nh = 0, nb = 0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i <= 0xffffffffull; i += stride) {
        float x = __uint_as_float((unsigned)i);
        uint16_t h = ampdiag_fp16_bits_rne(x);
        uint16_t b = ampdiag_bf16_bits_rne(x);
        unsigned short hc = __half_as_ushort(__float2half_rn(x));
        unsigned short bc = __bfloat16_as_ushort(__float2bfloat16_rn(x));
        if (x != x) { /* NaN: both must be NaN patterns */
            nh += !((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu));
            nb += !((b & 0x7f80u) == 0x7f80u && (b & 0x7fu));
        } else {
            nh += h != hc;
            nb += b != bc;
        }
    }
    atomicAdd(&bad[0], nh);
    atomicAdd(&bad[1], nb);
}

static __global__ void decode_all(unsigned long long *bad)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > 0xffffu)
        return;
    uint16_t p = (uint16_t)i;
    float h = ampdiag_fp16_bits_to_f32(p), hc = __half2float(__ushort_as_half(p));
    float b = ampdiag_bf16_bits_to_f32(p), bc = __bfloat162float(__ushort_as_bfloat16(p));
    /* a NaN must decode to a NaN; its sign and payload are not compared (CUDA's conversions
     * return one canonical NaN, numfmt.h keeps the sign and payload as F16C and PyTorch's CPU
     * code do: on an H100 the 1023 negative FP16 NaNs differed in sign alone) */
    if ((h != h) != (hc != hc) || (h == h && (h != hc || signbit(h) != signbit(hc))))
        atomicAdd(&bad[2], 1ull);
    if ((b != b) != (bc != bc) || (b == b && (b != bc || signbit(b) != signbit(bc))))
        atomicAdd(&bad[3], 1ull);
}

#endif /* AMPDIAG_KERNELS_NUMFMT_CHECK_CUH */
