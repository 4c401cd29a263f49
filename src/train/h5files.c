/*
 * h5files.c - see h5files.h.
 */
#include "train/h5files.h"

#include <string.h>

int h5files_hard_path(hid_t f, const char *path)
{
    char prefix[512];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof prefix)
        return 0;
    for (size_t i = 1; i <= n; i++) {
        if (i < n && path[i] != '/')
            continue;
        memcpy(prefix, path, i);
        prefix[i] = 0;
        /* the components before this one are hard links: nothing else is traversed here */
        htri_t ex = H5Lexists(f, prefix, H5P_DEFAULT);
        if (ex <= 0)
            return ex < 0 ? -1 : 0;
        H5L_info_t li;
        if (H5Lget_info(f, prefix, &li, H5P_DEFAULT) < 0)
            return -1;
        if (li.type != H5L_TYPE_HARD)
            return -2;
    }
    return 1;
}

int h5files_local(hid_t d)
{
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0)
        return -1;
    int next = H5Pget_external_count(dcpl);
    H5D_layout_t lay = H5Pget_layout(dcpl);
    H5Pclose(dcpl);
    if (next < 0 || lay < 0)
        return -1;
    return next == 0 && lay != H5D_VIRTUAL;
}
