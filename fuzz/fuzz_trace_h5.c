/*
 * fuzz_trace_h5.c - libFuzzer target: fuzz_trace.c with every table read through HDF5's own
 * path (AMPDIAG_NO_CHUNK_READER), the way a trace is read whose tables the chunk reader does not
 * take (contiguous tables, other filters, a chunk that does not inflate to its size) and every
 * trace opened while it is written (SWMR). Fixed-length strings copied by HDF5 without
 * conversion and chunks that inflate beyond their size are reached this way.
 */
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("AMPDIAG_NO_CHUNK_READER", "1", 1);
    return 0;
}

#include "fuzz_trace.c"
