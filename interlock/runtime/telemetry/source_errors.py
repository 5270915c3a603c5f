"""The exception tree of telemetry sources (drawn in the package docstring)."""

from __future__ import annotations

from interlock.runtime.base.errors import InterlockError


class TelemetryError(InterlockError):
    """A reading could not be taken; ``error_class`` is a short stable label for reports and metrics."""

    error_class = "error"


class SourceMissing(TelemetryError):
    error_class = "missing"


class SourceTimeout(TelemetryError):
    error_class = "timeout"


class SourceFailed(TelemetryError):
    error_class = "failed"


class SourceMalformed(TelemetryError):
    error_class = "malformed"


ERROR_CLASSES: tuple[str, ...] = tuple(
    cls.error_class for cls in (SourceMissing, SourceTimeout, SourceFailed, SourceMalformed)
)
