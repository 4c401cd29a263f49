"""Which steps the PyTorch tracer records in full, and why: the rules of ``ampdiag run``'s
(src/train/cadence.h; traces/FORMAT.md, "/traced"; docs/tracing-budget.md), for a loop the
tracer does not drive.

Every step gets its step record. Full tensor records (the layers' outputs, gradients, weights,
updates, histograms, the block-scaled what-if) are taken

* on a cadence: fixed (``trace_every``), or chosen from the tracer's own measured cost so that
  recording takes at most a budget (``trace_budget``, percent of the time of an untraced step):
  a credit grows by the budget's share of each step's measured time and pays for what the
  traced steps are measured to take beyond an untraced one; a step is planned for records when
  the credit covers the measured cost of one;
* at the first step and the last planned one;
* after an event: the ``trace_after_event`` steps after a step whose loss or gradients were not
  finite, whose update the scaler skipped, or whose loss or gradient norm spiked (the rule of
  src/monitor/monitor.h: above the median of the last 64 finite values by 6 x 1.4826 x their
  MAD, once 20 are known). Unlike ``ampdiag run``, the tracer learns of an event when the step
  is over, when its activations are gone: the event step itself has full records only where
  it was planned for them.

Time is the process's CPU time (all threads: torch's and the trace writer's) for a model on the
CPU, wall time for one on a device (the device's work is not in the CPU time).
"""

import math
import time
from bisect import bisect_left, insort
from collections import deque

CADENCE, EVERY, FIRST, LAST, NONFINITE, SKIPPED, LOSS_SPIKE, GRAD_SPIKE, AFTER_EVENT = range(9)

# the first of these is the reason a step with several is recorded under (include/ampdiag_trace.h)
_PRIORITY = (SKIPPED, NONFINITE, LOSS_SPIKE, GRAD_SPIKE, FIRST, LAST, AFTER_EVENT, EVERY, CADENCE)

SPIKE_MADS, SPIKE_MIN_HISTORY, WINDOW, MAD_SIGMA = 6.0, 20, 64, 1.4826
SMOOTH_STEPS = 500   # the measured times are smoothed over about this many steps
PROBE_AFTER = 8      # untraced steps measured before the first record that measures one's cost


class Spike:
    """The loss-spike rule of src/monitor/monitor.h over a rolling window of finite values."""

    def __init__(self):
        self.win = deque()
        self.sorted = []

    def push(self, x):
        """Feed one value; whether it is a spike against the values before it."""
        if x is None or not math.isfinite(x):
            return False
        spike = False
        n = len(self.sorted)
        if n >= SPIKE_MIN_HISTORY:
            med = _median(self.sorted)
            mad = _median(sorted(abs(v - med) for v in self.sorted))
            spike = mad > 0 and x > med + SPIKE_MADS * MAD_SIGMA * mad
        self.win.append(x)
        insort(self.sorted, x)
        if len(self.win) > WINDOW:
            old = self.win.popleft()
            del self.sorted[bisect_left(self.sorted, old)]
        return spike


def _median(s):
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


class Row:
    """One /traced row: the step, why, the event it follows, the cadence, the measured costs."""
    __slots__ = ("step", "reason", "event_step", "cadence", "record_ms", "step_ms")

    def __init__(self, step, reason, event_step, cadence, record_ms, step_ms):
        self.step, self.reason, self.event_step = step, reason, event_step
        self.cadence, self.record_ms, self.step_ms = cadence, record_ms, step_ms


class Cadence:
    """The plan: plan(t) before step t starts, events(...) and done(...) when it is over.

    every: a fixed cadence (> 0), 0 for step records only, or None under a budget (a fraction,
    0..1); after_event: steps recorded after an event; hist_every: histograms on the first
    recorded step at or after each multiple; cpu: measure CPU time (else wall time)."""

    def __init__(self, every, budget, after_event, hist_every, cpu=True):
        self.every = every
        self.budget = budget
        self.after_event = int(after_event)
        self.hist_every = int(hist_every)
        self.clock = time.process_time if cpu else time.perf_counter
        self.credit = 0.0
        self.record_ms = math.nan
        self.step_ms = math.nan
        self.n_untraced = 0
        self.n_traced = 0
        self.after_until = -1
        self.after_from = -1
        self.last_hist = -1
        self.loss_spike = Spike()
        self.grad_spike = Spike()
        self.planned = {}   # step -> (reason, event_step, cadence, record_ms, step_ms) of a planned step

    @property
    def mode(self):
        return "budget" if self.every is None else ("every" if self.every > 0 else "none")

    def cadence(self):
        """The cadence in force: trace_every, or the spacing the budget allows (0: none yet)."""
        if self.every is not None:
            return self.every
        if not (self.budget > 0 and self.record_ms > 0 and self.step_ms > 0):
            return 0
        return max(1, math.ceil(self.record_ms / (self.budget * self.step_ms)))

    def plan(self, t, steps=None):
        """Whether step t is recorded in full, and with histograms (steps: the planned number
        of steps, whose last is recorded, or None)."""
        if self.every == 0:  # step records only
            return False, False
        reasons = []
        if t == 0:
            reasons.append(FIRST)
        if steps is not None and t == steps - 1:
            reasons.append(LAST)
        if t <= self.after_until:
            reasons.append(AFTER_EVENT)
        if self.every is not None:
            if self.every > 0 and t % self.every == 0:
                reasons.append(EVERY)
        elif self.budget > 0 and t > 0:
            if math.isnan(self.record_ms):
                if self.n_untraced >= PROBE_AFTER and self.n_traced <= 1:
                    reasons.append(CADENCE)  # a record to measure what one costs
            elif self.credit >= self.record_ms:
                reasons.append(CADENCE)
        if not reasons:
            return False, False
        reason = min(reasons, key=_PRIORITY.index)
        self.planned[t] = (reason, self.after_from if reason == AFTER_EVENT else -1, self.cadence(), self.record_ms,
                           self.step_ms)
        H = self.hist_every
        hist = H > 0 and (self.last_hist < 0 or t // H > self.last_hist // H)
        if hist:
            self.last_hist = t
        return True, hist

    def start(self):
        """The clock at a step's start (the end of the one before)."""
        return self.clock()

    def events(self, t, loss, grad_norm, nonfinite, skipped):
        """The step's events (reasons), from what its step record holds; they plan records of
        the steps after it."""
        ev = []
        if skipped:
            ev.append(SKIPPED)
        if nonfinite or loss is None or not math.isfinite(loss):
            ev.append(NONFINITE)
        if self.loss_spike.push(loss):
            ev.append(LOSS_SPIKE)
        if self.grad_spike.push(grad_norm):
            ev.append(GRAD_SPIKE)
        if ev and self.after_event > 0:
            self.after_until = t + self.after_event
            self.after_from = t
        return ev

    def done(self, t, traced, c0, events=()):
        """Step t is over (its records written): measure it; its /traced row when it was
        recorded in full (None otherwise)."""
        ms = (self.clock() - c0) * 1e3
        a = 1.0 / min(SMOOTH_STEPS, (self.n_traced if traced else self.n_untraced) + 1)
        if t > 0:  # the first step pays for warming up: not a measure of either
            if not traced:
                self.step_ms = ms if math.isnan(self.step_ms) else self.step_ms + a * (ms - self.step_ms)
                self.n_untraced += 1
            elif not math.isnan(self.step_ms):
                extra = max(ms - self.step_ms, 0.0)
                self.record_ms = extra if math.isnan(self.record_ms) else self.record_ms + a * (extra - self.record_ms)
                self.credit -= extra
        if traced:
            self.n_traced += 1
        if self.every is None and not math.isnan(self.step_ms):
            self.credit += self.budget * self.step_ms
            # a credit saved over a long quiet stretch does not buy a burst of records
            if not math.isnan(self.record_ms):
                self.credit = min(self.credit, 2.0 * self.record_ms)
        p = self.planned.pop(t, None)
        if not traced or p is None:
            return None
        reason, event_step, cad, record_ms, step_ms = p  # as they stood when the step was planned
        for e in _PRIORITY:  # an event of the step itself outranks why it was planned
            if e in events and _PRIORITY.index(e) < _PRIORITY.index(reason):
                reason, event_step = e, t
                break
        return Row(t, reason, event_step, cad, record_ms, step_ms)
