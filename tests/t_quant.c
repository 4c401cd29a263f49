/*
 * t_quant.c - the block-scaled what-if (ampdiag_quant_whatif), C only: known answers worked out
 * by hand for every scheme (MX under both scale rules, NVFP4, FP8 blockwise, current scaling),
 * the special blocks (NaN, inf, zero, E8M0 and E4M3-scale underflow), directions and their
 * disagreement, ragged blocks and 1-D tails, the refusals, the --whatif list syntax; and the
 * element rounding of every format against the format table's own rounding over a sweep of
 * float32 values (tests/t_quant_oracle.sh compares everything with an independent Python
 * implementation).
 */
#include "ampdiag.h"
#include "tap.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static ampdiag_qspec spec(ampdiag_format e, ampdiag_qscheme s, ampdiag_qrule r, ampdiag_qdir d, int b)
{
    ampdiag_qspec q = {e, s, r, d, b, 0};
    return q;
}

static ampdiag_qstats one(const float *x, size_t n, size_t rows, size_t cols, ampdiag_qspec s)
{
    ampdiag_qstats q;
    memset(&q, 0xee, sizeof q);
    if (ampdiag_quant_whatif(x, n, rows, cols, -1.0f, 1, &s, &q) != 0)
        memset(&q, 0, sizeof q);
    return q;
}

/* MX, OCP rule: the scale 2^(floor(log2 amax) - emax). */
static void test_mx_floor(void)
{
    float x[32];
    for (int i = 0; i < 32; i++) x[i] = 1.0f;
    x[0] = 448.0f; /* floor(log2 448) = 8 = emax(E4M3): E = 0, the values as they are */
    x[1] = 3.0f * 0x1p-10f; /* 1.5 min subnormals (2^-9): ties to even 2 -> 2^-8 */
    x[2] = 0x1p-10f;        /* half the smallest subnormal: ties to 0 */
    x[3] = 0x1p-9f;         /* the smallest subnormal */
    x[4] = -0.0f;
    x[5] = 17.0f;           /* binade [16, 32) steps of 2: tie between 16 and 18 -> 16 (even) */
    ampdiag_qstats q = one(x, 32, 0, 0, spec(AMPDIAG_E4M3, AMPDIAG_QS_MX, AMPDIAG_QR_FLOOR, AMPDIAG_QD_ROWWISE, 0));
    double sig = 0;
    for (int i = 0; i < 32; i++) sig += (double)x[i] * x[i];
    double err = 0x1p-20 + 0x1p-20 + 1.0; /* (3 2^-10 - 2^-8)^2, (2^-10)^2, (17 - 16)^2 */
    ok(q.computed && q.blocks == 1 && q.scale_emin == 0 && q.scale_emax == 0 && q.scale_hist[0] == 1 &&
       q.flushed == 1 && q.subnormal == 2 && q.saturated == 0 && q.sig_sq == sig && q.err_sq == err &&
       q.max_rel_err == 1.0 && q.spec.block == 32,
       "mxfp8 floor: amax 448 gives the scale 2^0; 2^-10 flushes (tie to 0), 1.5 2^-9 and 2^-9 are subnormal, "
       "17 rounds to 16; err_sq and max_rel_err exact");
    x[0] = 500.0f; /* floor(log2 500) = 8: E = 0 still, and 500 saturates to 448 */
    q = one(x, 32, 0, 0, spec(AMPDIAG_E4M3, AMPDIAG_QS_MX, AMPDIAG_QR_FLOOR, AMPDIAG_QD_ROWWISE, 0));
    ok(q.saturated == 1 && q.scale_emax == 0 && q.flushed == 1,
       "mxfp8 floor: amax 500 keeps E = 0 and saturates to 448 (the OCP rule's lost binade)");
    /* NVIDIA's rule: 500 x fl(1/448) = 1.116 rounds up to 2: E = 1, 500 / 2 = 250 -> 256, no saturation */
    q = one(x, 32, 0, 0, spec(AMPDIAG_E4M3, AMPDIAG_QS_MX, AMPDIAG_QR_RCEIL, AMPDIAG_QD_ROWWISE, 0));
    ok(q.saturated == 0 && q.scale_emax == 1 && q.flushed == 2,
       "mxfp8 rceil: amax 500 gives E = 1 (amax / 448 rounded up), no saturation, one more value flushes (2^-9 / 2)");
    /* E2M1 (max 6, emax 2): amax 7 -> floor(log2 7) - 2 = 0; 7 saturates */
    float y[4] = {7.0f, 5.0f, 0.25f, 0.3f};
    q = one(y, 4, 0, 0, spec(AMPDIAG_E2M1, AMPDIAG_QS_MX, AMPDIAG_QR_FLOOR, AMPDIAG_QD_ROWWISE, 0));
    double e03 = (double)0.3f - 0.5;
    ok(q.saturated == 1 && q.flushed == 1 && q.subnormal == 1 && q.err_sq == 1.0 + 1.0 + 0.0625 + e03 * e03 &&
       q.blocks == 1,
       "mxfp4 floor: 7 saturates to 6, 5 ties to 4, 0.25 ties to 0, 0.3 -> 0.5 (subnormal); a ragged block of 4");
}

/* The special blocks of MX: NaN or inf -> a NaN scale; zero; E8M0's bottom. */
static void test_mx_specials(void)
{
    float x[96];
    for (int i = 0; i < 96; i++) x[i] = 1.0f;
    x[3] = NAN;            /* block 0: NaN scale, its 31 finite values poisoned */
    x[40] = INFINITY;      /* block 1: the same */
    for (int i = 64; i < 96; i++) x[i] = 0.0f; /* block 2: all zero */
    ampdiag_qstats q = one(x, 96, 0, 0, spec(AMPDIAG_E4M3, AMPDIAG_QS_MX, AMPDIAG_QR_FLOOR, AMPDIAG_QD_ROWWISE, 0));
    ok(q.nonfinite == 2 && q.poisoned == 62 && q.nonfinite_blocks == 2 && q.zero_blocks == 1 && q.sig_sq == 0 &&
       q.err_sq == 0 && q.blocks == 3 && q.scale_hist[0] == 0,
       "mx: a NaN or an inf makes the block's scale NaN (62 finite values poisoned, out of the sums); a zero block");
    for (int i = 0; i < 32; i++) x[i] = 1e-43f; /* amax 1e-43: floor(log2) - 8 < -127: clamped to 2^-127 */
    q = one(x, 32, 0, 0, spec(AMPDIAG_E4M3, AMPDIAG_QS_MX, AMPDIAG_QR_FLOOR, AMPDIAG_QD_ROWWISE, 0));
    ok(q.scale_underflow == 1 && q.scale_emin == -127 && q.flushed == 32,
       "mx: a block of 1e-43 needs a scale below 2^-127: E8M0 clamps it and every value flushes");
    q = one(x, 32, 0, 0, spec(AMPDIAG_E4M3, AMPDIAG_QS_MX, AMPDIAG_QR_RCEIL, AMPDIAG_QD_ROWWISE, 0));
    ok(q.scale_underflow == 1 && q.scale_emin == -127, "mx rceil: the same block underflows E8M0 too");
}

static void test_nvfp4(void)
{
    /* tensor amax 2688 = 448 x 6: S_enc = 1; a block of amax 6 has the scale 1 */
    float x[32] = {2688.0f};
    for (int i = 1; i < 16; i++) x[i] = 1.0f;
    float b[16] = {6.0f, 3.0f, 1.5f, 0.5f, 0.25f, 5.0f, -6.0f, 0.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    memcpy(x + 16, b, sizeof b);
    ampdiag_qstats q = one(x, 32, 0, 0, spec(AMPDIAG_E2M1, AMPDIAG_QS_NVFP4, AMPDIAG_QR_E4M3, AMPDIAG_QD_ROWWISE, 0));
    /* block 0: amax 2688: 2688 / 6 x 1 = 448: the E4M3 scale 448; its 1s are 1/448 -> 0 (flushed) */
    ok(q.scale == 1.0f && q.blocks == 2 && q.scale_emax == 8 && q.scale_emin == 0 && q.flushed == 15 + 1 &&
       q.saturated == 0 && q.err_sq == 15.0 + 0.0625 + 1.0 && q.subnormal == 1,
       "nvfp4: S_enc = 2688 / amax; block scales 448 (2^8) and 1 (2^0); 1 / 448 flushes, 0.25 ties to 0, 5 -> 4");
    /* a block far below the tensor's amax: its E4M3 scale is subnormal, then zero */
    float y[48];
    y[0] = 2688.0f;
    for (int i = 1; i < 16; i++) y[i] = 0.0f;
    for (int i = 16; i < 32; i++) y[i] = 6.0f * 0x1p-8f; /* scale 2^-8: an E4M3 subnormal */
    for (int i = 32; i < 48; i++) y[i] = 1e-6f;          /* scale 1.7e-7: below 2^-10, rounds to 0 */
    q = one(y, 48, 0, 0, spec(AMPDIAG_E2M1, AMPDIAG_QS_NVFP4, AMPDIAG_QR_E4M3, AMPDIAG_QD_ROWWISE, 0));
    double e16 = 0;
    for (int i = 0; i < 16; i++) e16 += (double)1e-6f * (double)1e-6f;
    ok(q.scale_subnormal == 1 && q.scale_underflow == 1 && q.flushed == 16 && q.err_sq == e16,
       "nvfp4: a block scale of 2^-8 is an E4M3 subnormal; one of 1.7e-7 rounds to 0 and the block flushes");
}

static void test_blockwise_current(void)
{
    float x[130];
    for (int i = 0; i < 130; i++) x[i] = 1.0f;
    x[0] = 1000.0f; /* 448 / 1000 = 0.448 -> pow2 0.25: values x 0.25, decoded x 4 */
    x[1] = 0x1p-12f; /* 2^-14 after scaling: below 2^-10, flushes */
    x[2] = 0x1p-10f; /* 2^-12 after scaling: tie below the smallest subnormal 2^-9? 2^-12 < 2^-10: flushes */
    x[3] = 3.0f;
    ampdiag_qstats q = one(x, 128, 0, 0, spec(AMPDIAG_E4M3, AMPDIAG_QS_BLOCKWISE, AMPDIAG_QR_POW2, AMPDIAG_QD_ROWWISE, 0));
    ok(q.blocks == 1 && q.scale_emax == 2 && q.flushed == 2 && q.saturated == 0 &&
       q.err_sq == 576.0 + 0x1p-24 + 0x1p-20 && q.spec.block == 128,
       "fp8-block pow2: amax 1000 gives 0.448 rounded down to 2^-2 (decode 2^2); 1000 -> 250 -> 256 (1024); "
       "2^-12 and 2^-10 flush");
    q = one(x, 128, 0, 0, spec(AMPDIAG_E4M3, AMPDIAG_QS_BLOCKWISE, AMPDIAG_QR_FP32, AMPDIAG_QD_ROWWISE, 0));
    ok(q.blocks == 1 && q.scale_emax == 1 && q.flushed == 2, "fp8-block fp32: the scale 0.448 itself (decode 2.23)");
    q = one(x, 130, 0, 0, spec(AMPDIAG_E4M3, AMPDIAG_QS_BLOCKWISE, AMPDIAG_QR_POW2, AMPDIAG_QD_ROWWISE, 0));
    ok(q.blocks == 2 && q.count == 130, "fp8-block: 130 values are a block of 128 and a ragged one of 2");
    float t[4] = {1.0f, 2.0f, 3.5f, -0.5f};
    q = one(t, 4, 0, 0, spec(AMPDIAG_E4M3, AMPDIAG_QS_CURRENT, AMPDIAG_QR_FP32, AMPDIAG_QD_TENSOR, 0));
    ok(q.scale == 128.0f && q.err_sq == 0 && q.blocks == 1 && q.saturated == 0 && q.scale_emax == -7,
       "fp8-current: amax 3.5 gives the scale 448 / 3.5 = 128 (decode 2^-7); 1, 2, 3.5, -0.5 are exact");
    float t4[2] = {4.0f, 3.0f};
    q = one(t4, 2, 0, 0, spec(AMPDIAG_E4M3, AMPDIAG_QS_CURRENT, AMPDIAG_QR_FP32, AMPDIAG_QD_TENSOR, 0));
    double e3 = 3.0 - 320.0 * (double)(1.0f / 112.0f); /* 3 x 112 = 336 ties to 320 */
    ok(q.scale == 112.0f && q.err_sq == (4.0 - 448.0 * (double)(1.0f / 112.0f)) * (4.0 - 448.0 * (double)(1.0f / 112.0f)) +
       e3 * e3, "fp8-current: amax 4, scale 112 decoded with fl(1/112): 4 is not exact; 336 ties to 320");
    q = one(t, 4, 0, 0, spec(AMPDIAG_E5M2, AMPDIAG_QS_CURRENT, AMPDIAG_QR_POW2, AMPDIAG_QD_TENSOR, 0));
    ok(q.scale == 16384.0f && q.err_sq == 0, "fp8-current e5m2 pow2: 57344 / 3.5 = 16384");
    float tiny[3] = {1e-38f, 0.0f, -1e-38f};
    q = one(tiny, 3, 0, 0, spec(AMPDIAG_E4M3, AMPDIAG_QS_CURRENT, AMPDIAG_QR_FP32, AMPDIAG_QD_TENSOR, 0));
    ok(q.scale == FLT_MAX && q.scale_clamped == 1, "fp8-current: 448 / 1e-38 overflows float32: FLT_MAX, clamped");
}

/* Directions: a 32 x 32 matrix of ones with a first row of 2^20. */
static void test_directions(void)
{
    static float m[32 * 32 + 5];
    for (int i = 0; i < 32 * 32 + 5; i++) m[i] = 1.0f;
    for (int j = 0; j < 32; j++) m[j] = 0x1p20f;
    ampdiag_qspec s[3] = {spec(AMPDIAG_E4M3, AMPDIAG_QS_MX, AMPDIAG_QR_FLOOR, AMPDIAG_QD_ROWWISE, 0),
                          spec(AMPDIAG_E4M3, AMPDIAG_QS_MX, AMPDIAG_QR_FLOOR, AMPDIAG_QD_COLWISE, 0),
                          spec(AMPDIAG_E2M1, AMPDIAG_QS_NVFP4, AMPDIAG_QR_E4M3, AMPDIAG_QD_TILE, 0)};
    ampdiag_qstats q[3];
    int rc = ampdiag_quant_whatif(m, 32 * 32, 32, 32, -1.0f, 3, s, q);
    /* rowwise: each row its own scale, exact. columnwise: a column's scale is 2^(20-8): 1 -> 2^-12 flushes */
    ok(rc == 0 && q[0].err_sq == 0 && q[0].blocks == 32 && q[1].blocks == 32 && q[1].flushed == 31 * 32 &&
       q[1].disagree == 31 * 32 && q[1].disagree_sq == 31 * 32 && q[0].disagree == 0 && q[1].err_sq == 31 * 32,
       "rowwise keeps a row of 2^20 apart; columnwise mixes it into every column: 992 ones flush and disagree");
    /* nvfp4: 2^20 is beyond E4M3's range of block scales: the blocks of ones need a scale of
     * 448 / 2^20, below E4M3's smallest subnormal, and flush whatever the blocking */
    ok(q[2].blocks == 4 && q[2].spec.block == 16 && q[2].flushed == 31 * 32 && q[2].scale_underflow == 2 &&
       q[2].disagree == 0,
       "nvfp4 2-D: 16x16 tiles; with a 2^20 outlier row the tiles of ones need a block scale below E4M3's range");
    static float m2[32 * 32];
    for (int i = 0; i < 32 * 32; i++) m2[i] = 1.0f;
    for (int j = 0; j < 32; j++) m2[j] = 64.0f;
    rc = ampdiag_quant_whatif(m2, 32 * 32, 32, 32, -1.0f, 3, s, q);
    ok(rc == 0 && q[2].blocks == 4 && q[2].flushed == 15 * 32 && q[2].disagree == 15 * 32 && q[2].scale_underflow == 0 &&
       q[2].scale_emax == 8 && q[2].scale_emin == 2,
       "nvfp4 2-D with a row of 64: the tiles holding it (block scale 448) flush their 480 ones, which the rowwise "
       "blocks keep (block scale 7): 480 disagree");
    rc = ampdiag_quant_whatif(m, 32 * 32 + 5, 32, 32, -1.0f, 3, s, q);
    ok(rc == 0 && q[0].blocks == 33 && q[1].blocks == 33 && q[2].blocks == 5 && q[1].count == 1029,
       "a 1-D tail after the matrix (a bias) is one more block in every direction");
    rc = ampdiag_quant_whatif(m, 32 * 32, 0, 0, -1.0f, 3, s, q);
    ok(rc == 0 && q[0].computed && !q[1].computed && !q[2].computed && q[0].blocks == 32,
       "a 1-D tensor: rowwise blocks; columnwise and 2-D not applicable (computed 0)");
}

static void test_refusals(void)
{
    float x[4] = {1, 2, 3, 4};
    ampdiag_qstats q;
    char err[160];
    ampdiag_qspec bad[] = {spec(AMPDIAG_E4M3, AMPDIAG_QS_MX, AMPDIAG_QR_FLOOR, AMPDIAG_QD_TILE, 0),
                           spec(AMPDIAG_E4M3, AMPDIAG_QS_NVFP4, AMPDIAG_QR_E4M3, AMPDIAG_QD_ROWWISE, 0),
                           spec(AMPDIAG_FP16, AMPDIAG_QS_MX, AMPDIAG_QR_FLOOR, AMPDIAG_QD_ROWWISE, 0),
                           spec(AMPDIAG_E4M3, AMPDIAG_QS_MX, AMPDIAG_QR_POW2, AMPDIAG_QD_ROWWISE, 0),
                           spec(AMPDIAG_E4M3, AMPDIAG_QS_MX, AMPDIAG_QR_FLOOR, AMPDIAG_QD_ROWWISE, 48),
                           spec(AMPDIAG_E4M3, AMPDIAG_QS_CURRENT, AMPDIAG_QR_FP32, AMPDIAG_QD_ROWWISE, 0)};
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused += ampdiag_quant_whatif(x, 4, 0, 0, -1.0f, 1, &bad[i], &q) == -1 &&
                   ampdiag_qspec_check(&bad[i], err, sizeof err) == -1 && err[0];
    ok(refused == 6, "refused with a message: MX in 2-D tiles, NVFP4 on E4M3, FP16 elements, MX with pow2, a block "
       "of 48, current scaling rowwise");
    ampdiag_qspec s = spec(AMPDIAG_E4M3, AMPDIAG_QS_MX, AMPDIAG_QR_FLOOR, AMPDIAG_QD_ROWWISE, 0);
    ok(ampdiag_quant_whatif(x, 4, 3, 2, -1.0f, 1, &s, &q) == -1, "refused: a 3 x 2 matrix in 4 values");
    ok(ampdiag_quant_whatif(NULL, 0, 0, 0, -1.0f, 1, &s, &q) == 0 && q.computed && q.count == 0 && q.blocks == 0,
       "an empty tensor: nothing counted");
}

static void test_parse(void)
{
    ampdiag_qspec s[64];
    size_t n = 0;
    char err[200], name[64];
    ok(ampdiag_qspec_parse("mxfp8", s, 64, &n, err, sizeof err) == 0 && n == 2 && s[0].elem == AMPDIAG_E4M3 &&
       s[0].rule == AMPDIAG_QR_FLOOR && s[0].dir == AMPDIAG_QD_ROWWISE && s[1].dir == AMPDIAG_QD_COLWISE &&
       s[0].block == 32 && s[0].kinds == 0xfu,
       "mxfp8: E4M3, the OCP floor rule, rowwise and columnwise blocks of 32, for every kind but updates");
    ok(ampdiag_qspec_parse("nvfp4", s, 64, &n, err, sizeof err) == 0 && n == 3 && s[2].dir == AMPDIAG_QD_TILE &&
       s[2].kinds == 0x4u && s[2].block == 16,
       "nvfp4: rowwise, columnwise, and 16x16 tiles for weights only");
    ok(ampdiag_qspec_parse("fp8-current, fp8-block:fp32@row+col/32 ,mxfp8-e5m2:rceil@col", s, 64, &n, err, sizeof err) == 0 &&
       n == 5 && s[0].scheme == AMPDIAG_QS_CURRENT && s[1].elem == AMPDIAG_E5M2 && s[2].rule == AMPDIAG_QR_FP32 &&
       s[3].block == 32 && s[3].dir == AMPDIAG_QD_COLWISE && s[4].rule == AMPDIAG_QR_RCEIL,
       "a list: fp8-current (E4M3 and E5M2), fp8-block fp32 rowwise and columnwise of 32, mxfp8-e5m2 rceil columnwise");
    ok(ampdiag_qspec_parse("mxfp8,mxfp8@row", s, 64, &n, err, sizeof err) == 0 && n == 2, "a duplicate is kept once");
    ok(ampdiag_qspec_parse("none", s, 64, &n, err, sizeof err) == 0 && n == 0, "none: nothing");
    int rc0 = ampdiag_qspec_parse("default", s, 64, &n, err, sizeof err);
    ok(rc0 == 0 && n > 0, "default: %s (%zu schemes)", ampdiag_qspec_default(), n);
    rc0 = ampdiag_qspec_parse("all", s, 64, &n, err, sizeof err);
    ok(rc0 == 0 && n == 20, "all: every scheme (%zu)", n);
    static const char *const bad[] = {"mxfp9", "mxfp8@diag", "fp8-current@row", "mxfp8:pow2", "nvfp4:floor",
                                      "mxfp8@2d", "mxfp8@row/48", "mxfp8@row/", "mxfp8:", ":floor"};
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        int rc = ampdiag_qspec_parse(bad[i], s, 64, &n, err, sizeof err);
        refused += rc == -1 && n == 0 && strstr(err, bad[i]) != NULL;
        if (rc != -1) diag("accepted %s", bad[i]);
    }
    ok(refused == 10, "refused, naming the item: an unknown scheme, direction or rule, @ on current scaling, "
       "2-D MX, a block of 48, empty parts (%d of 10)", refused);
    ok(ampdiag_qspec_parse("all", s, 3, &n, err, sizeof err) == -1 && strstr(err, "more than 3"), "more than max: refused");
    ampdiag_qspec t = spec(AMPDIAG_E2M1, AMPDIAG_QS_NVFP4, AMPDIAG_QR_E4M3, AMPDIAG_QD_TILE, 4);
    ampdiag_qspec_name(&t, name, sizeof name);
    ok(strcmp(name, "nvfp4:e4m3@2d/4") == 0 && ampdiag_qspec_parse(name, s, 64, &n, err, sizeof err) == 0 && n == 1 &&
       s[0].block == 4 && s[0].dir == AMPDIAG_QD_TILE, "spec names parse back: %s", name);
    ok(strcmp(ampdiag_qscheme_name(AMPDIAG_QS_MX), "mx") == 0 && ampdiag_qrule_parse("rceil") == AMPDIAG_QR_RCEIL &&
       ampdiag_qdir_parse("columnwise") == AMPDIAG_QD_COLWISE && ampdiag_qdir_name(9) == NULL &&
       ampdiag_qscheme_parse("nope") == -1, "scheme, rule and direction names");
}

/* Element rounding inside a block of scale 1 against the format table's rounding (which
 * tests/t_numfmt.c checks against an oracle over every float32): a sweep of float32 values below
 * each format's largest value, in blocks led by that value; every decoded value
 * (ampdiag_quant_values) must be the table's rounding, with both kernels (AVX-512 and the
 * portable one), and the counts must agree. */
static int sweep_one(ampdiag_format fmt, float *x, double *v, size_t N, uint64_t *checked)
{
    const ampdiag_format_info *fi = ampdiag_format_get(fmt);
    int bad = 0;
    double err = 0, sig = 0;
    uint64_t flushed = 0, sub = 0;
    for (size_t i = 0; i < N; i++) {
        float r = ampdiag_round(fmt, x[i]);
        double e = (double)x[i] - (double)r;
        sig += (double)x[i] * x[i];
        err += e * e;
        flushed += x[i] != 0 && r == 0;
        sub += r != 0 && fabsf(r) < fi->min_normal;
    }
    ampdiag_qspec s = spec(fmt, AMPDIAG_QS_MX, AMPDIAG_QR_FLOOR, AMPDIAG_QD_ROWWISE, 0);
    ampdiag_qstats q;
    if (ampdiag_quant_values(x, N, 0, 0, -1.0f, &s, v, &q) != 0)
        return 1;
    for (size_t i = 0; i < N; i++)
        bad += v[i] != (double)ampdiag_round(fmt, x[i]) || !signbit(v[i]) != !signbit(ampdiag_round(fmt, x[i]));
    bad += fabs(q.err_sq - err) > 1e-12 * err || fabs(q.sig_sq - sig) > 1e-12 * sig || q.flushed != flushed ||
           q.subnormal != sub || q.saturated != 0 || q.scale_emax != 0 || q.scale_emin != 0;
    *checked += N;
    return bad;
}

static void test_elements_sweep(void)
{
    static const ampdiag_format fmts[5] = {AMPDIAG_E4M3, AMPDIAG_E5M2, AMPDIAG_E2M3, AMPDIAG_E3M2, AMPDIAG_E2M1};
    enum { N = 32 * 4096 };
    float *x = malloc(N * sizeof *x);
    double *v = malloc(N * sizeof *v);
    int bad = 0;
    uint64_t checked = 0;
    for (int f = 0; f < 5; f++) {
        const ampdiag_format_info *fi = ampdiag_format_get(fmts[f]);
        uint32_t u = 0x2e000000u + 977u * (uint32_t)f, top;
        memcpy(&top, &fi->max_finite, sizeof top);
        for (int pass = 0; pass < 4; pass++) {
            for (size_t i = 0; i < N; i++) {
                float val;
                if (i % 32 == 0) {
                    val = fi->max_finite; /* floor(log2 max) = emax: the scale is 2^0 */
                } else {
                    u += 3001u;
                    if (u >= top) u = 0x2e000000u + (u % 4096u);
                    memcpy(&val, &u, sizeof val);
                    if (i & 1) val = -val;
                }
                x[i] = val;
            }
            bad += sweep_one(fmts[f], x, v, N, &checked);
        }
    }
    ok(bad == 0, "every element format, %llu values in blocks of scale 1 (%s kernel): every decoded value is the "
       "format table's rounding, the counts and sums agree", (unsigned long long)checked, ampdiag_quant_impl());
    free(x);
    free(v);
}

int main(void)
{
    test_mx_floor();
    test_mx_specials();
    test_nvfp4();
    test_blockwise_current();
    test_directions();
    test_refusals();
    test_parse();
    test_elements_sweep();
    return done_testing();
}
