/*
 * t_scaler.c - the loss scaler driven by given overflow sequences; exact scale sequences.
 */
#include "train/scaler.h"
#include "tap.h"

/* Run a sequence ('o' overflow, '.' finite) and compare the scale after each step. */
static int run_seq(scaler *s, const char *seq, const double *want, scaler_event *last)
{
    for (int i = 0; seq[i]; i++) {
        scaler_event e = scaler_update(s, seq[i] == 'o');
        if (last) *last = e;
        if (scaler_scale(s) != want[i]) {
            diag("step %d (%c): scale %.17g, expected %.17g", i, seq[i], scaler_scale(s), want[i]);
            return 0;
        }
    }
    return 1;
}

int main(void)
{
    scaler_config c;
    scaler s;

    scaler_config_default(&c, SCALER_DYNAMIC);
    ok(c.init == 65536 && c.growth_factor == 2 && c.backoff_factor == 0.5 && c.growth_interval == 2000 &&
       c.min_scale == 0 && c.hysteresis == 1, "dynamic defaults are PyTorch GradScaler's (2^16, x2 / 2000, x0.5)");

    /* growth interval 3 to keep sequences short: PyTorch semantics */
    c.growth_interval = 3;
    scaler_init(&s, &c);
    ok(scaler_scale(&s) == 65536, "initial scale 2^16");
    {
        const char *seq = "...o..o...o";
        const double want[] = {65536, 65536, 131072, 65536, 65536, 65536, 32768, 32768, 32768, 65536, 32768};
        ok(run_seq(&s, seq, want, NULL), "grow after 3 finite steps, back off x0.5 on overflow, tracker reset by overflow");
    }
    /* collapse: repeated overflow drives the scale below 1 with no minimum (PyTorch) */
    scaler_init(&s, &c);
    for (int i = 0; i < 20; i++) scaler_update(&s, 1);
    ok(scaler_scale(&s) == 0.0625, "20 overflows: 2^16 -> 2^-4 (no minimum, as PyTorch)");

    /* minimum scale (DeepSpeed) */
    c.min_scale = 1.0;
    scaler_init(&s, &c);
    scaler_event e = SCALER_KEPT;
    for (int i = 0; i < 16; i++) e = scaler_update(&s, 1);
    ok(scaler_scale(&s) == 1.0 && e == SCALER_BACKED_OFF, "16 overflows reach the minimum 1");
    e = scaler_update(&s, 1);
    ok(scaler_scale(&s) == 1.0 && e == SCALER_AT_MIN, "an overflow at the minimum is reported, scale stays 1");

    /* hysteresis 2 (DeepSpeed default): first overflow tolerated, second backs off; growth restores it */
    c.min_scale = 0;
    c.hysteresis = 2;
    scaler_init(&s, &c);
    {
        const char *seq = "oo.o...oo";
        const double want[] = {65536, 32768, 32768, 16384, 16384, 16384, 32768, 32768, 16384};
        scaler_event last;
        ok(run_seq(&s, seq, want, &last), "hysteresis 2: tolerate one overflow, then back off; growth re-arms it");
        ok(last == SCALER_BACKED_OFF, "the last overflow of the sequence backed off");
    }
    /* growth stops at max_scale and at non-finite values */
    c.hysteresis = 1;
    c.max_scale = 131072;
    scaler_init(&s, &c);
    {
        const char *seq = "......";
        const double want[] = {65536, 65536, 131072, 131072, 131072, 131072};
        ok(run_seq(&s, seq, want, NULL), "growth capped at max_scale");
    }
    c.max_scale = __builtin_inf();
    c.init = 0x1p127;
    scaler_init(&s, &c);
    for (int i = 0; i < 3; i++) e = scaler_update(&s, 0);
    ok(scaler_scale(&s) == 0x1p127 && e == SCALER_KEPT,
       "growth that would overflow a float32 scale to inf is not applied (2^127 stays)");
    /* the scale is a float32, as GradScaler's: 165 backoffs from 2^16 reach 2^-149, the smallest
     * float32 subnormal; the 166th gives 2^-150, which rounds (to even) to 0 */
    c.init = 65536;
    scaler_init(&s, &c);
    for (int i = 0; i < 165; i++) scaler_update(&s, 1);
    double at165 = scaler_scale(&s);
    scaler_update(&s, 1);
    ok(at165 == 0x1p-149 && scaler_scale(&s) == 0.0,
       "float32 scale: 2^-149 after 165 backoffs, 0 after 166 (got %g, %g)", at165, scaler_scale(&s));

    /* static and none never change */
    scaler_config_default(&c, SCALER_STATIC);
    c.init = 1024;
    scaler_init(&s, &c);
    for (int i = 0; i < 10; i++) scaler_update(&s, i % 2);
    ok(scaler_scale(&s) == 1024, "static scale stays 1024 through overflows");
    scaler_config_default(&c, SCALER_NONE);
    scaler_init(&s, &c);
    scaler_update(&s, 1);
    ok(scaler_scale(&s) == 1, "no scaling: scale 1");
    ok(scaler_event_name(SCALER_BACKED_OFF)[0] == 'b', "event names");
    return done_testing();
}
