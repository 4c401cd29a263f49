#!/usr/bin/env python3
"""fp8_casts.py - PyTorch's float32 -> FP8 casts of a sample of float32 bit patterns, for
tests/t_fp8_torch.c to compare with ampdiag's (tests/t_fp8_torch.sh runs both).

The sample: every STRIDE-th of the 2^32 patterns, and +-RADIUS patterns (both signs) around
every FP8 threshold and limit. Writes OUT (native byte order):
    uint64 n
    float32[256] torch.float8_e4m3fn codes 0..255 decoded to float32
    float32[256] the same for torch.float8_e5m2
    uint32[n]    the float32 bit patterns
    uint8[n]     torch's float8_e4m3fn code of each
    uint8[n]     torch's float8_e5m2 code of each

usage: fp8_casts.py OUT
"""
import sys

import numpy as np
import torch

STRIDE = 4099
RADIUS = 512
# |x| bit patterns: E4M3 448, 464, 480, 2^-6 - 2^-10, 2^-6, 2^-9, 2^-10, a subnormal tie;
# E5M2 57344, 61440, 65536, 2^-14 - 2^-17, 2^-14, 2^-16, 2^-17; 0, inf, NaN
EDGES = [0x43E00000, 0x43E80000, 0x43F00000, 0x3C700000, 0x3C800000, 0x3B000000, 0x3A800000, 0x3BA00000,
         0x47600000, 0x47700000, 0x47800000, 0x38600000, 0x38800000, 0x37800000, 0x37000000,
         0x00000000, 0x7F800000, 0x7FC00000]


def sample():
    pats = [np.arange(0, 2**32, STRIDE, dtype=np.uint64)]
    for e in EDGES:
        near = np.arange(max(e - RADIUS, 0), min(e + RADIUS, 0x7FFFFFFF) + 1, dtype=np.uint64)
        pats += [near, near | 0x80000000]
    return np.concatenate(pats).astype(np.uint32)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: fp8_casts.py OUT")
    pats = sample()
    x = torch.from_numpy(pats.view(np.float32).copy())
    e4 = x.to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    e5 = x.to(torch.float8_e5m2).view(torch.uint8).numpy()
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    d4 = codes.view(torch.float8_e4m3fn).to(torch.float32).numpy()
    d5 = codes.view(torch.float8_e5m2).to(torch.float32).numpy()
    with open(sys.argv[1], "wb") as f:
        np.array([len(pats)], dtype=np.uint64).tofile(f)
        for a in (d4, d5, pats, e4, e5):
            np.ascontiguousarray(a).tofile(f)
    print("# torch %s: %d float32 patterns cast to float8_e4m3fn and float8_e5m2" % (torch.__version__, len(pats)))


if __name__ == "__main__":
    main()
