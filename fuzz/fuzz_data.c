/*
 * fuzz_data.c - libFuzzer target: data files (src/train/data.c), the HDF5 files of
 * `ampdiag run --data FILE`, loaded as an MLP (features and labels) and as a transformer
 * (tokens) would load them.
 */
#include "train/data.h"

#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write(data, size, ".h5");
    if (!path)
        return 0;
    for (int tokens = 0; tokens < 2; tokens++) {
        dataset ds;
        char err[512];
        if (data_load(&ds, path, tokens, 1, err, sizeof err) == 0)
            data_free(&ds);
    }
    return 0;
}
