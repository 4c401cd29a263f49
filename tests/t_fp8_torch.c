/*
 * t_fp8_torch.c - ampdiag's FP8 conversions against PyTorch's float8_e4m3fn / float8_e5m2 casts
 * on a sample of float32 patterns written by tests/pytorch/fp8_casts.py (tests/t_fp8_torch.sh
 * runs both; the file format is described there).
 *
 * E5M2 must agree bit for bit. E4M3 must agree except where PyTorch saturates: it casts a
 * finite value beyond 464 and +-inf to +-448 (0x7e / 0xfe), where ampdiag follows OCP's
 * non-saturating conversion and gives NaN (docs/numerics.md, "FP8: E4M3 and E5M2"). The test
 * checks that this is the only difference, and that it holds for every such input.
 *
 * usage: t_fp8_torch FILE
 */
#include "ampdiag.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct casts {
    uint64_t n;
    float d4[256], d5[256];
    uint32_t *pat;
    uint8_t *e4, *e5;
};

static int read_casts(const char *path, struct casts *c)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("Bail out! %s: cannot open\n", path);
        return -1;
    }
    int rc = -1;
    if (fread(&c->n, sizeof c->n, 1, f) != 1 || c->n == 0 || c->n > ((uint64_t)1 << 32) ||
        fread(c->d4, sizeof c->d4, 1, f) != 1 || fread(c->d5, sizeof c->d5, 1, f) != 1) {
        printf("Bail out! %s: expected a count and two tables of 256 float32 decodes\n", path);
    } else if (!(c->pat = malloc(c->n * sizeof *c->pat)) || !(c->e4 = malloc(c->n)) || !(c->e5 = malloc(c->n))) {
        printf("Bail out! out of memory for %llu patterns\n", (unsigned long long)c->n);
    } else if (fread(c->pat, sizeof *c->pat, c->n, f) != c->n || fread(c->e4, 1, c->n, f) != c->n ||
               fread(c->e5, 1, c->n, f) != c->n) {
        printf("Bail out! %s: expected %llu patterns and their two codes\n", path, (unsigned long long)c->n);
    } else {
        rc = 0;
    }
    fclose(f);
    return rc;
}

static float fbits(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }

/* Whether x overflows E4M3 in OCP's sense (a finite value beyond 464, or +-inf). */
static int e4m3_overflows(float x)
{
    ampdiag_class k = ampdiag_classify(AMPDIAG_E4M3, x);
    return k == AMPDIAG_CLASS_OVERFLOW || k == AMPDIAG_CLASS_INF;
}

static void compare_encodes(const struct casts *c)
{
    uint64_t bad4 = 0, bad5 = 0, sat = 0, novf = 0;
    uint32_t first4 = 0, first5 = 0;
    for (uint64_t i = 0; i < c->n; i++) {
        float x = fbits(c->pat[i]);
        uint8_t sign = (c->pat[i] >> 24) & 0x80u;
        uint8_t ours = ampdiag_e4m3_encode(x);
        int ovf = e4m3_overflows(x);
        novf += ovf;
        if (ovf && ours == (0x7fu | sign) && c->e4[i] == (0x7eu | sign))
            sat++;
        else if (ours != c->e4[i] && !bad4++)
            first4 = c->pat[i];
        if (ampdiag_e5m2_encode(x) != c->e5[i] && !bad5++)
            first5 = c->pat[i];
    }
    ok(bad4 == 0, "e4m3: %llu float32 inputs agree with torch.float8_e4m3fn but for the overflows (%llu differ, first 0x%08x)",
       (unsigned long long)c->n, (unsigned long long)bad4, first4);
    ok(novf > 0 && sat == novf,
       "e4m3: torch saturates all %llu overflowing inputs (beyond 464, +-inf) to +-448 (0x7e/0xfe) where ampdiag "
       "(OCP non-saturating) gives NaN 0x7f/0xff (%llu did)", (unsigned long long)novf, (unsigned long long)sat);
    ok(bad5 == 0, "e5m2: all %llu inputs agree bit for bit with torch.float8_e5m2 (%llu differ, first 0x%08x)",
       (unsigned long long)c->n, (unsigned long long)bad5, first5);
}

static void compare_decodes(const struct casts *c)
{
    int bad = 0, nans = 0;
    for (int k = 0; k < 256; k++) {
        float ours[2] = {ampdiag_e4m3_decode((uint8_t)k), ampdiag_e5m2_decode((uint8_t)k)};
        const float theirs[2] = {c->d4[k], c->d5[k]};
        for (int j = 0; j < 2; j++) {
            nans += isnan(ours[j]) != 0;
            bad += !same_bits(ours[j], theirs[j]);
        }
    }
    ok(bad == 0, "decoding all 256 codes of both formats agrees bit for bit with torch, NaN payloads included (%d differ)",
       bad);
    ok(nans == 2 + 6, "NaN codes: 2 in e4m3 (S.1111.111), 6 in e5m2 (S.11111.01/10/11)");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: t_fp8_torch FILE (from tests/pytorch/fp8_casts.py)\n");
        return 2;
    }
    struct casts c = {0};
    if (read_casts(argv[1], &c) != 0) {
        free(c.pat);
        free(c.e4);
        free(c.e5);
        return 1;
    }
    compare_encodes(&c);
    compare_decodes(&c);
    free(c.pat);
    free(c.e4);
    free(c.e5);
    return done_testing();
}
