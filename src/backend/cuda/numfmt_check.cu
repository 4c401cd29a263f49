/*
 * numfmt_check.cu - numfmt.h compiled for the device and checked against CUDA's own
 * conversions over every float32 bit pattern (the device-side half of t_numfmt).
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdio.h>

#include "numerics/numfmt.h"
#include "backend/cuda/cuda_check.h"

#define CK(call, err, errlen)                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) {                                                                \
            snprintf((err), (errlen), "%s:%d: %s: %s", __FILE__, __LINE__, #call,              \
                     cudaGetErrorString(e_));                                                   \
            return -1;                                                                          \
        }                                                                                       \
    } while (0)

__global__ void encode_all(unsigned long long *bad)
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

__global__ void decode_all(unsigned long long *bad)
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

extern "C" int ampdiag_cuda_device_count(char *err, size_t errlen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "no CUDA device: %s", cudaGetErrorString(e));
        return 0;
    }
    if (n == 0)
        snprintf(err, errlen, "no CUDA device");
    return n;
}

extern "C" int ampdiag_cuda_check_numfmt(uint64_t bad[4], char *err, size_t errlen)
{
    return ampdiag_cuda_check_numfmt_on(0, bad, err, errlen);
}

extern "C" int ampdiag_cuda_check_numfmt_on(int dev, uint64_t bad[4], char *err, size_t errlen)
{
    unsigned long long *d = NULL, h[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++)
        bad[i] = 0;
    CK(cudaSetDevice(dev), err, errlen);
    CK(cudaMalloc(&d, sizeof h), err, errlen);
    const char *what = "cudaMemset";
    cudaError_t e = cudaMemset(d, 0, sizeof h);
    if (e == cudaSuccess) {
        encode_all<<<1024, 256>>>(d);
        decode_all<<<256, 256>>>(d);
        what = "the check kernels";
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e == cudaSuccess) {
        what = "cudaMemcpy";
        e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    }
    cudaError_t ef = cudaFree(d);
    if (e == cudaSuccess && ef != cudaSuccess) {
        what = "cudaFree";
        e = ef;
    }
    if (e != cudaSuccess) {
        snprintf(err, errlen, "%s:%d: numfmt check, %s: %s", __FILE__, __LINE__, what, cudaGetErrorString(e));
        return -1;
    }
    for (int i = 0; i < 4; i++)
        bad[i] = h[i];
    return 0;
}
