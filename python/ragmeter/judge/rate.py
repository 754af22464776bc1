"""Adaptive rate control for the judge client: learn the provider's limit instead of pausing everyone.

:class:`RateController` is pure: it is told what happened (a request sent, an answer, a throttle, a time-out)
with the time it happened, from an injected ``clock``, and decides the request rate and the number of requests
in flight. :class:`~ragmeter.judge.limits.Limits` applies its decisions; tests drive it with a fake clock.

Rate (requests per second), after AWS's SDK "adaptive" retry mode:

* Unlimited until the first throttle (429, 529, or 503 with Retry-After). Then a token bucket, its rate cut to
  ``beta`` (0.7) times the rate at the throttle (the first time: the sending rate measured; later: the
  bucket's own rate), regrown along a cubic curve that is back at that
  rate after ``recovery`` seconds and probes beyond it afterwards (CUBIC). The regrown rate never exceeds
  twice the measured sending rate (no credit piles up while the client is idle) nor the user's ``--rpm``.
* One cut per round: only a throttle of a request sent after the last cut, and ``round`` (0.15 s) after it,
  can cut again (the ones already in flight answer for the old rate).
* Cuts must lower the throttled share. Shares are counted in windows of ``window`` seconds (8 answers at
  least). Under a limit ``L`` that depends on the load, the share at rate ``r`` is ``1 - L/r``. When a
  window sent at ``undo_below`` (0.6) of the rate of the series' fastest window is throttled nearer
  that window's share than this model predicts, the throttles do not depend on the load (a provider that
  refuses a share of requests at any rate): the cuts are undone and the share is learnt as noise. From then
  on the rate is only cut when the recent share rises clearly above the noise.
* A throttle's Retry-After is honoured in full by the request that got it (the retry layer waits) and, when
  the throttle cuts the rate, briefly (at most ``hold`` seconds) by the other requests: not a global pause.

Concurrency (requests in flight), for servers that queue (a local server processing one request at a time):

* Halved on a time-out; cut to 0.8x when the smoothed latency of answers exceeds ``latency_tolerance`` (2x)
  its lowest smoothed value (queueing, not a slow prompt); one cut per round, as for the rate.
* Otherwise regrown by one per ``limit`` answers (one per round trip), up to the user's ``--concurrency``.
"""
from __future__ import annotations

import math
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, Optional, Tuple

__all__ = ["RateController", "THROTTLE_STATUSES"]

#: Statuses that say "too fast" (429 rate limited, 529 overloaded); a 503 counts only with a Retry-After.
THROTTLE_STATUSES = frozenset({429, 529})


def is_throttle(status: Optional[int], retry_after: Optional[float]) -> bool:
    return status in THROTTLE_STATUSES or (status == 503 and retry_after is not None)


class RateController:
    def __init__(self, concurrency: int = 8, *, ceiling_rps: Optional[float] = None,
                 clock: Callable[[], float] = time.monotonic, beta: float = 0.7, recovery: float = 1.0,
                 min_rate: float = 0.5, window: float = 0.5, hold: float = 0.1,
                 latency_tolerance: float = 2.0, undo_below: float = 0.6,
                 round: float = 0.15) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.clock = clock
        self.max_concurrency = concurrency
        self.ceiling_rps = ceiling_rps
        self.beta, self.recovery, self.min_rate = beta, recovery, min_rate
        self.window, self.hold, self.latency_tolerance = window, hold, latency_tolerance
        self.undo_below = undo_below
        self.round = round
        # rate
        self.rate: Optional[float] = None      #: requests/s of the token bucket; None: not limited
        self.min_seen: Optional[float] = None  #: the lowest rate applied
        self._w_max = 0.0                      #: the rate measured at the last cut
        self._last_cut = -math.inf             #: a throttle of a request sent before this cannot cut again
        self._curve_start = -math.inf          #: origin of the cubic regrowth
        self._next_send = -math.inf            #: virtual schedule of the bucket (time the next token is due)
        self._sends: Deque[float] = deque()
        self.noise = 0.0                       #: throttled share learnt as load-independent
        # windows of answers: (throttled, answers) now, in the previous window, and whether a cut happened
        self._win_start: Optional[float] = None
        self._win = [0, 0]
        self._win_sends = 0
        #: since the series of cuts began: the fastest window's (share, send rate)
        self._series: Optional[Tuple[float, float]] = None
        self._series_start = math.inf
        self._quiet = 0                        #: answers in a row without a throttle
        self._cut_in_window = False
        self._rate_before_cuts: Optional[float] = None  #: the rate before the first cut of the current series
        self._recent: Deque[bool] = deque(maxlen=50)
        # concurrency
        self.concurrency = concurrency
        self.min_concurrency = concurrency
        self._lat_ewma: Optional[float] = None
        self._lat_floor = math.inf
        self._lat_n = 0
        self._last_shrink = -math.inf
        self._grow_credit = 0.0
        # counts (judge_summary.json's rate section)
        self.throttled = 0
        self.timeouts = 0
        self.cuts = 0
        self.undone = 0
        self.held_s = 0.0

    # -- the token bucket -------------------------------------------------------------------------------
    def reserve(self, now: Optional[float] = None) -> float:
        """Take the next send slot of the bucket; seconds to wait before sending (0: send now)."""
        now = self.clock() if now is None else now
        rate = self.current_rate(now)
        if rate is None:
            return max(0.0, self._next_send - now)
        # a burst of at most one second's worth after idling, then paced at 1/rate
        start = max(self._next_send, now - 1.0)
        self._next_send = max(start, now - 1.0) + 1.0 / rate
        return max(0.0, start - now)

    def sent(self, now: Optional[float] = None) -> float:
        """Record a request going out now; returns the send time (to pass back with its answer)."""
        now = self.clock() if now is None else now
        self._sends.append(now)
        self._win_sends += 1
        while self._sends and self._sends[0] < now - 1.0:
            self._sends.popleft()
        return now

    def measured_rate(self, now: float) -> float:
        """Requests sent per second over the last second (over the time since the first send, if shorter)."""
        while self._sends and self._sends[0] < now - 1.0:
            self._sends.popleft()
        if not self._sends:
            return 0.0
        span = max(0.25, min(1.0, now - self._sends[0]))
        return len(self._sends) / span

    def current_rate(self, now: Optional[float] = None) -> Optional[float]:
        """The bucket's rate now (cubic regrowth since the last cut); None while not limited."""
        if self.rate is None:
            return None
        now = self.clock() if now is None else now
        t = now - self._curve_start
        k = self.recovery
        scale = self._w_max * (1.0 - self.beta) / (k ** 3) if k > 0 else 0.0
        grown = self._w_max + scale * (t - k) ** 3
        cap = max(2.0 * self.measured_rate(now), self.min_rate, self._w_max * self.beta)
        rate = max(self.min_rate, min(grown, cap))
        if self.ceiling_rps is not None:
            rate = min(rate, self.ceiling_rps)
        self.rate = rate
        return rate

    # -- what came back ---------------------------------------------------------------------------------
    def answered(self, sent_at: float, latency: float, now: Optional[float] = None) -> None:
        """A non-throttled answer (any status but a throttle) that took ``latency`` seconds."""
        now = self.clock() if now is None else now
        self._count(now, throttled=False)
        self._latency(sent_at, latency, now)

    def throttle(self, sent_at: float, retry_after: Optional[float] = None, now: Optional[float] = None) -> float:
        """A throttle of the request sent at ``sent_at``; seconds every other request should hold (0: none)."""
        now = self.clock() if now is None else now
        self.throttled += 1
        self._count(now, throttled=True)
        if sent_at < self._last_cut or now - self._last_cut < self.round or not self._over_noise():
            return 0.0
        rate_now = self.current_rate(now)
        measured = self.measured_rate(now)
        if self._series is None:
            self._rate_before_cuts = rate_now if rate_now is not None else math.inf
            self._series = (0.0, 0.0)
            self._series_start = now
        if rate_now is None:  # the first cut: early in a run the last second holds few sends; the pace the
            # concurrency allows at the latency seen is the better estimate of the rate throttled
            pace = self.concurrency / self._lat_ewma if self._lat_ewma else 0.0
            base = max(measured, pace)
        else:  # the bucket's rate, not the sends of the last second: those also fall when the work runs out
            # (the end of a run), and a cut from them would collapse the rate for the last requests
            base = rate_now
        self._w_max = max(base, self.min_rate)
        self.rate = max(self.min_rate, self._w_max * self.beta)
        if self.ceiling_rps is not None:
            self.rate = min(self.rate, self.ceiling_rps)
        self.min_seen = self.rate if self.min_seen is None else min(self.min_seen, self.rate)
        self._last_cut = self._curve_start = now
        self._cut_in_window = True
        self.cuts += 1
        hold = min(retry_after or 0.0, self.hold)
        self._next_send = max(self._next_send, now + max(hold, 1.0 / self.rate))
        self.held_s += hold
        return hold

    def timed_out(self, sent_at: float, now: Optional[float] = None) -> None:
        """The request sent at ``sent_at`` got no answer within the time-out: halve the concurrency."""
        now = self.clock() if now is None else now
        self.timeouts += 1
        self._shrink(sent_at, now, 0.5)

    # -- internals --------------------------------------------------------------------------------------
    def _over_noise(self) -> bool:
        """Whether the recent throttled share is clearly above the share learnt as noise (always, with none)."""
        if self.noise <= 0.0:
            return True
        n = len(self._recent)
        share = sum(self._recent) / n if n else 0.0
        margin = max(0.15, 3.0 * math.sqrt(self.noise * (1.0 - self.noise) / max(n, 1)))
        return share > self.noise + margin

    def _count(self, now: float, throttled: bool) -> None:
        self._recent.append(throttled)
        self._quiet = 0 if throttled else self._quiet + 1
        if self._win_start is None:
            self._win_start = now
        elif now - self._win_start >= self.window and self._win[1] >= 8:  # 8 answers at least: a share
            self._close_window(now)
        self._win[0] += throttled
        self._win[1] += 1

    def _close_window(self, now: float) -> None:
        """Test a series of cuts. Under a limit that depends on the load, the share at rate ``r`` is ``1 - L/r``:
        from the fastest window ``(s, r0)`` begun after the first cut, a window sent at ``r <= undo_below * r0`` should show
        ``max(0, 1 - (1 - s) r0 / r)``. A share nearer ``s`` than that says the throttles are not ours to
        cure: noise."""
        thr, n = self._win
        span = max(now - (self._win_start or now), 1e-9)
        rate = self._win_sends / span
        if self._series is not None:
            share = thr / n
            s_ref, r_ref = self._series
            if (self._win_start or 0.0) < self._series_start:
                pass  # begun before the first cut: a server's burst may have hidden the limit
            elif r_ref <= 0 or rate > r_ref:
                self._series = (share, rate)  # the fastest window of the series
            elif rate <= self.undo_below * r_ref and share > 0.05:
                expected = max(0.0, 1.0 - (1.0 - s_ref) * r_ref / max(rate, 1e-9))
                if share >= (s_ref + expected) / 2.0:
                    self._undo(share, now)
        if self._quiet >= 30:
            self._series = None  # 30 answers in a row without a throttle end a series of cuts
            self._rate_before_cuts = None
        self._cut_in_window = False
        self._win = [0, 0]
        self._win_sends = 0
        self._win_start = now

    def _undo(self, share: float, now: float) -> None:
        """The cuts did not lower the throttled share: undo them and learn the share as noise."""
        self.noise = max(self.noise, min(share, 0.9))
        before = self._rate_before_cuts
        if before is None or math.isinf(before):
            self.rate = None
        else:
            self.rate = self._w_max = before
            self._curve_start = now - self.recovery  # on the plateau of the curve, at the old rate
        self._next_send = -math.inf
        self._rate_before_cuts = None
        self._series = None
        self.undone += 1

    def _latency(self, sent_at: float, latency: float, now: float) -> None:
        self._lat_n += 1
        self._lat_ewma = latency if self._lat_ewma is None else 0.8 * self._lat_ewma + 0.2 * latency
        if self._lat_n >= 3:
            self._lat_floor = min(self._lat_floor, self._lat_ewma)
            if self._lat_ewma > self.latency_tolerance * self._lat_floor:
                if self._shrink(sent_at, now, 0.8):
                    return
        if self.concurrency < self.max_concurrency:
            self._grow_credit += 1.0 / self.concurrency
            if self._grow_credit >= 1.0:
                self._grow_credit = 0.0
                self.concurrency += 1

    def _shrink(self, sent_at: float, now: float, factor: float) -> bool:
        if sent_at < self._last_shrink:
            return False  # sent before the last cut: it answers for the old concurrency
        self.concurrency = max(1, int(self.concurrency * factor))
        self.min_concurrency = min(self.min_concurrency, self.concurrency)
        self._last_shrink = now
        self._grow_credit = 0.0
        return True

    # -- reporting --------------------------------------------------------------------------------------
    def summary(self) -> Dict[str, Any]:
        """The ``rate`` section of judge_summary.json."""
        rate = self.current_rate()
        return {
            "policy": "adaptive",
            "final_rps": None if rate is None else round(rate, 3),
            "min_rps": None if self.min_seen is None else round(self.min_seen, 3),
            "throttled": self.throttled, "cuts": self.cuts, "cuts_undone": self.undone,
            "noise_share": round(self.noise, 4), "timeouts": self.timeouts,
            "concurrency": self.concurrency, "min_concurrency": self.min_concurrency,
            "max_concurrency": self.max_concurrency, "others_held_s": round(self.held_s, 3),
            "note": "requests/s; final_rps null: not limited at the end (no throttle, or the cuts were undone as "
                    "noise); min_rps null: never cut. See ragmeter.judge.rate",
        }
