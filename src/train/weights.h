/*
 * weights.h - model parameters to and from HDF5: one float32 dataset per parameter tensor at
 * /<layer name>/<parameter> (e.g. /fc1/weight, /fc1/bias) with PyTorch's shapes, so that a
 * PyTorch state_dict maps onto it with h5py in a few lines (docs/usage.md, "Weights files").
 */
#ifndef AMPDIAG_WEIGHTS_H
#define AMPDIAG_WEIGHTS_H

#include "model/model.h"

#include <stddef.h>

#define WEIGHTS_EBADINPUT (-2)
#define WEIGHTS_EIO (-3)

/* Write every parameter of m (its master values). Refuses to replace an existing file unless
 * overwrite. 0, or WEIGHTS_EIO / WEIGHTS_EBADINPUT with a message. The file is written under a
 * temporary name and renamed, so a failure never leaves a partial file at path. */
int weights_save(const model *m, const char *path, int overwrite, char *err, size_t errlen);

/* Read every parameter of m from path. Missing, extra or mis-shaped tensors are refused by
 * name (nothing is changed then). 0, or WEIGHTS_EBADINPUT / WEIGHTS_EIO with a message. */
int weights_load(model *m, const char *path, char *err, size_t errlen);

#endif
