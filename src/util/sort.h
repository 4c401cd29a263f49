/*
 * sort.h - sorting doubles and the order statistics taken from them (medians, quantiles).
 */
#ifndef AMPDIAG_SORT_H
#define AMPDIAG_SORT_H

#include <stddef.h>

/* Sort v[0..n) ascending as qsort with (x < y ? -1 : x > y) does; a radix sort (the same
 * array) where no value is NaN or -0 and n >= 256. */
void sort_doubles(double *v, size_t n);
/* The median of v[0..n) (the mean of the middle two for even n); reorders v; NaN when n == 0. */
double median_doubles(double *v, size_t n);
/* The p-quantile (0..1) of sorted v[0..n), interpolated linearly between order statistics
 * (numpy's default); NaN when n == 0. */
double quantile_sorted(const double *v, size_t n, double p);

#endif
