"""Adaptive rate control for the judge client: learn the provider's limit instead of pausing everyone.

:class:`RateController` is pure: it is told what happened (a request sent, an answer, a throttle, a time-out)
with the time it happened, from an injected ``clock``, and decides the request rate and the number of requests
in flight. :class:`~ragmeter.judge.limits.Limits` applies its decisions; tests drive it with a fake clock.

The public API (what :class:`~ragmeter.judge.limits.Limits`, or an actor shared by many workers, calls):
``reserve()`` before sending (seconds to wait), ``sent()`` when the request goes out (its send time),
then exactly one of ``answered(sent_at, latency)``, ``throttle(sent_at, retry_after)`` or
``timed_out(sent_at)``; ``current_rate()`` and ``concurrency`` are the decisions, ``summary()`` the report.

Rate (requests per second), after AWS's SDK "adaptive" retry mode, with two changes measured in
benches/judge_policies.py:

* Unlimited until the first throttle (429, 529, or 503 with Retry-After; a 2xx carrying one of them in its error
  object is that status, see :func:`~ragmeter.judge.retry.reply_status`). Then a token bucket, its rate cut to
  ``beta`` (0.7) times the pace the client had (the first time there is nothing better to go on; a throttle of
  the very first requests, before any answer, cuts nothing).
* A probe after every cut: the requests sent since the cut, and which of them were throttled (throttles come
  back at once, so this is known while the others are still in flight). Their *pass rate* (requests sent
  minus those throttled, per second) is the limit if it depends on the load: a hidden bucket of 30/s passes
  30/s whatever is sent. The next cut goes to ``soft_beta`` (0.9) times that estimate rather than a blind
  ``beta`` of the rate, and the rate regrows along a cubic curve that is back at the estimate after
  ``recovery`` (2) seconds, stays there ``plateau`` (2) more seconds (each probe beyond a measured limit costs
  a few throttles), then probes beyond it (CUBIC; at least 0.4 (t - recovery - plateau)^3 requests/s beyond,
  AWS's constant, so a deep cut is not slow to undo). The regrown rate never exceeds twice the
  measured sending rate (no credit piles up while the client is idle) nor the user's ``--rpm``.
* Cuts must lower the throttled share. Under a limit ``L`` that depends on the load, the share at rate ``r`` is
  ``1 - L/r``: from the fastest probe ``(r0, s0)`` of a series of cuts (for the first cut: the second before
  it, at the client's own pace), the probes at ``r <= 0.85 r0`` should show ``max(0, 1 - (1 - s0) r0 / r)``,
  summed probe by probe. A share clearly above that, and not clearly above ``s0`` (a share that rose at the
  slower rate says a server's burst was spent before the cut, not noise) (pooled over the slower probes, 16 sends
  at least, by 0.06 or two standard errors) says the throttles do not depend on the load (a provider
  refusing a share of requests at any rate): the series of cuts is undone and the share learnt as noise. From
  then on the rate is only cut when the recent share rises clearly above the noise.
* A floor: a cut never takes the rate below ``floor`` (0.6) times the best pass rate measured by a probe
  throttled more than once (saturated), so a run of unlucky throttles cannot collapse the rate; low enough
  that a pass rate inflated by what is left of a server's burst does not pin the rate above the limit.
* One cut per probe: only a throttle of a request sent after the last cut, once ``round`` (0.1 s) and
  ``probe_sends`` (10) sends have passed since it, can cut again (the ones already in flight answer for the
  old rate).
* A throttle's Retry-After is honoured in full by the request that got it (the retry layer waits) and, when
  the throttle cuts the rate, briefly (at most ``hold`` seconds) by the other requests: not a global pause.
  A cut redraws the bucket's schedule (``schedule`` counts the redraws): requests that reserved a send time
  at the old rate reserve again (:class:`~ragmeter.judge.limits.Limits`) instead of going out at the old pace.

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
                 clock: Callable[[], float] = time.monotonic, beta: float = 0.7, soft_beta: float = 0.9,
                 recovery: float = 2.0, min_rate: float = 0.5, hold: float = 0.1, floor: float = 0.6,
                 latency_tolerance: float = 2.0, round: float = 0.1, probe_sends: int = 10,
                 plateau: float = 2.0) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.clock = clock
        self.max_concurrency = concurrency
        self.ceiling_rps = ceiling_rps
        self.beta, self.soft_beta, self.recovery, self.min_rate = beta, soft_beta, recovery, min_rate
        self.hold, self.floor, self.latency_tolerance = hold, floor, latency_tolerance
        self.round, self.probe_sends, self.plateau = round, probe_sends, plateau
        # rate
        self.rate: Optional[float] = None      #: requests/s of the token bucket; None: not limited
        self.min_seen: Optional[float] = None  #: the lowest rate applied
        self.limit_estimate: Optional[float] = None  #: the pass rate of the last probe that cut
        self._w_max = 0.0                      #: the rate the cubic curve is back at after ``recovery``
        self._w_low = 0.0                      #: the rate it starts from (just after the cut)
        self._last_cut = -math.inf             #: a throttle of a request sent before this cannot cut again
        self._curve_start = -math.inf          #: origin of the cubic regrowth
        self._plateau = 0.0                    #: seconds the curve stays at the limit estimate before probing on
        self._next_send = -math.inf            #: virtual schedule of the bucket (time the next token is due)
        self._sends: Deque[float] = deque()    #: send times of the last second
        self._throttled_at: Deque[float] = deque()  #: send times of the throttled requests of the last second
        # the probe: requests sent since the last cut, and how many of them were throttled
        self._probe_sends = 0
        self._probe_throttled = 0
        self._probe_start: Optional[float] = None  #: the first send after the cut (the others were held)
        self._probe_ripe: Optional[int] = None  #: sends when the probe was long enough to end at a throttle
        #: (send rate, share, sends) of the series' fastest probe (or of the second before the first cut)
        self._ref: Optional[Tuple[float, float, int]] = None
        #: the probes slower than it: sends until ripe, throttled, seconds, sends, throttles a load limit explains
        self._slow = [0, 0, 0.0, 0, 0.0]
        #: the reference second before the first cut: [start, refused, sends], while it is the reference
        self._pre: Optional[list] = None
        self._best_passed = 0.0                #: the best pass rate a probe measured (reset by noise only)
        self._rate_before_cuts: Optional[float] = None  #: the rate before the first cut of the series
        self._in_series = False
        self._quiet = 0                        #: answers in a row without a throttle
        self._recent: Deque[bool] = deque(maxlen=50)
        self.noise = 0.0                       #: throttled share learnt as load-independent
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
        self._answers = 0                      #: answers that were not throttles
        self.timeouts = 0
        self.cuts = 0
        #: changes whenever the bucket's schedule is redrawn (a cut, an undo): a request that reserved its send
        #: time before must reserve again rather than go out at the old pace
        self.schedule = 0
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
        self._next_send = start + 1.0 / rate
        return max(0.0, start - now)

    def sent(self, now: Optional[float] = None) -> float:
        """Record a request going out now; returns the send time (to pass back with its answer)."""
        now = self.clock() if now is None else now
        sends = self._sends
        sends.append(now)
        self._probe_sends += 1
        if self._probe_start is None:
            self._probe_start = now
        if (self._probe_ripe is None and self._probe_sends >= self.probe_sends
                and now - self._last_cut >= self.round):
            self._probe_ripe = self._probe_sends
        while sends[0] < now - 1.0:
            sends.popleft()
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
        scale = (self._w_max - self._w_low) / (k ** 3) if k > 0 else 0.0
        if t > k:  # beyond the old rate: at least AWS's absolute probing speed, whatever the depth of the cut
            scale = max(scale, 0.4)
            t = max(k, t - self._plateau)  # a measured limit is held a while before it is probed again
        grown = self._w_max + scale * (t - k) ** 3
        cap = max(2.0 * self.measured_rate(now), self.min_rate, self._w_low)
        rate = max(self.min_rate, min(grown, cap))
        if self.ceiling_rps is not None:
            rate = min(rate, self.ceiling_rps)
        self.rate = rate
        return rate

    # -- what came back ---------------------------------------------------------------------------------
    def answered(self, sent_at: float, latency: float, now: Optional[float] = None) -> None:
        """A non-throttled answer (any status but a throttle) that took ``latency`` seconds."""
        now = self.clock() if now is None else now
        self._recent.append(False)
        self._answers += 1
        self._quiet += 1
        if self._quiet >= 30 and self._in_series:
            self._end_series()  # 30 answers in a row without a throttle: the limit, if any, is found
        self._latency(sent_at, latency, now)

    def throttle(self, sent_at: float, retry_after: Optional[float] = None, now: Optional[float] = None) -> float:
        """A throttle of the request sent at ``sent_at``; seconds every other request should hold (0: none)."""
        now = self.clock() if now is None else now
        self.throttled += 1
        self._throttled_at.append(sent_at)
        while self._throttled_at[0] < now - 1.0:
            self._throttled_at.popleft()
        self._recent.append(True)
        self._quiet = 0
        if sent_at >= self._last_cut:
            self._probe_throttled += 1
        else:
            pre = self._pre
            if pre is not None and self._ref is not None and sent_at >= pre[0] and self._ref[2] == pre[2]:
                pre[1] += 1  # one more of the reference second's requests refused (the first cut came at its first)
                self._ref = (self._ref[0], min(1.0, pre[1] / pre[2]), pre[2])
            return 0.0  # sent before the last cut: it answers for the old rate
        if self.rate is None:
            if not self._over_noise() or (self._lat_ewma is None and len(self._sends) < self.probe_sends):
                return 0.0  # (a throttle of the very first requests says nothing about the pace to cut from)
            return self._first_cut(now, retry_after)
        if now - self._last_cut < self.round or self._probe_sends < self.probe_sends or not self._over_noise():
            return 0.0
        ripe = self._probe_ripe or self._probe_sends
        # the probe's sends are paced at 1/rate from its first: count that first interval too
        span = max(1e-3, now - (self._probe_start or self._last_cut) + 1.0 / max(self.rate, self.min_rate))
        rate_now = self.current_rate(now) or self.min_rate
        if not self._in_series:  # a new series of cuts, from a bucket regrown since the last one
            self._in_series, self._rate_before_cuts, self._ref = True, rate_now, None
        probe_rate = self._probe_sends / span
        # the probe ends at the first throttle once it is long enough (this one): the share is that of the sends
        # until then, without this throttle (what follows is throttle-free by construction)
        share = min(1.0, (self._probe_throttled - 1) / ripe)
        passed = max(0.0, (self._probe_sends - self._probe_throttled) / span)
        if self._is_noise(probe_rate, span, ripe):
            self._undo(self._slow[1] / max(1, self._slow[0]), now)
            return 0.0
        if self._ref is None or probe_rate >= self._ref[0]:
            self._ref = (probe_rate, share, ripe)  # the series' fastest probe: what slower ones are tested against
            self._slow = [0, 0, 0.0, 0, 0.0]
        if self._probe_throttled >= 2:  # saturated (throttled before the end): its pass rate is the limit's
            self._best_passed = max(self._best_passed, passed)
        if span > 1.0:  # a long probe spans the regrowth: the last second is the one that reached the limit
            recent = self.measured_rate(now) - sum(1 for t in self._throttled_at if t >= now - 1.0)
            passed = max(passed, recent)
        estimate = min(rate_now, passed) if passed > 0 else rate_now
        self.limit_estimate = estimate
        low = max(self.soft_beta * estimate, self.floor * self._best_passed, self.min_rate)
        return self._cut(now, min(estimate, rate_now), min(low, rate_now), retry_after, plateau=self.plateau)

    def timed_out(self, sent_at: float, now: Optional[float] = None) -> None:
        """The request sent at ``sent_at`` got no answer within the time-out: halve the concurrency."""
        now = self.clock() if now is None else now
        self.timeouts += 1
        self._shrink(sent_at, now, 0.5)

    # -- internals --------------------------------------------------------------------------------------
    def _first_cut(self, now: float, retry_after: Optional[float]) -> float:
        """The first throttle: the pace the client had, times ``beta``. Early in a run the last second holds
        few sends; the pace the concurrency allows at the latency seen is then the better estimate."""
        pace = self.concurrency / self._lat_ewma if self._lat_ewma else 0.0
        base = max(self.measured_rate(now), pace, self.min_rate)
        self._rate_before_cuts = math.inf
        self._in_series = True
        # the second before the cut is the first reference: a share of refusals that stays the same at the slower
        # rate is noise. (A server's burst may have hidden a limit then: the share rises at the slower rate, which
        # the noise test does not take for noise.)
        sends = len(self._sends)  # (measured_rate dropped the sends older than a second)
        thrown = sum(1 for t in self._throttled_at if t >= now - 1.0)
        self._ref = (base, min(1.0, thrown / sends), sends) if sends >= self.probe_sends else None
        self._pre = [now - 1.0, thrown, sends] if self._ref is not None else None
        self._slow = [0, 0, 0.0, 0, 0.0]
        return self._cut(now, base, max(self.min_rate, self.beta * base), retry_after)

    def _cut(self, now: float, back_to: float, low: float, retry_after: Optional[float],
             plateau: float = 0.0) -> float:
        if self.ceiling_rps is not None:
            low, back_to = min(low, self.ceiling_rps), min(back_to, self.ceiling_rps)
        self._w_max, self._w_low = max(back_to, low), low
        self.rate = low
        self.min_seen = low if self.min_seen is None else min(self.min_seen, low)
        self._last_cut = self._curve_start = now
        self._plateau = plateau
        self._probe_sends = self._probe_throttled = 0
        self._probe_start = self._probe_ripe = None
        self.cuts += 1
        hold = min(retry_after or 0.0, self.hold)
        # the send times reserved at the old rate are void: those requests reserve again (see ``schedule``)
        self._next_send = now + max(hold, 1.0 / low)
        self.schedule += 1
        self.held_s += hold
        return hold

    def _is_noise(self, rate: float, span: float, ripe: int) -> bool:
        """Whether the probes sent clearly slower than the fastest one of the series are throttled clearly more
        often than a limit that depends on the load allows. The slower probes are pooled (16 sends at least) so
        that one unlucky probe does not decide."""
        if self._ref is None:
            return False
        r0, s0, n0 = self._ref
        if rate > 0.85 * r0:  # (a probe's measured rate runs a little above the bucket's: 0.7x shows as 0.75-0.8x)
            return False
        slow = self._slow
        slow[0] += ripe
        slow[1] += self._probe_throttled - 1
        slow[2] += span
        slow[3] += self._probe_sends
        # what a limit that depends on the load lets through at this probe's rate, counted probe by probe (pooling
        # the rates would hide a fast probe's expected refusals)
        slow[4] += ripe * max(0.0, 1.0 - (1.0 - s0) * r0 / max(rate, 1e-9))
        if slow[0] < 16:
            return False
        share, expected = slow[1] / slow[0], slow[4] / slow[0]
        # noise keeps its share at any rate; a share that rose clearly says a burst was spent, not noise
        pooled = (slow[1] + s0 * n0) / (slow[0] + n0)
        rise = max(0.1, 2.5 * math.sqrt(pooled * (1.0 - pooled) * (1.0 / slow[0] + 1.0 / max(1, n0))))
        return expected + max(0.06, 2.0 * math.sqrt(0.09 / slow[0])) <= share <= s0 + rise

    def _over_noise(self) -> bool:
        """Whether the recent throttled share is clearly above the share learnt as noise (always, with none)."""
        if self.noise <= 0.0:
            return True
        # the noise learnt, or the run's share since if higher (it has more answers behind it)
        noise = max(self.noise, min(0.9, self.throttled / max(1, self._answers + self.throttled)))
        n = len(self._recent)
        share = sum(self._recent) / n if n else 0.0
        margin = max(0.2, 4.0 * math.sqrt(noise * (1.0 - noise) / max(n, 1)))
        return share > noise + margin

    def _end_series(self) -> None:
        self._in_series = False
        self._ref = None
        self._slow = [0, 0, 0.0, 0, 0.0]
        self._rate_before_cuts = None

    def _undo(self, share: float, now: float) -> None:
        """The cuts did not lower the throttled share: undo them and learn the share as noise."""
        answers = self._answers + self.throttled
        overall = self.throttled / answers if answers else share  # the run's share: the most answers to go on
        self.noise = max(self.noise, min(max(share, overall), 0.9))
        before = self._rate_before_cuts
        if before is None or math.isinf(before):
            self.rate = None
        else:  # back on the plateau of a curve at the old rate, probing beyond it as before
            self.rate = self._w_max = before
            self._w_low = self.soft_beta * before
            self._curve_start = now - self.recovery
            self._plateau = 0.0
        self._next_send = -math.inf
        self.schedule += 1
        self._best_passed = 0.0
        self._end_series()
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
        est = self.limit_estimate
        return {
            "policy": "adaptive",
            "final_rps": None if rate is None else round(rate, 3),
            "min_rps": None if self.min_seen is None else round(self.min_seen, 3),
            "limit_estimate_rps": None if est is None or self.rate is None else round(est, 3),
            "throttled": self.throttled, "cuts": self.cuts, "cuts_undone": self.undone,
            "noise_share": round(self.noise, 4), "timeouts": self.timeouts,
            "concurrency": self.concurrency, "min_concurrency": self.min_concurrency,
            "max_concurrency": self.max_concurrency, "others_held_s": round(self.held_s, 3),
            "note": "requests/s; final_rps null: not limited at the end (no throttle, or the cuts were undone as "
                    "noise); min_rps null: never cut; limit_estimate_rps: the pass rate of the last probe that "
                    "cut (the provider's limit, if it depends on the load). See ragmeter.judge.rate",
        }
