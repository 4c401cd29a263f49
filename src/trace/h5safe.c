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

/* Every component of the path to name must itself be a hard link (a soft link in the middle
 * of a path could point anywhere in the file, an external one out of it). 0, or a code. */
static int check_path(hid_t loc, const char *name, hid_t lapl, char *why, size_t n)
{
    char part[1024];
    size_t len = 0;
    for (const char *p = name;; p++) {
        if ((*p == '/' || !*p) && len > 0) {
            part[len] = 0;
            H5L_info_t li;
            htri_t ex = H5Lexists(loc, part, lapl);
            if (ex <= 0 || H5Lget_info(loc, part, &li, lapl) < 0) {
                snprintf(why, n, "is missing");
                return ex < 0 ? H5SAFE_UNOPENABLE : H5SAFE_MISSING;
            }
            if (li.type != H5L_TYPE_HARD) {
                snprintf(why, n, "is %s link", li.type == H5L_TYPE_EXTERNAL ? "an external"
                                                : li.type == H5L_TYPE_SOFT ? "a soft"
                                                                           : "a user-defined");
                return H5SAFE_REFUSED;
            }
        }
        if (!*p)
            return 0;
        if (len + 1 >= sizeof part) {
            snprintf(why, n, "has a name too long");
            return H5SAFE_REFUSED;
        }
        part[len++] = *p;
    }
}

hid_t h5safe_open_dataset(hid_t loc, const char *name, hid_t lapl, char *why, size_t n)
{
    int rc = check_path(loc, name, lapl, why, n);
    if (rc)
        return rc;
    H5O_info_t oi;
    if (H5Oget_info_by_name(loc, name, &oi, lapl) < 0 || oi.type != H5O_TYPE_DATASET) {
        snprintf(why, n, "is not a dataset");
        return H5SAFE_REFUSED;
    }
    hid_t d = H5Dopen2(loc, name, lapl);
    if (d < 0) {
        snprintf(why, n, "cannot be opened (a corrupt file?)");
        return H5SAFE_UNOPENABLE;
    }
    const char *bad = h5safe_storage_problem(d);
    if (bad) {
        snprintf(why, n, "%s", bad);
        H5Dclose(d);
        return H5SAFE_REFUSED;
    }
    return d;
}

/* Bytes the data of d takes (points x type size); 0 when unknown or overflowing. */
static hsize_t data_bytes(hid_t d)
{
    hid_t sp = H5Dget_space(d), ty = H5Dget_type(d);
    hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    size_t ts = ty >= 0 ? H5Tget_size(ty) : 0;
    if (sp >= 0)
        H5Sclose(sp);
    if (ty >= 0)
        H5Tclose(ty);
    if (np < 0 || ts == 0 || (hsize_t)np > (hsize_t)-1 / ts)
        return 0;
    return (hsize_t)np * ts;
}

static hsize_t file_size_of(hid_t d)
{
    hsize_t size = 0;
    hid_t f = H5Iget_file_id(d);
    if (f < 0)
        return 0;
    if (H5Fget_filesize(f, &size) < 0)
        size = 0;
    H5Fclose(f);
    return size;
}

const char *h5safe_storage_problem(hid_t d)
{
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0)
        return "has a storage description HDF5 cannot read";
    int next = H5Pget_external_count(dcpl);
    H5D_layout_t lay = H5Pget_layout(dcpl);
    H5Pclose(dcpl);
    if (next != 0)
        return next < 0 ? "has a storage description HDF5 cannot read"
                        : "keeps its data in external files";
    if (lay == H5D_VIRTUAL)
        return "is a virtual dataset (its data lies in other files)";
    if (lay != H5D_COMPACT && lay != H5D_CONTIGUOUS)
        return lay == H5D_CHUNKED ? NULL : "has an unknown storage layout";
    hsize_t need = data_bytes(d), have = H5Dget_storage_size(d);
    haddr_t at = lay == H5D_CONTIGUOUS ? H5Dget_offset(d) : HADDR_UNDEF;
    if (need == 0)
        return NULL; /* nothing to read (or HDF5 refuses the read itself) */
    if (lay == H5D_COMPACT)
        return have == need ? NULL : "is compact with a buffer of the wrong size";
    if (at == HADDR_UNDEF && have == 0)
        return NULL; /* never written: reads as the fill value */
    hsize_t fsize = file_size_of(d);
    if (fsize == 0 || at == HADDR_UNDEF || have < need || at > fsize || have > fsize - at)
        return "is contiguous with a size or place that does not fit the file";
    return NULL;
}

int h5safe_open_failed_io(char *detail, size_t n)
{
    trace_h5err e;
    trace_h5err_get(&e);
    snprintf(detail, n, "%s", e.detail);
    return e.os_errno != 0 && e.os_errno != ENOENT && !e.truncated;
}
