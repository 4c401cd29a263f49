/*
 * scaler.h - loss scaling: none, static, and dynamic (PyTorch GradScaler's algorithm, plus
 * DeepSpeed-style minimum scale and hysteresis).
 */
#ifndef AMPDIAG_SCALER_H
#define AMPDIAG_SCALER_H

#include <stdint.h>

typedef enum { SCALER_NONE = 0, SCALER_STATIC = 1, SCALER_DYNAMIC = 2 } scaler_kind;

typedef struct scaler_config {
    scaler_kind kind;
    double init;            /* initial (or static) scale; default 2^16 */
    double growth_factor;   /* x2 */
    double backoff_factor;  /* x0.5 */
    int growth_interval;    /* 2000 consecutive finite steps */
    double min_scale;       /* 0: no minimum (PyTorch); DeepSpeed uses 1 */
    double max_scale;       /* +inf: only finiteness limits growth (PyTorch) */
    int hysteresis;         /* overflows tolerated before a backoff; 1 = back off every time */
} scaler_config;

/* PyTorch GradScaler defaults for kind. */
void scaler_config_default(scaler_config *c, scaler_kind kind);

typedef struct scaler {
    scaler_config cfg;
    float scale;          /* a float32, as GradScaler's _scale tensor: updates are computed in
                             double and rounded to float (halving ends at 2^-149, then 0) */
    int growth_tracker;   /* consecutive finite steps since the last growth or overflow */
    int hysteresis_left;
} scaler;

/* What update() did. */
typedef enum {
    SCALER_KEPT = 0,       /* finite step, scale unchanged */
    SCALER_GREW = 1,       /* finite step, scale multiplied by growth_factor */
    SCALER_BACKED_OFF = 2, /* non-finite gradients: scale multiplied by backoff_factor */
    SCALER_HYSTERESIS = 3, /* non-finite gradients, tolerated by hysteresis: scale unchanged */
    SCALER_AT_MIN = 4      /* non-finite gradients and the scale is already at its minimum */
} scaler_event;

void scaler_init(scaler *s, const scaler_config *c);
/* The scale the next backward multiplies the loss by (1 for SCALER_NONE). */
double scaler_scale(const scaler *s);
/* After a backward: found_nonfinite says whether any gradient held inf/NaN. Whether the step
 * is skipped is the caller's policy (it is, for static and dynamic scaling). */
scaler_event scaler_update(scaler *s, int found_nonfinite);
const char *scaler_event_name(scaler_event e);

#endif
