/*
 * sort.c - sorting doubles, medians and quantiles (sort.h).
 */
#include "util/sort.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The order of doubles as unsigned keys: negative values reversed below the positive ones. */
static uint64_t radix_key(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u >> 63 ? ~u : u | UINT64_C(1) << 63;
}

/* LSD radix sort of v[0..n) by radix_key, a byte a pass (passes where every key has the same
 * byte are skipped). -1 when out of memory (v unchanged). */
static int radix_sort(double *v, size_t n)
{
    double *tmp = malloc(n * sizeof *tmp);
    size_t (*count)[256] = calloc(8, sizeof *count);
    if (!tmp || !count) {
        free(tmp);
        free(count);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t k = radix_key(v[i]);
        for (int b = 0; b < 8; b++)
            count[b][(k >> (8 * b)) & 0xff]++;
    }
    double *src = v, *dst = tmp;
    for (int b = 0; b < 8; b++) {
        if (count[b][(radix_key(v[0]) >> (8 * b)) & 0xff] == n)
            continue; /* (src[0]'s byte is v[0]'s: every pass keeps the set of keys) */
        size_t at = 0;
        for (int d = 0; d < 256; d++) {
            size_t c = count[b][d];
            count[b][d] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[count[b][(radix_key(src[i]) >> (8 * b)) & 0xff]++] = src[i];
        double *t = src;
        src = dst;
        dst = t;
    }
    if (src != v)
        memcpy(v, src, n * sizeof *v);
    free(tmp);
    free(count);
    return 0;
}

void sort_doubles(double *v, size_t n)
{
    int plain = n >= 256;
    for (size_t i = 0; plain && i < n; i++)
        plain = !isnan(v[i]) && !(v[i] == 0 && signbit(v[i]));
    if (!plain || radix_sort(v, n))
        qsort(v, n, sizeof *v, cmp_double);
}

double median_doubles(double *v, size_t n)
{
    if (n == 0)
        return NAN;
    sort_doubles(v, n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double quantile_sorted(const double *v, size_t n, double p)
{
    if (n == 0)
        return NAN;
    double pos = p * (double)(n - 1);
    size_t i = (size_t)pos;
    if (i + 1 >= n)
        return v[n - 1];
    double f = pos - (double)i;
    return v[i] + f * (v[i + 1] - v[i]);
}
