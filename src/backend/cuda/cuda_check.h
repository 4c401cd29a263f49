/*
 * cuda_check.h - C entry points of the CUDA self-checks (numfmt_check.cu).
 */
#ifndef AMPDIAG_CUDA_CHECK_H
#define AMPDIAG_CUDA_CHECK_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices; 0 when there is none or no driver (reason in err). */
int ampdiag_cuda_device_count(char *err, size_t errlen);

/* On the first device: round every float32 bit pattern with numfmt.h's device code and with
 * CUDA's own __float2half_rn / __float2bfloat16_rn, and decode every 16-bit pattern both ways.
 * Non-NaN mismatches are counted in bad[0] (fp16 encode), bad[1] (bf16 encode), bad[2] (fp16
 * decode), bad[3] (bf16 decode); NaN must stay NaN (counted too). Returns 0, or -1 on a CUDA
 * error (message in err). */
int ampdiag_cuda_check_numfmt(uint64_t bad[4], char *err, size_t errlen);
/* The same on device dev (made the calling thread's current device). */
int ampdiag_cuda_check_numfmt_on(int dev, uint64_t bad[4], char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
