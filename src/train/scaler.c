/*
 * scaler.c - the loss scaler.
 *
 * Dynamic scaling follows PyTorch's _amp_update_scale: on a non-finite step the scale is
 * multiplied by backoff_factor and the growth tracker reset; on a finite step the tracker
 * counts up and, when it reaches growth_interval, the scale is multiplied by growth_factor
 * (only if the result is finite) and the tracker reset. Two DeepSpeed options are added:
 * min_scale (a backoff never goes below it) and hysteresis (the first hysteresis-1 overflows
 * since the last growth leave the scale unchanged; the step is still skipped). The scale is held
 * as a float32, as GradScaler's is (its _amp_update_scale_ multiplies the float scale by the
 * double factor and stores the result as float).
 */
#include "train/scaler.h"

#include <math.h>

void scaler_config_default(scaler_config *c, scaler_kind kind)
{
    c->kind = kind;
    c->init = kind == SCALER_NONE ? 1.0 : 65536.0;
    c->growth_factor = 2.0;
    c->backoff_factor = 0.5;
    c->growth_interval = 2000;
    c->min_scale = 0.0;
    c->max_scale = INFINITY;
    c->hysteresis = 1;
}

void scaler_init(scaler *s, const scaler_config *c)
{
    s->cfg = *c;
    s->scale = c->kind == SCALER_NONE ? 1.0f : (float)c->init;
    s->growth_tracker = 0;
    s->hysteresis_left = c->hysteresis > 0 ? c->hysteresis : 1;
}

double scaler_scale(const scaler *s) { return s->scale; }

scaler_event scaler_update(scaler *s, int found_nonfinite)
{
    if (s->cfg.kind != SCALER_DYNAMIC)
        return SCALER_KEPT;
    if (found_nonfinite) {
        s->growth_tracker = 0;
        if (s->hysteresis_left > 1) {
            s->hysteresis_left--;
            return SCALER_HYSTERESIS;
        }
        if (s->cfg.min_scale > 0 && s->scale <= s->cfg.min_scale)
            return SCALER_AT_MIN;
        double next = (double)s->scale * s->cfg.backoff_factor;
        if (s->cfg.min_scale > 0 && next < s->cfg.min_scale)
            next = s->cfg.min_scale;
        s->scale = (float)next;
        return SCALER_BACKED_OFF;
    }
    if (++s->growth_tracker >= s->cfg.growth_interval) {
        s->growth_tracker = 0;
        float next = (float)((double)s->scale * s->cfg.growth_factor);
        if (isfinite(next) && next <= s->cfg.max_scale) {
            s->scale = next;
            s->hysteresis_left = s->cfg.hysteresis > 0 ? s->cfg.hysteresis : 1;
            return SCALER_GREW;
        }
    }
    return SCALER_KEPT;
}

const char *scaler_event_name(scaler_event e)
{
    switch (e) {
    case SCALER_KEPT: return "kept";
    case SCALER_GREW: return "grew";
    case SCALER_BACKED_OFF: return "backed off";
    case SCALER_HYSTERESIS: return "overflow tolerated (hysteresis)";
    case SCALER_AT_MIN: return "overflow at minimum scale";
    }
    return "?";
}
