"""Learned output speed and service time per (worker, model): EWMAs from real completed Ollama requests.

The only source is Ollama's own final message of a request a caller made (``eval_count`` tokens in
``eval_duration`` ns; service time ``total_duration`` less ``load_duration``; a model load's time
``load_duration``, when the request loaded its model); probes never feed it. Load times are also kept
per worker and across the fleet (any model), the fallback for a model never yet loaded there.
Keys are the worker's endpoint label and the model as Ollama names it (``LiveFacts``' keys).
Recording is one dictionary write at the end of a call; the scorer and the slot guard read it.
The book is bounded (``MAX_ENTRIES``, least recently updated dropped first).

Persistence: ``dump``/``load`` with a versioned JSON document; ``read_state``/``write_state`` keep it
in a state file, written atomically off the request path. A file that is missing starts empty; one that
is corrupt, of another version, or of another shape is ignored with a warning, never a crash.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from interlock.runtime.base.fileio import write_atomically

log = logging.getLogger("interlock.routing")

STATE_VERSION = 1
STATE_KIND = "interlock-speeds"
MAX_ENTRIES = 4096
MIN_EVAL_TOKENS = 4  # shorter answers say more about overhead than about speed
MIN_LOAD_NS = 50_000_000  # shorter: Ollama found the model loaded (a warm request reports a few ms)
FLEET = ""  # the key of the fleet-wide load time in ``_loads``


@dataclass(frozen=True, slots=True)
class Speed:
    tokens_per_s: float
    samples: int
    service_s: float | None = None  # one request's time on the worker, a model load excluded
    load_s: float | None = None  # one load of the model on the worker


class SpeedBook:
    """EWMA tokens/s per (endpoint label, model); ``smoothing`` is the newest sample's weight."""

    def __init__(self, smoothing: float = 0.3, max_entries: int = MAX_ENTRIES) -> None:
        self.smoothing = smoothing
        self.max_entries = max_entries
        self._speeds: OrderedDict[tuple[str, str], Speed] = OrderedDict()
        self._loads: dict[str, float] = {}  # worker label (FLEET: all) -> EWMA load seconds, any model
        self._pending_load: dict[tuple[str, str], float] = {}  # a load seen before any speed sample
        self.changed = False  # since the last ``dump``

    def get(self, label: str, model: str) -> float | None:
        speed = self._speeds.get((label, model))
        return None if speed is None else speed.tokens_per_s

    def service(self, label: str, model: str) -> float | None:
        """Learned seconds one request of ``model`` keeps a slot on the worker (a load excluded)."""
        speed = self._speeds.get((label, model))
        return None if speed is None else speed.service_s

    def load_time(self, label: str, model: str) -> float | None:
        """Learned seconds a load of ``model`` takes on the worker: of that model there, else of any
        model there, else of any model on any worker; None before the first load seen."""
        speed = self._speeds.get((label, model))
        if speed is not None and speed.load_s is not None:
            return speed.load_s
        return self._loads.get(label, self._loads.get(FLEET))

    def observe(self, label: str, model: str, final: Mapping[str, Any]) -> None:
        """Ollama's final message of a finished chat: its output speed, service time and load time."""
        total, load = final.get("total_duration"), final.get("load_duration")
        service: int | None = None
        loaded = load if isinstance(load, int) and not isinstance(load, bool) and load > 0 else 0
        if isinstance(total, int) and not isinstance(total, bool) and total > 0:
            service = max(total - loaded, 0)
        if loaded >= MIN_LOAD_NS:
            self.record_load(label, model, loaded)
        self.record(label, model, final.get("eval_count"), final.get("eval_duration"), service)

    def record_load(self, label: str, model: str, load_ns: int) -> None:
        """One load of ``model`` on the worker took ``load_ns``."""
        sample, a = load_ns / 1e9, self.smoothing
        for key in (label, FLEET):
            old_any = self._loads.get(key)
            self._loads[key] = sample if old_any is None else a * sample + (1 - a) * old_any
        old = self._speeds.get((label, model))
        if old is not None:
            learned = sample if old.load_s is None else a * sample + (1 - a) * old.load_s
            self._speeds[(label, model)] = Speed(old.tokens_per_s, old.samples, old.service_s, learned)
        else:
            self._pending_load[(label, model)] = sample
            if len(self._pending_load) > self.max_entries:
                del self._pending_load[next(iter(self._pending_load))]
        self.changed = True

    def record(
        self, label: str, model: str, eval_count: Any, eval_duration_ns: Any, service_ns: int | None = None
    ) -> None:
        """One finished request's figures, as Ollama reported them; anything unusable is ignored."""
        if not isinstance(eval_count, int) or not isinstance(eval_duration_ns, int):
            return
        if eval_count < MIN_EVAL_TOKENS or eval_duration_ns <= 0:
            return
        sample = eval_count / (eval_duration_ns / 1e9)
        service = service_ns / 1e9 if service_ns else None
        key = (label, model)
        old = self._speeds.pop(key, None)
        if old is None:
            new = Speed(sample, 1, service, self._pending_load.pop(key, None))
        else:
            a = self.smoothing
            if service is not None and old.service_s is not None:
                # service times are heavy-tailed (short and long answers): a mean, not the last few
                b = max(1 / (old.samples + 1), a / 3)
                service = b * service + (1 - b) * old.service_s
            new = Speed(
                a * sample + (1 - a) * old.tokens_per_s,
                old.samples + 1,
                service if service is not None else old.service_s,
                old.load_s,
            )
        self._speeds[key] = new
        while len(self._speeds) > self.max_entries:
            self._speeds.popitem(last=False)
        self.changed = True

    def snapshot(self) -> dict[str, dict[str, dict[str, float | int]]]:
        """``{label: {model: {tokens_per_s, samples}}}`` for /v1/health and people."""
        out: dict[str, dict[str, dict[str, float | int]]] = {}
        for (label, model), speed in sorted(self._speeds.items()):
            entry: dict[str, float | int] = {
                "tokens_per_s": round(speed.tokens_per_s, 1),
                "samples": speed.samples,
            }
            if speed.service_s is not None:
                entry["service_s"] = round(speed.service_s, 3)
            if speed.load_s is not None:
                entry["load_s"] = round(speed.load_s, 3)
            out.setdefault(label, {})[model] = entry
        return out

    def dump(self) -> dict[str, Any]:
        self.changed = False
        return {
            "kind": STATE_KIND,
            "version": STATE_VERSION,
            "speeds": [
                {
                    "worker": label,
                    "model": model,
                    "tokens_per_s": s.tokens_per_s,
                    "samples": s.samples,
                    "service_s": s.service_s,
                    "load_s": s.load_s,
                }
                for (label, model), s in self._speeds.items()
            ],
        }

    def load(self, data: Any, origin: str) -> int:
        """Entries from a ``dump``; returns how many were taken. A foreign document: a warning, none."""
        if not isinstance(data, dict) or data.get("kind") != STATE_KIND:
            log.warning("%s: not an interlock speeds file; learned speeds start empty", origin)
            return 0
        if data.get("version") != STATE_VERSION:
            log.warning(
                "%s: speeds file version %r is not %d; learned speeds start empty",
                origin,
                data.get("version"),
                STATE_VERSION,
            )
            return 0
        rows = data.get("speeds")
        if not isinstance(rows, list):
            log.warning("%s: speeds file has no `speeds` list; learned speeds start empty", origin)
            return 0
        taken = 0
        for row in rows[-self.max_entries :]:
            if not isinstance(row, dict):
                continue
            label, model, tps, samples = (row.get(k) for k in ("worker", "model", "tokens_per_s", "samples"))
            if not (isinstance(label, str) and isinstance(model, str)):
                continue
            if not isinstance(tps, int | float) or isinstance(tps, bool) or not 0 < tps < 1e7:
                continue
            count = samples if isinstance(samples, int) and samples > 0 else 1
            kept, load = _seconds(row.get("service_s")), _seconds(row.get("load_s"))
            self._speeds[(label, model)] = Speed(float(tps), count, kept, load)
            if load is not None:
                for key in (label, FLEET):
                    self._loads[key] = load if key not in self._loads else (self._loads[key] + load) / 2
            taken += 1
        if taken < len(rows):
            log.warning("%s: %d malformed speed entries ignored", origin, len(rows) - taken)
        return taken


def _seconds(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 1e6
    return float(value) if ok else None


def read_state(book: SpeedBook, path: Path) -> None:
    """Fill ``book`` from ``path``; a missing file is a first start, anything unreadable a warning."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        log.warning("%s: cannot read learned speeds (%s); starting empty", path, exc.strerror or exc)
        return
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        log.warning("%s: learned speeds file is not valid JSON; starting empty", path)
        return
    taken = book.load(data, str(path))
    if taken:
        log.info("%s: %d learned speeds read", path, taken)


def write_state(book: SpeedBook, path: Path) -> None:
    """Write ``book`` to ``path`` atomically (call it off the event loop: it syncs to disk)."""
    text = orjson.dumps(book.dump(), option=orjson.OPT_INDENT_2).decode()
    write_atomically(str(path), text + "\n")
