"""Whether a failed call is tried again on the same candidate before the walk moves on, and after how long.

A retry happens only where the router still can fall back: before any byte reached the caller (a
stream's failures after its first chunk never come here). And only for a failure that is safe to
repeat and likely to pass on a second try, by error class alone (a table, ``FAST`` and ``SLOW``):

- ``FAST``: nothing was done, or the upstream said "not now": refused connections (``ConnectFailed``:
  nothing was sent), a 5xx (``ServerError``), a 429 (``RateLimited``). They fail in milliseconds, so a
  retry costs little beside the fallback's own time: retried on any candidate;
- ``SLOW``: a connect or first-byte timeout. A second try costs the whole deadline again, while the
  next candidate may answer at once (an upstream that never answers cost 60 s, and a silent route
  retried cost other gateways 90-130 s: issue 40): retried only on the walk's last candidate, where
  the alternative is an error;
- never: a reset or cut after the request went (``ProtocolFailure``: the upstream may have done the
  work, and billed it), a total timeout, any 4xx but 429, a malformed answer.

The wait: a ``Retry-After`` (or ``retry-after-ms``) is honoured up to the policy's
``retry_after_max_s``; a longer one moves on at once (the candidate's rate-limit hold already keeps
other requests off it for that long). Else ``backoff_s`` doubled for each earlier retry, each wait a
random 50-100 % of it (jitter: replicas and requests that failed together do not come back together).
No wait goes past the caller's own deadline (``Preflight.deadline``: the timeout its SDK sends), and
the waits of one walk, all candidates together, stay within the policy's ``retry_after_max_s`` (the
router's budget: three candidates each asking for 4 s cost 4 s, not 12).
"""

from __future__ import annotations

import random

from interlock.runtime.base.errors import (
    ConnectFailed,
    ConnectTimeout,
    FirstByteTimeout,
    RateLimited,
    ServerError,
    TransientError,
)
from interlock.runtime.loaded.tables import RetryPolicy

FAST: tuple[type[TransientError], ...] = (ConnectFailed, ServerError, RateLimited)
SLOW: tuple[type[TransientError], ...] = (ConnectTimeout, FirstByteTimeout)


def wait_before_retry(
    policy: RetryPolicy, error: TransientError, retries: int, *, last: bool, rng: random.Random
) -> float | None:
    """Seconds to wait before trying the candidate again after ``error``, having retried it
    ``retries`` times already; None: move on. ``last``: no candidate follows it in the walk."""
    if retries >= policy.count:
        return None
    if not isinstance(error, FAST) and not (last and isinstance(error, SLOW)):
        return None
    said: float | None = error.retry_after if isinstance(error, RateLimited | ServerError) else None
    if said is not None:
        return said if said <= policy.retry_after_max_s else None
    return policy.backoff_s * 2.0**retries * rng.uniform(0.5, 1.0)
