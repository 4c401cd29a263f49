/*
 * vec.h - the one growable array of the project: a typed array that doubles its room as it
 * grows, for lists whose length is not known in advance (evidence, chart columns, series).
 *
 *     VEC(double) v = {0};
 *     if (vec_push(&v, 1.5)) ... out of memory (v unchanged) ...
 *     for (size_t i = 0; i < v.n; i++) use(v.v[i]);
 *     vec_free(&v);
 *
 * A VEC(T) is a struct { T *v; size_t n, cap; }: a zeroed one is empty and valid. Every
 * function here is the same code for every element type (vec_reserve_ does the growing).
 */
#ifndef AMPDIAG_VEC_H
#define AMPDIAG_VEC_H

#include <stddef.h>
#include <stdlib.h>

#define VEC(T)                                                                                     \
    struct {                                                                                       \
        T *v;                                                                                      \
        size_t n, cap;                                                                             \
    }

/* Make room for at least `need` elements of `size` bytes in *v (capacity *cap): the capacity
 * doubles (from 8) until it holds them. 0, or -1 when out of memory or the size overflows
 * (*v and *cap unchanged). */
int vec_reserve_(void **v, size_t *cap, size_t need, size_t size);

/* Room for n more elements. 0 or -1 (out of memory). */
#define vec_reserve(a, more) vec_reserve_((void **)&(a)->v, &(a)->cap, (a)->n + (more), sizeof *(a)->v)

/* Append x (an expression of the element type). 0, or -1 when out of memory (a unchanged). */
#define vec_push(a, x)                                                                             \
    (((a)->n < (a)->cap || vec_reserve(a, 1) == 0) ? ((a)->v[(a)->n++] = (x), 0) : -1)

/* A new zeroed element at the end, or NULL when out of memory. */
#define vec_add(a) ((a)->n < (a)->cap || vec_reserve(a, 1) == 0 ? vec_zero_(&(a)->v[(a)->n++], sizeof *(a)->v) : NULL)
void *vec_zero_(void *p, size_t size);

/* Insert x at index i (0 <= i <= n), moving the elements after it. 0 or -1 (out of memory). */
#define vec_insert(a, i, x)                                                                        \
    (((a)->n < (a)->cap || vec_reserve(a, 1) == 0)                                                \
         ? (vec_make_gap_((a)->v, (i), (a)->n, sizeof *(a)->v), (a)->v[(i)] = (x), (a)->n++, 0)    \
         : -1)
void vec_make_gap_(void *v, size_t i, size_t n, size_t size);

#define vec_free(a) (free((a)->v), (a)->v = NULL, (a)->n = (a)->cap = 0)

#endif
