/*
 * tstats_kernel.h - body of the fused single-pass statistics kernel.
 *
 * Included by tstats.c once per instruction set (TSTATS_KERNEL names the function and
 * TSTATS_TARGET gives its target attribute). The data is read once: each block of
 * TSTATS_BLOCK values is classified in TSTATS_LANES independent lanes (integer compares on the
 * bit pattern, so the compiler turns them into SIMD), and while the block is still in L1 the
 * exponent histogram is counted from it. Per-block counters are 32-bit and are added to the
 * 64-bit record at the end of each block; sums are kept in double per lane.
 */
TSTATS_TARGET
static void TSTATS_KERNEL(ampdiag_tstats *s, ampdiag_hist *h, const float *x, size_t n)
{
    while (n > 0) {
        size_t nb = n < TSTATS_BLOCK ? n : TSTATS_BLOCK;
        size_t nv = nb - nb % TSTATS_LANES;

        uint32_t c_nan[TSTATS_LANES] = {0}, c_pinf[TSTATS_LANES] = {0}, c_ninf[TSTATS_LANES] = {0};
        uint32_t c_zero[TSTATS_LANES] = {0}, c_neg[TSTATS_LANES] = {0};
        uint32_t c_h_ovf[TSTATS_LANES] = {0}, c_h_unf[TSTATS_LANES] = {0}, c_h_sub[TSTATS_LANES] = {0};
        uint32_t c_b_ovf[TSTATS_LANES] = {0}, c_b_unf[TSTATS_LANES] = {0}, c_b_sub[TSTATS_LANES] = {0};
        int32_t k_min[TSTATS_LANES], k_max[TSTATS_LANES];
        uint32_t a_max[TSTATS_LANES], a_min[TSTATS_LANES];
        double d_sum[TSTATS_LANES] = {0}, d_sq[TSTATS_LANES] = {0};
        for (int l = 0; l < TSTATS_LANES; l++) {
            k_min[l] = INT32_MAX;
            k_max[l] = INT32_MIN;
            a_max[l] = 0;
            a_min[l] = UINT32_MAX;
        }

        for (size_t i = 0; i < nv; i += TSTATS_LANES) {
            for (int l = 0; l < TSTATS_LANES; l++) {
                uint32_t u = load_bits(x, i + l);
                float v;
                memcpy(&v, &u, sizeof v);
                uint32_t a = u & 0x7fffffffu;
                uint32_t fin = a < AMPDIAG_F32_INF;
                uint32_t nz = a != 0;
                /* float32 bits as a signed key that orders like the values */
                int32_t key = (int32_t)(u ^ ((uint32_t)((int32_t)u >> 31) & 0x7fffffffu));
                int32_t kmin = fin ? key : INT32_MAX;
                int32_t kmax = fin ? key : INT32_MIN;
                k_min[l] = kmin < k_min[l] ? kmin : k_min[l];
                k_max[l] = kmax > k_max[l] ? kmax : k_max[l];
                uint32_t amx = fin ? a : 0u;
                uint32_t amn = (fin & nz) ? a : UINT32_MAX;
                a_max[l] = amx > a_max[l] ? amx : a_max[l];
                a_min[l] = amn < a_min[l] ? amn : a_min[l];
                c_nan[l] += a > AMPDIAG_F32_INF;
                c_pinf[l] += u == 0x7f800000u;
                c_ninf[l] += u == 0xff800000u;
                c_zero[l] += a == 0;
                c_neg[l] += fin & nz & (u >> 31);
                c_h_ovf[l] += fin & (a >= AMPDIAG_FP16_OVF_BITS);
                c_h_unf[l] += nz & (a <= AMPDIAG_FP16_UNF_BITS);
                c_h_sub[l] += (a > AMPDIAG_FP16_UNF_BITS) & (a < AMPDIAG_FP16_NORM_BITS);
                c_b_ovf[l] += fin & (a >= AMPDIAG_BF16_OVF_BITS);
                c_b_unf[l] += nz & (a <= AMPDIAG_BF16_UNF_BITS);
                c_b_sub[l] += (a > AMPDIAG_BF16_UNF_BITS) & (a < AMPDIAG_BF16_NORM_BITS);
                double dv = fin ? (double)v : 0.0;
                d_sum[l] += dv;
                d_sq[l] += dv * dv;
            }
        }

        uint64_t t_nan = 0, t_pinf = 0, t_ninf = 0, t_zero = 0, t_neg = 0;
        uint64_t t_hovf = 0, t_hunf = 0, t_hsub = 0, t_bovf = 0, t_bunf = 0, t_bsub = 0;
        int32_t kmin = INT32_MAX, kmax = INT32_MIN;
        uint32_t amax = 0, amin = UINT32_MAX;
        double sum = 0, sq = 0;
        for (int l = 0; l < TSTATS_LANES; l++) {
            t_nan += c_nan[l]; t_pinf += c_pinf[l]; t_ninf += c_ninf[l];
            t_zero += c_zero[l]; t_neg += c_neg[l];
            t_hovf += c_h_ovf[l]; t_hunf += c_h_unf[l]; t_hsub += c_h_sub[l];
            t_bovf += c_b_ovf[l]; t_bunf += c_b_unf[l]; t_bsub += c_b_sub[l];
            kmin = k_min[l] < kmin ? k_min[l] : kmin;
            kmax = k_max[l] > kmax ? k_max[l] : kmax;
            amax = a_max[l] > amax ? a_max[l] : amax;
            amin = a_min[l] < amin ? a_min[l] : amin;
            sum += d_sum[l];
            sq += d_sq[l];
        }
        /* the tail of the block, one value at a time */
        for (size_t i = nv; i < nb; i++) {
            uint32_t u = load_bits(x, i);
            float v;
            memcpy(&v, &u, sizeof v);
            uint32_t a = u & 0x7fffffffu;
            uint32_t fin = a < AMPDIAG_F32_INF, nz = a != 0;
            int32_t key = (int32_t)(u ^ ((uint32_t)((int32_t)u >> 31) & 0x7fffffffu));
            if (fin) {
                kmin = key < kmin ? key : kmin;
                kmax = key > kmax ? key : kmax;
                amax = a > amax ? a : amax;
                if (nz && a < amin)
                    amin = a;
                sum += (double)v;
                sq += (double)v * (double)v;
            }
            t_nan += a > AMPDIAG_F32_INF;
            t_pinf += u == 0x7f800000u;
            t_ninf += u == 0xff800000u;
            t_zero += a == 0;
            t_neg += fin & nz & (u >> 31);
            t_hovf += fin & (a >= AMPDIAG_FP16_OVF_BITS);
            t_hunf += nz & (a <= AMPDIAG_FP16_UNF_BITS);
            t_hsub += (a > AMPDIAG_FP16_UNF_BITS) & (a < AMPDIAG_FP16_NORM_BITS);
            t_bovf += fin & (a >= AMPDIAG_BF16_OVF_BITS);
            t_bunf += nz & (a <= AMPDIAG_BF16_UNF_BITS);
            t_bsub += (a > AMPDIAG_BF16_UNF_BITS) & (a < AMPDIAG_BF16_NORM_BITS);
        }

        uint64_t nonfinite = t_nan + t_pinf + t_ninf;
        s->count += nb;
        s->n_nan += t_nan;
        s->n_posinf += t_pinf;
        s->n_neginf += t_ninf;
        s->n_zero += t_zero;
        s->n_neg += t_neg;
        s->n_pos += nb - nonfinite - t_zero - t_neg;
        s->fp16_overflow += t_hovf;
        s->fp16_underflow += t_hunf;
        s->fp16_subnormal += t_hsub;
        s->bf16_overflow += t_bovf;
        s->bf16_underflow += t_bunf;
        s->bf16_subnormal += t_bsub;
        s->sum += sum;
        s->sumsq += sq;
        if (nonfinite < nb) {
            float fmin = key_to_float(kmin), fmax = key_to_float(kmax);
            float famax = ampdiag_f32_from_bits(amax);
            if (fmin < s->min) s->min = fmin;
            if (fmax > s->max) s->max = fmax;
            if (famax > s->absmax) s->absmax = famax;
            if (amin != UINT32_MAX) {
                float famin = ampdiag_f32_from_bits(amin);
                if (famin < s->absmin_nz) s->absmin_nz = famin;
            }
        }

        if (h) {
            /* Exponent field counts in four interleaved sub-histograms (no store-to-load
             * stalls on runs of equal exponents), then mapped to bins. */
            uint32_t eh[4][256];
            memset(eh, 0, sizeof eh);
            size_t i = 0;
            for (; i + 4 <= nb; i += 4) {
                eh[0][(load_bits(x, i) >> 23) & 0xffu]++;
                eh[1][(load_bits(x, i + 1) >> 23) & 0xffu]++;
                eh[2][(load_bits(x, i + 2) >> 23) & 0xffu]++;
                eh[3][(load_bits(x, i + 3) >> 23) & 0xffu]++;
            }
            for (; i < nb; i++)
                eh[0][(load_bits(x, i) >> 23) & 0xffu]++;
            for (int e = 1; e < 255; e++)
                h->bin[AMPDIAG_HIST_BIN(e - 127)] += (uint64_t)eh[0][e] + eh[1][e] + eh[2][e] + eh[3][e];
            uint64_t ezero = (uint64_t)eh[0][0] + eh[1][0] + eh[2][0] + eh[3][0];
            h->bin[AMPDIAG_HIST_ZERO] += t_zero;
            h->bin[AMPDIAG_HIST_POSINF] += t_pinf;
            h->bin[AMPDIAG_HIST_NEGINF] += t_ninf;
            h->bin[AMPDIAG_HIST_NAN] += t_nan;
            if (ezero > t_zero) /* float32 subnormals in this block: rare, place them exactly */
                for (size_t j = 0; j < nb; j++) {
                    uint32_t a = load_bits(x, j) & 0x7fffffffu;
                    if (a != 0 && a < AMPDIAG_F32_MIN_NORMAL)
                        h->bin[subnormal_bin(a)]++;
                }
        }

        x += nb;
        n -= nb;
    }
}
