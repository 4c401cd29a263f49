/*
 * numfmt_check.cu - numfmt.h compiled for the device and checked against CUDA's own
 * conversions over every float32 bit pattern (the device-side half of t_numfmt): the launch
 * and the result; the kernels are kernels/numfmt_check.cuh.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdio.h>

#include "numerics/numfmt.h"
#include "backend/cuda/cuda_check.h"
#include "kernels/numfmt_check.cuh"

#define CK(call, err, errlen)                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) {                                                                \
            snprintf((err), (errlen), "%s:%d: %s: %s", __FILE__, __LINE__, #call,              \
                     cudaGetErrorString(e_));                                                   \
            return -1;                                                                          \
        }                                                                                       \
    } while (0)

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
