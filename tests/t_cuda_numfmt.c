/*
 * t_cuda_numfmt.c - numfmt.h on the GPU agrees with CUDA's conversions on every float32
 * pattern. SKIP where the build has no CUDA or the machine no GPU.
 */
#include "config.h"
#include "tap.h"

#ifdef AMPDIAG_HAVE_CUDA
#include "backend/cuda/cuda_check.h"

int main(void)
{
    char err[256] = "";
    if (ampdiag_cuda_device_count(err, sizeof err) < 1)
        skip_all(err);
    uint64_t bad[4];
    if (ampdiag_cuda_check_numfmt(bad, err, sizeof err) != 0) {
        ok(0, "CUDA numfmt check ran: %s", err);
        return done_testing();
    }
    ok(bad[0] == 0, "device fp16 encode == __float2half_rn on all 2^32 inputs (%llu bad)", (unsigned long long)bad[0]);
    ok(bad[1] == 0, "device bf16 encode == __float2bfloat16_rn on all 2^32 inputs (%llu bad)", (unsigned long long)bad[1]);
    ok(bad[2] == 0, "device fp16 decode == __half2float on all 65536 patterns (%llu bad)", (unsigned long long)bad[2]);
    ok(bad[3] == 0, "device bf16 decode == __bfloat162float on all 65536 patterns (%llu bad)", (unsigned long long)bad[3]);
    return done_testing();
}
#else
int main(void) { skip_all("built without CUDA (configure found no nvcc/cuBLAS or --without-cuda)"); }
#endif
