/*
 * numfmt.c - the exported number-format API (ampdiag.h) over the inline core in numfmt.h.
 */
#include "ampdiag.h"
#include "numfmt.h"

#include <math.h>
#include <strings.h>

const char *ampdiag_version(void) { return AMPDIAG_VERSION_STRING; }

static const ampdiag_format_info format_table[AMPDIAG_NFORMATS] = {
    [AMPDIAG_FP32] = {"fp32", 32, 8, 23, 127, -126, 127, 3.40282347e38f, 0x1p-126f, 0x1p-149f,
                      0x1p-23f, 0x1p-24f, INFINITY, 0.0f},
    [AMPDIAG_FP16] = {"fp16", 16, 5, 10, 15, -14, 15, 65504.0f, 0x1p-14f, 0x1p-24f,
                      0x1p-10f, 0x1p-11f, 65520.0f, 0x1p-25f},
    [AMPDIAG_BF16] = {"bf16", 16, 8, 7, 127, -126, 127, 0x1.fep127f, 0x1p-126f, 0x1p-133f,
                      0x1p-7f, 0x1p-8f, 0x1.ffp127f, 0x1p-134f},
};

const ampdiag_format_info *ampdiag_format_get(ampdiag_format fmt)
{
    if ((int)fmt < 0 || fmt >= AMPDIAG_NFORMATS)
        return NULL;
    return &format_table[fmt];
}

int ampdiag_format_parse(const char *name, ampdiag_format *fmt)
{
    if (!name)
        return -1;
    for (int i = 0; i < AMPDIAG_NFORMATS; i++)
        if (strcasecmp(name, format_table[i].name) == 0) {
            *fmt = (ampdiag_format)i;
            return 0;
        }
    return -1;
}

float ampdiag_round(ampdiag_format fmt, float x)
{
    switch (fmt) {
    case AMPDIAG_FP32: return x;
    case AMPDIAG_FP16: return ampdiag_fp16_rne(x);
    case AMPDIAG_BF16: return ampdiag_bf16_rne(x);
    default: return NAN;
    }
}

static float fp32_ftz(float x)
{
    uint32_t u = ampdiag_f32_bits(x);
    return (u & 0x7fffffffu) < AMPDIAG_F32_MIN_NORMAL ? ampdiag_f32_from_bits(u & 0x80000000u) : x;
}

float ampdiag_round_ftz(ampdiag_format fmt, float x)
{
    switch (fmt) {
    case AMPDIAG_FP32: return fp32_ftz(x);
    case AMPDIAG_FP16: return ampdiag_fp16_rne_ftz(x);
    case AMPDIAG_BF16: return ampdiag_bf16_rne_ftz(x);
    default: return NAN;
    }
}

int ampdiag_round_array(ampdiag_format fmt, unsigned flags, const float *in, float *out, size_t n)
{
    int ftz = (flags & AMPDIAG_ROUND_FTZ) != 0;
    switch (fmt) {
    case AMPDIAG_FP32:
        if (ftz)
            for (size_t i = 0; i < n; i++) out[i] = fp32_ftz(in[i]);
        else if (in != out)
            memmove(out, in, n * sizeof *out);
        return 0;
    case AMPDIAG_FP16:
        if (ftz)
            for (size_t i = 0; i < n; i++) out[i] = ampdiag_fp16_rne_ftz(in[i]);
        else
            for (size_t i = 0; i < n; i++) out[i] = ampdiag_fp16_rne(in[i]);
        return 0;
    case AMPDIAG_BF16:
        if (ftz)
            for (size_t i = 0; i < n; i++) out[i] = ampdiag_bf16_rne_ftz(in[i]);
        else
            for (size_t i = 0; i < n; i++) out[i] = ampdiag_bf16_rne(in[i]);
        return 0;
    default:
        return -1;
    }
}

uint16_t ampdiag_fp16_encode(float x) { return ampdiag_fp16_bits_rne(x); }
float ampdiag_fp16_decode(uint16_t h) { return ampdiag_fp16_bits_to_f32(h); }
uint16_t ampdiag_bf16_encode(float x) { return ampdiag_bf16_bits_rne(x); }
float ampdiag_bf16_decode(uint16_t b) { return ampdiag_bf16_bits_to_f32(b); }
