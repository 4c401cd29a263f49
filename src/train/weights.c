/*
 * weights.c - model parameters to and from HDF5 (weights.h).
 */
#include "train/weights.h"
#include "trace/h5safe.h"
#include "util/path.h"
#include "util/util.h"

#include <errno.h>
#include <hdf5.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static const char *shape_text(const param_view *pv, char *buf, size_t n)
{
    if (pv->ndim == 2)
        snprintf(buf, n, "[%d, %d]", pv->shape[0], pv->shape[1]);
    else
        snprintf(buf, n, "[%d]", pv->shape[0]);
    return buf;
}

static void quiet_hdf5(H5E_auto2_t *f, void **d)
{
    H5Eget_auto2(H5E_DEFAULT, f, d);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

int weights_save(const model *m, const char *path, int overwrite, char *err, size_t errlen)
{
    if (!overwrite && access(path, F_OK) == 0) {
        errf(err, errlen, "%s: exists (use --overwrite to replace it)", path);
        return WEIGHTS_EBADINPUT;
    }
    if (path_too_long(path, err, errlen))
        return WEIGHTS_EBADINPUT;
    /* an unpredictable temporary name, created by HDF5 with O_EXCL */
    char *tmp = path_tmp_name(path);
    if (!tmp) {
        errf(err, errlen, "%s: cannot create a temporary file next to it (%s)", path, strerror(errno));
        return WEIGHTS_EIO;
    }
    H5E_auto2_t ef;
    void *ed;
    quiet_hdf5(&ef, &ed);
    int rc = WEIGHTS_EIO;
    /* the weights as the backend holds them, copied to the host once */
    float *host = malloc((m->nparams ? m->nparams : 1) * sizeof *host);
    hid_t f = -1;
    if (!host) {
        errf(err, errlen, "%s: out of memory", path);
        goto out;
    }
    m->bk->to_host(m->bk, host, m->params, m->nparams * sizeof *host);
    f = H5Fcreate(tmp, H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) {
        errf(err, errlen, "%s: cannot create (%s)", path, strerror(errno));
        goto out;
    }
    for (int i = 0; i < m->nlayers; i++) {
        const layer *L = &m->layers[i];
        if (L->nparams == 0)
            continue;
        hid_t g = H5Gcreate2(f, L->name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (g < 0) {
            errf(err, errlen, "%s: cannot create group /%s", path, L->name);
            goto close;
        }
        for (int v = 0; v < L->npv; v++) {
            const param_view *pv = &L->pv[v];
            hsize_t dims[2] = {(hsize_t)pv->shape[0], (hsize_t)(pv->ndim > 1 ? pv->shape[1] : 1)};
            hid_t sp = H5Screate_simple(pv->ndim, dims, NULL);
            hid_t d = sp < 0 ? -1 : H5Dcreate2(g, pv->name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
            herr_t w = d < 0 ? -1 : H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                          host + (L->p - m->params) + pv->offset);
            if (d >= 0) H5Dclose(d);
            if (sp >= 0) H5Sclose(sp);
            if (w < 0) {
                errf(err, errlen, "%s: cannot write /%s/%s (disk full?)", path, L->name, pv->name);
                H5Gclose(g);
                goto close;
            }
        }
        H5Gclose(g);
    }
    rc = 0;
close:
    if (H5Fclose(f) < 0 && rc == 0) {
        errf(err, errlen, "%s: cannot finish writing (disk full?)", path);
        rc = WEIGHTS_EIO;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        errf(err, errlen, "%s: cannot rename the finished file into place (%s)", path, strerror(errno));
        rc = WEIGHTS_EIO;
    }
    if (rc != 0)
        unlink(tmp);
out:
    free(host);
    free(tmp);
    H5Eset_auto2(H5E_DEFAULT, ef, ed);
    return rc;
}

struct visit {
    const model *m;
    int extra;
    char name[300];
};

/* Find any dataset in the file that the model does not have. */
static herr_t find_extra(hid_t obj, const char *name, const H5O_info_t *info, void *op)
{
    (void)obj;
    struct visit *v = op;
    if (info->type != H5O_TYPE_DATASET)
        return 0;
    char buf[300];
    snprintf(buf, sizeof buf, "%s", name);
    char *slash = strchr(buf, '/');
    if (slash) {
        *slash = 0;
        int li = model_find_layer(v->m, buf);
        if (li >= 0) {
            const layer *L = &v->m->layers[li];
            for (int k = 0; k < L->npv; k++)
                if (strcmp(L->pv[k].name, slash + 1) == 0)
                    return 0;
        }
    }
    v->extra = 1;
    snprintf(v->name, sizeof v->name, "/%s", name);
    return 1;
}

/* Read parameter /LAYER/PARAM of the file into dst: its shape and a floating-point type are
 * checked, and it must be a dataset stored in the file (no link to elsewhere followed, no
 * external storage). 0, or WEIGHTS_EBADINPUT / WEIGHTS_EIO with a message. */
static int read_param(hid_t f, const char *path, const char *lname, const param_view *pv,
                      float *dst, char *err, size_t errlen)
{
    char name[300], shp[64];
    snprintf(name, sizeof name, "/%s/%s", lname, pv->name);
    char why[96];
    hid_t lapl = h5safe_lapl();
    if (lapl < 0)
        return errf(err, errlen, "%s: HDF5 property list failed", path), WEIGHTS_EIO;
    hid_t d = h5safe_open_dataset(f, name, lapl, why, sizeof why);
    H5Pclose(lapl);
    if (d == H5SAFE_MISSING)
        return errf(err, errlen, "%s: missing %s (expected float32 %s)", path, name,
                    shape_text(pv, shp, sizeof shp)), WEIGHTS_EBADINPUT;
    if (d < 0)
        return errf(err, errlen, "%s: %s %s: not a dataset stored in this file (expected float32 "
                    "%s; refused: a weights file may not refer to other files)", path, name, why,
                    shape_text(pv, shp, sizeof shp)), WEIGHTS_EBADINPUT;
    hid_t sp = H5Dget_space(d), ty = H5Dget_type(d);
    hsize_t dims[2] = {0, 0};
    int nd = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
    if (nd >= 1 && nd <= 2) H5Sget_simple_extent_dims(sp, dims, NULL);
    int shape_ok = nd == pv->ndim && dims[0] == (hsize_t)pv->shape[0] &&
                   (pv->ndim < 2 || dims[1] == (hsize_t)pv->shape[1]);
    int type_ok = ty >= 0 && H5Tget_class(ty) == H5T_FLOAT;
    herr_t r = -1;
    if (shape_ok && type_ok)
        r = H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst);
    if (ty >= 0) H5Tclose(ty);
    if (sp >= 0) H5Sclose(sp);
    H5Dclose(d);
    if (!type_ok)
        return errf(err, errlen, "%s: %s must be floating point", path, name), WEIGHTS_EBADINPUT;
    if (!shape_ok)
        return errf(err, errlen, "%s: %s has the wrong shape: expected %s%s", path, name,
                    shape_text(pv, shp, sizeof shp), pv->ndim == 2 ? " (PyTorch order: [out, in])" : ""),
               WEIGHTS_EBADINPUT;
    if (r < 0)
        return errf(err, errlen, "%s: reading %s failed", path, name), WEIGHTS_EIO;
    return 0;
}

/* weights_load after the checks: in the probe's child process first (commit 0: the file is read
 * but the model, which may live on a device the child must not touch, is left alone), then for
 * real (commit 1) */
static int load_checked(model *m, const char *path, int commit, char *err, size_t errlen)
{
    H5E_auto2_t ef;
    void *ed;
    quiet_hdf5(&ef, &ed);
    int rc = WEIGHTS_EBADINPUT;
    float *buf = NULL;
    hid_t f = -1;
    if (path_too_long(path, err, errlen))
        goto out;
    if (H5Fis_hdf5(path) <= 0) {
        errf(err, errlen, "%s: not an HDF5 file (expected one float32 dataset per parameter, /<layer>/<param>)", path);
        goto out;
    }
    f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        char d[256];
        int io = h5safe_open_failed_io(d, sizeof d);
        errf(err, errlen, "%s: %s (%s)", path, io ? "cannot read it" : "corrupt or truncated HDF5 file", d);
        rc = io ? WEIGHTS_EIO : WEIGHTS_EBADINPUT;
        goto out;
    }
    /* read everything into a copy first: nothing changes unless all of it fits */
    buf = malloc(m->nparams * sizeof *buf);
    if (!buf) {
        errf(err, errlen, "%s: out of memory", path);
        rc = WEIGHTS_EIO;
        goto out;
    }
    for (int i = 0; i < m->nlayers; i++) {
        const layer *L = &m->layers[i];
        size_t base = (size_t)(L->p - m->params);
        for (int k = 0; k < L->npv; k++)
            if ((rc = read_param(f, path, L->name, &L->pv[k], buf + base + L->pv[k].offset, err,
                                 errlen)))
                goto out;
    }
    rc = WEIGHTS_EBADINPUT;
    struct visit v = {m, 0, ""};
    if (H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_NATIVE, find_extra, &v, H5O_INFO_BASIC) < 0 && !v.extra) {
        errf(err, errlen, "%s: cannot list its contents", path);
        rc = WEIGHTS_EIO;
        goto out;
    }
    if (v.extra) {
        errf(err, errlen, "%s: %s is not a parameter of this model", path, v.name);
        goto out;
    }
    if (commit) {
        m->bk->to_device(m->bk, m->params, buf, m->nparams * sizeof *buf);
        model_hold_params(m);
    }
    rc = 0;
out:
    free(buf);
    if (f >= 0) H5Fclose(f);
    H5Eset_auto2(H5E_DEFAULT, ef, ed);
    return rc;
}

struct load_probe {
    model *m;
    const char *path;
};

/* The whole load in the probe's child process (its copy of the model); result and message go
 * back. */
static int probe_load(void *arg, char *msg, size_t msglen)
{
    const struct load_probe *p = arg;
    return load_checked(p->m, p->path, 0, msg, msglen);
}

int weights_load(model *m, const char *path, char *err, size_t errlen)
{
    if (access(path, R_OK) != 0) {
        errf(err, errlen, "%s: cannot open (%s)", path, strerror(errno));
        return WEIGHTS_EBADINPUT;
    }
    /* HDF5 reads the file first in a child process (trace/h5safe.h), then here */
    struct load_probe p = {m, path};
    int rc = h5safe_probe(probe_load, &p, path, err, errlen);
    if (rc == H5SAFE_PROBE_FAILED)
        return WEIGHTS_EBADINPUT;
    return rc ? rc : load_checked(m, path, 1, err, errlen);
}
