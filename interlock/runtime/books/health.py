"""Health and circuit breakers, keyed per candidate (``provider/model``) and per endpoint (worker/provider).

Passive: every real call reports its outcome. ``failure_threshold`` consecutive transient failures open
the candidate's circuit; connect failures also count towards the endpoint's own circuit (a dead box is
dead for every model). A 429 opens the candidate for ``rate_limit_open_for`` or the upstream's
``Retry-After``, apart from the failure streak. Any success closes both at once.

Half-open trials on a backoff: a circuit opens for an eighth of ``open_for`` at first (``FIRST_TRIAL``;
7.5 s of the default 60 s), then twice as long each time it opens again without a success in between,
up to ``open_for`` (7.5, 15, 30, 60, 60 ... s); each period is drawn between
``1 - JITTER`` and 1 times its step, so replicas (and the candidates of one dead box) do not try in
step. An expired period lets the next real request through (the trial: the streak stays, so one more
failure re-opens at once, at the next step); ``next_trial_at`` in the report says when.

Active: probes mark an endpoint unhealthy on failure and healthy on success; a probe that passes on an
endpoint whose circuit is open (connect failures opened it: the probe connected) brings its trial
forward to now. While a candidate's circuit is open, ``books/recovery.py`` checks it (``record_check``):
a check that passes brings its trial forward to now when it is evidence that the failure is over: a
real generation (``strong``), or a lighter check (its endpoint's probe) where the circuit was opened by
connect failures, or where a check failed since it opened (the server's own state went back to good).
A timeout on an endpoint that answered another call while the timed-out call ran is slow, not dead (a
long prefill, a queue in the server's own slots): it is noted, and does not count towards the failure
streak; only ``SLOW_FACTOR`` times ``failure_threshold`` of them in a row open the circuit. A probe that
answered is no such sign: a server answers its model list while one model hangs.

The state survives plan reloads (keys are ids, not plan objects). Reports hold labels, times, status
codes and short error classes only: never bodies, messages or credentials.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from typing import Any

from interlock.runtime.base.clock import Clock
from interlock.runtime.base.errors import (
    ConnectFailed,
    ConnectTimeout,
    FirstByteTimeout,
    RateLimited,
    TotalTimeout,
    TransientError,
    UpstreamError,
)
from interlock.runtime.books.circuits import CandidateState, EndpointState, Hold
from interlock.runtime.loaded.tables import HealthSettings, Route

Listener = Callable[[str, float], None]
"""Told when an endpoint is found down (seconds to hold it open) or back (0): a shared store's hook."""
CandidateListener = Callable[[str, float], None]
"""Told when a candidate's circuit opens (seconds until its trial) or closes (0): a shared store's hook."""

MAX_RETRY_AFTER_S = 3600.0  # an upstream's Retry-After is honoured up to an hour
SLOW_FACTOR = 3  # slow timeouts in a row open the circuit only at this many times the threshold
MAX_AD_HOC_STATES = 1024  # raw provider/model names come from callers: keep their state bounded
FIRST_TRIAL = 0.125  # a circuit's first open period, of ``open_for``; each reopening doubles it
MIN_TRIAL_S = 1.0  # (never shorter than this, nor longer than ``open_for``)
JITTER = 0.25  # an open period is drawn in [1 - JITTER, 1] times its step
SHARED_JITTER = 0.2  # a circuit another replica opened: its trial here up to this much later


class HealthBook:
    """The mutable health state of one gateway process. ``clock`` is monotonic, ``wall`` epoch seconds."""

    def __init__(
        self,
        settings: HealthSettings,
        *,
        clock: Clock = time.monotonic,
        wall: Clock = time.time,
        rng: random.Random | None = None,
    ):
        self.settings = settings
        self.clock = clock
        self.wall = wall
        self.rng = rng if rng is not None else random.Random()  # the trials' jitter
        self._candidates: dict[str, CandidateState] = {}
        self._ad_hoc: dict[str, CandidateState] = {}
        self._endpoints: dict[str, EndpointState] = {}
        self.listener: Listener | None = None
        self.candidate_listener: CandidateListener | None = None
        self.opened: Callable[[], None] | None = None  # told when a circuit opens (the recovery checks)

    def configure(self, settings: HealthSettings) -> None:
        """New thresholds after a reload; the state itself is kept."""
        self.settings = settings

    # -- lookups ------------------------------------------------------------------------------------

    def candidate(self, cid: str, *, in_plan: bool = True) -> CandidateState:
        state = self._candidates.get(cid)
        if state is not None:
            return state
        if in_plan:
            state = self._candidates[cid] = CandidateState()
            return state
        state = self._ad_hoc.get(cid)
        if state is None:
            if len(self._ad_hoc) >= MAX_AD_HOC_STATES:
                del self._ad_hoc[next(iter(self._ad_hoc))]
            state = self._ad_hoc[cid] = CandidateState()
        return state

    def endpoint(self, label: str) -> EndpointState:
        state = self._endpoints.get(label)
        if state is None:
            state = self._endpoints[label] = EndpointState()
        return state

    def candidate_block(self, cid: str, *, in_plan: bool = True) -> str | None:
        """Why the candidate must be skipped now (``circuit_open``/``rate_limited``), else None."""
        reason = self.usable(cid, (), in_plan=in_plan)
        return reason if isinstance(reason, str) else None

    def hold(self, cid: str, labels: Iterable[str], *, in_plan: bool = True) -> Hold | None:
        """When a candidate that cannot be used now becomes usable again, and what put it on hold.

        Its own rate-limit hold or circuit first (the later of the two when both are on); else, when
        every endpoint it may use has an open circuit, the earliest of those. None when it is usable now,
        or when no time is known (an endpoint whose probe failed stays down until a probe succeeds).
        """
        state = self.candidate(cid, in_plan=in_plan)
        now = self.clock()
        open_, limited = state.open_until > now, state.rate_limited_until > now
        if open_ or limited:
            until = max(state.open_until if open_ else 0.0, state.rate_limited_until if limited else 0.0)
            reason = "circuit_open" if open_ else "rate_limited"
            return Hold(reason, until - now, state.last_error_class, state.last_error_status)
        earliest: EndpointState | None = None
        for label in labels:
            ep = self._endpoints.get(label)
            if ep is None or not ep.probe_ok or ep.open_until <= now:
                return None  # usable now, or down for a time nobody knows
            if earliest is None or ep.open_until < earliest.open_until:
                earliest = ep
        if earliest is None:
            return None
        return Hold("circuit_open", earliest.open_until - now, earliest.last_error_class, None)

    def usable(self, cid: str, routes: tuple[Route, ...], *, in_plan: bool = True) -> str | tuple[Route, ...]:
        """Why the candidate must be skipped now (``candidate_block``'s reasons, or ``unhealthy`` when
        none of its endpoints is usable), else the routes usable now (``routes`` itself when all are):
        the health guard's one call, one clock reading."""
        state = self._candidates.get(cid)
        if state is None and not in_plan:
            state = self._ad_hoc.get(cid)
        now = self.clock()
        if state is not None:  # none yet: nothing failed, nothing is open
            if state.open_until > now:
                return "circuit_open"
            if state.rate_limited_until > now:
                return "rate_limited"
        endpoints = self._endpoints
        for route in routes:
            ep = endpoints.get(route.endpoint.label)
            if ep is not None and not (ep.probe_ok and ep.open_until <= now):
                break
        else:
            return routes
        kept = tuple(r for r in routes if self.endpoint_usable(r.endpoint.label))
        return kept if kept else "unhealthy"

    def endpoint_usable(self, label: str) -> bool:
        state = self._endpoints.get(label)
        return state is None or (state.probe_ok and state.open_until <= self.clock())

    # -- passive updates ----------------------------------------------------------------------------

    def record_success(self, cid: str, label: str, *, in_plan: bool = True) -> None:
        """The candidate answered: it is the one selected, and both its circuits close."""
        state = self.candidate(cid, in_plan=in_plan)
        was_open = state.opened > 0
        state.failures = state.slow_streak = state.opened = 0
        state.open_until = 0.0
        state.rate_limited_until = 0.0
        state.check_failed = state.connect_opened = False
        state.last_success_at = self.wall()
        if was_open:
            self._tell(cid, state, 0.0)
        ep = self.endpoint(label)
        was_down = not ep.probe_ok or ep.open_until > 0.0
        ep.failures = ep.opened = 0
        ep.open_until = 0.0
        ep.probe_ok = True
        ep.last_success_at = state.last_success_at
        if was_down and self.listener is not None:
            self.listener(label, 0.0)

    def record_failure(
        self,
        cid: str,
        label: str,
        error: UpstreamError,
        *,
        in_plan: bool = True,
        spent_s: float | None = None,
        busy: bool = False,
    ) -> None:
        """Deterministic errors are noted but do not count: the upstream answered. A first-byte timeout
        while the server reported progress (``busy``: the load signals saw it working) never counts. A
        timeout of a call that took ``spent_s``, on an endpoint that answered another call meanwhile, is
        slow, not dead: noted (``slow_timeouts``), and only ``SLOW_FACTOR`` times the threshold of them in
        a row opens the circuit (a model that hangs while its server answers probes)."""
        state = self.candidate(cid, in_plan=in_plan)
        now, wall = self.clock(), self.wall()
        state.last_error_at = wall
        state.last_error_status = error.status
        state.last_error_class = error.error_class
        if isinstance(error, RateLimited):
            hold = error.retry_after if error.retry_after is not None else self.settings.rate_limit_open_for_s
            state.rate_limited_until = now + min(max(hold, 0.0), MAX_RETRY_AFTER_S)
            return
        if not isinstance(error, TransientError):
            return
        timeout = isinstance(error, FirstByteTimeout | TotalTimeout)
        if busy and isinstance(error, FirstByteTimeout):
            state.busy_timeouts += 1
            return
        if timeout and spent_s is not None and self._working(label, wall - spent_s):
            state.slow_timeouts += 1
            state.slow_streak += 1
            if state.slow_streak >= self.settings.failure_threshold * SLOW_FACTOR:
                self._open(cid, state, now, connect=False)  # slow every time: a hung model
            return
        state.failures += 1
        connect = isinstance(error, ConnectFailed | ConnectTimeout)
        if state.failures >= self.settings.failure_threshold:
            self._open(cid, state, now, connect=connect)
        if connect:
            ep = self.endpoint(label)
            ep.failures += 1
            ep.last_error_at = wall
            ep.last_error_class = error.error_class
            if ep.failures >= self.settings.failure_threshold:
                opening = ep.open_until <= now
                ep.open_until = now + self._period(ep.opened)
                ep.opened += 1
                if opening and self.listener is not None:
                    self.listener(label, ep.open_until - now)

    def _period(self, opened: int) -> float:
        """The open period at backoff step ``opened``: an eighth of ``open_for`` (``FIRST_TRIAL``, at
        least ``MIN_TRIAL_S``) doubled per step, at most ``open_for``, drawn in ``[1 - JITTER, 1]``
        times that."""
        longest = self.settings.open_for_s
        first = max(longest * FIRST_TRIAL, MIN_TRIAL_S)
        step = longest if opened >= 32 else min(first * 2.0**opened, longest)
        return step * (1.0 - JITTER * self.rng.random())

    def _open(self, cid: str, state: CandidateState, now: float, *, connect: bool) -> None:
        """Open (or reopen, after a failed trial) the candidate's circuit at its next backoff step."""
        state.open_until = now + self._period(state.opened)
        state.opened += 1
        state.connect_opened = connect
        state.check_failed = False
        self._tell(cid, state, state.open_until - now)
        if self.opened is not None:
            self.opened()

    def _working(self, label: str, since: float) -> bool:
        """Whether the endpoint answered a call at or after ``since`` (wall clock); a probe does not
        count: a server whose model hangs still answers its model list."""
        ep = self._endpoints.get(label)
        return ep is not None and ep.last_success_at is not None and ep.last_success_at >= since

    # -- active updates -----------------------------------------------------------------------------

    def record_probe(self, label: str, error: UpstreamError | None) -> None:
        """A probe of the endpoint; one that passes where connect failures opened its circuit brings
        the trial forward to now (the probe connected: the next call may try)."""
        ep = self.endpoint(label)
        ep.last_probe_at = self.wall()
        was_ok = ep.probe_ok
        if error is None:
            ep.probe_ok = True
            ep.last_probe_error = None
            now = self.clock()
            if ep.open_until > now:
                ep.open_until = now
        else:
            ep.probe_ok = False
            ep.last_probe_error = error.error_class
        if was_ok != ep.probe_ok and self.listener is not None:
            self.listener(label, 0.0 if ep.probe_ok else self.settings.open_for_s)

    def record_check(self, cid: str, ok: bool, *, strong: bool, in_plan: bool = True) -> bool:
        """An active check of a candidate whose circuit is open (``books/recovery.py``); ``strong``: it
        generated (a 1-token request), else it only reached the model's server (its probe). Returns
        whether it brought the trial forward to now: a pass that is evidence the failure is over (see
        the module docstring)."""
        state = self.candidate(cid, in_plan=in_plan)
        state.last_check_at = self.wall()
        state.last_check_ok = ok
        now = self.clock()
        if not ok:
            state.check_failed = True
            return False
        if state.open_until <= now or not (strong or state.connect_opened or state.check_failed):
            return False
        state.open_until = now
        state.check_failed = False
        self._tell(cid, state, 0.0)
        return True

    def _tell(self, cid: str, state: CandidateState, open_for_s: float) -> None:
        """Tell the other replicas (``candidate_listener``) that a candidate of the plan opened or closed;
        one a caller named (``_ad_hoc``) stays here: they would keep it unbounded, in their plan table."""
        if self.candidate_listener is not None and self._candidates.get(cid) is state:
            self.candidate_listener(cid, open_for_s)

    def open_candidates(self) -> list[str]:
        """The candidates of the plan whose circuit is open now (the recovery checks' list)."""
        now = self.clock()
        return [cid for cid, state in self._candidates.items() if state.open_until > now]

    def unprobed(self, labels: Iterable[str]) -> None:
        """Endpoints no longer probed (a reload set ``probe: false``): what a probe said no longer
        holds (an endpoint down by its last probe would stay down, with nothing left to bring it
        back); the passive circuit state is kept."""
        for label in labels:
            ep = self._endpoints.get(label)
            if ep is not None:
                ep.probe_ok = True
                ep.last_probe_error = None

    def apply_shared(self, label: str, open_for_s: float) -> None:
        """Another replica found ``label`` down (unusable here until a probe or call succeeds) or back."""
        ep = self.endpoint(label)
        if open_for_s > 0:
            ep.probe_ok = False
            ep.last_probe_error = "shared"
        else:
            ep.probe_ok = True
            ep.failures = ep.opened = 0
            ep.open_until = 0.0

    def apply_shared_candidate(self, cid: str, open_for_s: float) -> None:
        """Another replica opened ``cid``'s circuit until its trial ``open_for_s`` from now (here up to
        ``SHARED_JITTER`` later, so that replica tries first), or closed it (0: its trial or a check
        passed). Only a candidate of this plan: what callers name freely is not shared."""
        state = self._candidates.get(cid)
        if state is None:
            state = self._candidates[cid] = CandidateState()
        now = self.clock()
        if open_for_s > 0:
            later = 1.0 + SHARED_JITTER * self.rng.random()
            until = now + min(open_for_s, self.settings.open_for_s) * later
            state.open_until = max(state.open_until, until)
            state.failures = max(state.failures, self.settings.failure_threshold)
            if self.opened is not None:
                self.opened()
        elif state.open_until > now:
            state.open_until = now  # half-open here too: the next call is this replica's trial

    # -- reports (``health_report.py``: the ops app's, imported by its first report) -------------------

    def candidate_report(self, cid: str) -> dict[str, Any]:
        from interlock.runtime.books.health_report import candidate_report

        return candidate_report(self.candidate(cid), self.clock(), self.wall())

    def endpoint_report(self, label: str) -> dict[str, Any]:
        from interlock.runtime.books.health_report import endpoint_report

        return endpoint_report(self.endpoint(label), self.clock(), self.wall())

    def reuse_off(self, label: str, seconds: float) -> None:
        """The upstream client stopped reusing ``label``'s connections for ``seconds`` (it was caught
        sending bytes nobody asked for): said in ``endpoint_report``. The endpoint stays usable."""
        self.endpoint(label).reuse_off_until = self.clock() + seconds
