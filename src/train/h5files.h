/*
 * h5files.h - reading users' HDF5 files (data sets, weights) without being led elsewhere. A file
 * given to `ampdiag run` must not make it read other files: only hard links are followed, and a
 * dataset whose data lies in external files or is virtual is refused.
 */
#ifndef AMPDIAG_H5FILES_H
#define AMPDIAG_H5FILES_H

#include <hdf5.h>

/* Whether every component of path ("/a/b") is a hard link: 1 yes, 0 a component is missing,
 * -2 one is a soft, external or user-defined link, -1 HDF5 failed. */
int h5files_hard_path(hid_t f, const char *path);
/* 1 when dataset d keeps its data in the file itself, 0 when not (external storage, virtual),
 * -1 when its storage cannot be read. */
int h5files_local(hid_t d);

#endif
