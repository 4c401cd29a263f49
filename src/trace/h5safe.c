/* h5safe.c - reading HDF5 files that may have been crafted (see h5safe.h). */
#include "trace/h5safe.h"
#include "trace/trace_internal.h"

#include <errno.h>
#include <stdio.h>

static herr_t deny_elink(const char *parent_file_name, const char *parent_group_name,
                         const char *child_file_name, const char *child_object_name,
                         unsigned *acc_flags, hid_t fapl_id, void *op_data)
{
    (void)parent_file_name; (void)parent_group_name; (void)child_file_name;
    (void)child_object_name; (void)acc_flags; (void)fapl_id; (void)op_data;
    return -1;
}

hid_t h5safe_lapl(void)
{
    hid_t lapl = H5Pcreate(H5P_DATASET_ACCESS); /* a link access list too */
    if (lapl >= 0 && H5Pset_elink_cb(lapl, deny_elink, NULL) < 0) {
        H5Pclose(lapl);
        return -1;
    }
    return lapl;
}

/* Every group on the way to name must itself be a hard link (a soft link in the middle of a
 * path could point anywhere in the file, an external one out of it). */
static int check_path(hid_t loc, const char *name, hid_t lapl, char *why, size_t n)
{
    char part[1024];
    size_t len = 0;
    for (const char *p = name;; p++) {
        if (*p == '/' || !*p) {
            if (len > 0) {
                part[len] = 0;
                H5L_info_t li;
                htri_t ex = H5Lexists(loc, part, lapl);
                if (ex <= 0 || H5Lget_info(loc, part, &li, lapl) < 0) {
                    snprintf(why, n, "missing");
                    return -1;
                }
                if (li.type != H5L_TYPE_HARD) {
                    snprintf(why, n, "%s link",
                             li.type == H5L_TYPE_EXTERNAL ? "an external"
                             : li.type == H5L_TYPE_SOFT   ? "a soft"
                                                          : "a user-defined");
                    return -1;
                }
            }
            if (!*p)
                return 0;
        }
        if (len + 1 >= sizeof part) {
            snprintf(why, n, "a name too long");
            return -1;
        }
        part[len++] = *p;
    }
}

static int check_storage(hid_t d, char *why, size_t n)
{
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0) {
        snprintf(why, n, "of unreadable storage");
        return -1;
    }
    int next = H5Pget_external_count(dcpl);
    H5D_layout_t lay = H5Pget_layout(dcpl);
    H5Pclose(dcpl);
    if (next != 0) {
        snprintf(why, n, "kept in external files");
        return -1;
    }
    if (lay == H5D_VIRTUAL || lay < 0) {
        snprintf(why, n, "%s", lay < 0 ? "of an unknown storage layout" : "a virtual dataset");
        return -1;
    }
    return 0;
}

int h5safe_check_dataset(hid_t loc, const char *name, hid_t lapl, char *why, size_t n)
{
    hid_t d = h5safe_open_dataset(loc, name, lapl, why, n);
    if (d < 0)
        return -1;
    H5Dclose(d);
    return 0;
}

hid_t h5safe_open_dataset(hid_t loc, const char *name, hid_t lapl, char *why, size_t n)
{
    if (check_path(loc, name, lapl, why, n) < 0)
        return -1;
    H5O_info_t oi;
    if (H5Oget_info_by_name(loc, name, &oi, lapl) < 0 || oi.type != H5O_TYPE_DATASET) {
        snprintf(why, n, "not a dataset");
        return -1;
    }
    hid_t d = H5Dopen2(loc, name, lapl);
    if (d < 0) {
        snprintf(why, n, "unreadable (corrupt file?)");
        return -1;
    }
    if (check_storage(d, why, n) < 0) {
        H5Dclose(d);
        return -1;
    }
    return d;
}

int h5safe_open_failed_io(char *detail, size_t n)
{
    trace_h5err e;
    trace_h5err_get(&e);
    snprintf(detail, n, "%s", e.detail);
    return e.os_errno != 0 && e.os_errno != ENOENT && !e.truncated;
}
