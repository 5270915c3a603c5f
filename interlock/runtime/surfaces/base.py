"""What a surface provides (one wire format's edge), and how any request's end is worded before a
surface renders it."""

from __future__ import annotations

import abc
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from interlock.runtime.base.asgi import Header, Scope, json_type
from interlock.runtime.base.errors import (
    BodyTooLarge,
    ClientError,
    GatewayError,
    InvalidRequest,
    scrub,
    whole_seconds,
)
from interlock.runtime.books.record import Answered, CandidateRefused
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.wire.base import ChatStream, Native, Relayed
from interlock.runtime.wire.base import StreamRender as StreamRender  # what ``Surface.stream`` returns
from interlock.runtime.wire.fields import DROPS, OUTPUT_LIMITS, RELAY_DROPS, Limit, limited
from interlock.runtime.wire.openai_chat import NO_EXTRAS, error_body, error_type

log = logging.getLogger("interlock.requests")


@dataclass(slots=True)
class Parsed:
    """A request in the internal form, as a surface's wire module made it; read-only once made (not
    frozen: a frozen dataclass costs a microsecond per request to build; a change is a ``replace``).

    ``operation`` is the router's (``chat`` | ``embeddings``) and the metrics' endpoint label; ``body``
    is Chat-shaped (what the guards, the router and the adapters read; the fields each adapter takes
    are ``wire/fields.py``'s table); ``echo`` is the model name answers give back (the caller's; the
    lifecycle puts the default alias's name there when the caller named none); ``dropped`` names what
    the caller sent that the internal form cannot carry (said in ``X-Interlock-Dropped``); ``native``
    is the request in the caller's own format, for a candidate of that format (a same-format relay).
    ``extras`` is what the caller's format keeps from the request to render its answers, by name:
    Chat's ``usage_asked`` (the caller asked for the stream's usage chunk itself), Responses'
    ``namespaces`` (the group of each tool flattened out of a ``namespace`` tool)."""

    operation: str
    model: str | None
    stream: bool
    body: dict[str, Any]
    echo: str | None = None
    dropped: tuple[str, ...] = ()
    extras: Mapping[str, Any] = field(default_factory=lambda: NO_EXTRAS)  # one shared empty one
    native: Native | None = None

    def relayed(self, relays: frozenset[str]) -> Native | None:
        """The caller's own request when a candidate that relays ``relays`` got it (and answers in its
        format), else None."""
        native = self.native
        return native if native is not None and native.format in relays else None


def chat_request(
    model: str | None,
    stream: bool,
    internal: dict[str, Any],
    dropped: Sequence[str] = (),
    extras: Mapping[str, Any] = NO_EXTRAS,
    native: Native | None = None,
) -> Parsed:
    """A chat request translated into the internal form, echoing the caller's model name; a stream asks
    the upstream for its usage too (the metrics count it)."""
    if stream:
        internal["stream"] = True
        internal["stream_options"] = {"include_usage": True}
    return Parsed("chat", model, stream, internal, model, tuple(dropped), extras, native)


def check_model(body: Mapping[str, Any]) -> str | None:
    model = body.get("model")
    if model is None or (isinstance(model, str) and model):
        return model
    if isinstance(model, str):
        raise InvalidRequest("`model` must not be empty", param="model")
    raise InvalidRequest(f"`model` must be a string, not {json_type(model)}", param="model")


MAX_OUTPUT_TOKENS = 2**31 - 1
"""The largest output ceiling a caller may ask for: the int32 range every engine's parser takes
(llama.cpp's ``n_predict``), so a bigger one is the caller's 400 here, not an upstream's overflow."""

Field = Limit  # a field of a request body: ``("max_tokens",)``, ``("options", "num_predict")``


def check_output_limits(body: Mapping[str, Any], fields: Sequence[Field], unbounded: frozenset[int]) -> None:
    """400 naming the field when an output ceiling the caller sent (any of ``fields``; null counts as
    not sent) is not an integer from 1 to ``MAX_OUTPUT_TOKENS`` (booleans and floats are not integers);
    ``unbounded``: the values the format gives the meaning "no ceiling" (Ollama's -1 and -2)."""
    for field_ in fields:
        value: Any = body.get(field_[0])  # most requests set none: one lookup each
        if value is None:
            continue
        for key in field_[1:]:
            value = value.get(key) if type(value) is dict else None
        if value is None or (type(value) is int and (0 < value <= MAX_OUTPUT_TOKENS or value in unbounded)):
            continue
        name = ".".join(field_)
        shown = json_type(value) if type(value) is not int and type(value) is not float else repr(value)
        raise InvalidRequest(
            f"`{name}` must be a positive integer of at most {MAX_OUTPUT_TOKENS}, not {shown[:40]}",
            param=name,
        )


CHAT_LIMITS = OUTPUT_LIMITS["openai"]
"""The output ceilings of a Chat request, the internal form's too (the adapters read each)."""


def capped(parsed: Parsed, ceiling: int, fields: Sequence[Field]) -> Parsed:
    """``parsed`` with its output ceiling at most ``ceiling``, in the internal form and in the caller's
    own request (``fields``: its format's ceilings) for a same-format relay; where none was set, the
    format's first is (``wire.fields.limited``, clamping). Only on the rare path where credits cut a
    ceiling."""
    body = limited(parsed.body, CHAT_LIMITS, ceiling, clamp=True)
    native = parsed.native
    if native is not None:
        relayed = body if native.body is parsed.body else limited(native.body, fields, ceiling, clamp=True)
        if relayed is not None:
            native = Native(native.format, relayed, native.headers)
    if body is None and native is parsed.native:
        return parsed
    return replace(parsed, body=parsed.body if body is None else body, native=native)


def check_stream(body: Mapping[str, Any]) -> bool:
    stream = body.get("stream")
    if stream is None:
        return False
    if not isinstance(stream, bool):
        raise InvalidRequest(f"`stream` must be a boolean, not {json_type(stream)}", param="stream")
    return stream


# a request translated: the internal form, the names of what it cannot carry, the extras its answers need
Translation = tuple[dict[str, Any], Sequence[str], Mapping[str, Any]]


@dataclass(slots=True)
class Failure:
    """Anything a request can end with, before a surface words it."""

    status: int
    message: str
    type: str
    param: str | None = None
    code: str | None = None
    headers: list[Header] = field(default_factory=list)
    # interlock's own class where ``code`` is the upstream's own (a 4xx passed on): both are said
    gateway_code: str | None = None


def openai_error(failure: Failure) -> bytes:
    """``failure`` as the OpenAI error body (Chat Completions and Responses answer errors alike)."""
    return error_body(
        failure.message,
        failure.type,
        param=failure.param,
        code=failure.code,
        gateway_code=failure.gateway_code,
    )


class Surface(abc.ABC):
    """One wire format's edge: parse into the internal form; render answers, streams and errors."""

    operation = "chat"  # the metrics' endpoint label for a request that ends before it is parsed
    name = "openai"  # the access log's `surface`: its wire format
    route = "chat"  # the access log's `endpoint`
    # the fields a caller sets its output ceiling with, in this format (``check_output_limits``)
    limits: tuple[Field, ...] = ()
    unbounded: frozenset[int] = frozenset()  # ceiling values that mean "none" in this format
    # request headers a relayed request goes upstream with (a ClassVar: `request/count_tokens.py` reads
    # the class's, which a mypyc-compiled class keeps only so: bench/mypyc_build.sh)
    forwards: ClassVar[frozenset[bytes]] = frozenset()

    @abc.abstractmethod
    def parse(self, body: dict[str, Any]) -> Parsed:
        """The internal form; raises ``InvalidRequest`` (or another ``GatewayError``)."""

    @abc.abstractmethod
    def answer(self, parsed: Parsed, result: dict[str, Any], candidate: str) -> bytes:
        """The answer body (JSON) for an OpenAI-shaped ``result`` answered by ``candidate``."""

    @abc.abstractmethod
    def stream(self, parsed: Parsed, candidate: str) -> StreamRender: ...

    @abc.abstractmethod
    def error(self, failure: Failure) -> bytes:
        """The JSON error body."""


class Translated(Surface):
    """A chat surface whose requests its wire module translates (``translate``); ``relays``: the
    provider kind that speaks this format, which gets the request as it came (a same-format relay)."""

    relays: str | None = None

    @abc.abstractmethod
    def translate(self, body: dict[str, Any]) -> Translation: ...

    def parse(self, body: dict[str, Any]) -> Parsed:
        model = check_model(body)
        stream = check_stream(body)
        check_output_limits(body, self.limits, self.unbounded)
        internal, dropped, extras = self.translate(body)
        native = Native(self.relays, body) if self.relays is not None else None
        return chat_request(model, stream, internal, dropped, extras, native)


def failure_of(exc: BaseException, plan: RuntimePlan) -> Failure:
    """Status, wording and extra headers for anything a request can end with, on any surface."""
    if isinstance(exc, GatewayError):
        extra: list[Header] = []
        if exc.retry_after is not None:
            extra.extend(retry_after_headers(exc.retry_after))
        if isinstance(exc, BodyTooLarge):
            extra.append((b"connection", b"close"))
        return Failure(exc.status, exc.message, exc.type, exc.param, exc.code, extra)
    if isinstance(exc, CandidateRefused):  # a 4xx (a malformed answer falls back: a TransientError)
        cid, error = exc.candidate.id, exc.error
        status = error.status or 400
        if status in (401, 403):
            provider = exc.candidate.provider
            message = f"upstream {cid} refused the gateway's credentials for {provider} ({status})"
        else:
            message = f"upstream {cid} answered {status}: {scrub(error.message, plan.secrets)}"
        headers = [exc.candidate.resolved_header]
        code = error.code if isinstance(error, ClientError) else None
        if code is None or status in (401, 403):  # the gateway's key, not the caller's
            return Failure(status, message, error_type(status), None, "upstream_error", headers)
        return Failure(status, message, error_type(status), None, code, headers, "upstream_error")
    log.error("unexpected error while answering a request", exc_info=exc)
    return Failure(500, "internal error in the gateway", "server_error", None, "internal_error")


def retry_after_headers(seconds: float) -> tuple[Header, Header]:
    """``Retry-After`` in whole seconds, rounded up, and ``Retry-After-Ms`` (the OpenAI SDKs read it)."""
    return (
        (b"retry-after", b"%d" % whole_seconds(seconds)),
        (b"retry-after-ms", b"%d" % max(1, math.ceil(seconds * 1000))),
    )


# -- what a request's forwarded headers and dropped fields are (the lifecycle's, per answer) ----------

MAX_DROPPED_NAMES = 16  # field names listed in X-Interlock-Dropped
# forwarded headers that ask a provider for behaviour (betas): a translated request goes without them,
# so they are named in X-Interlock-Dropped (``anthropic-version`` is not: the surface speaks it itself)
RELAY_ONLY_HEADERS = frozenset({"anthropic-beta", "openai-beta"})
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def forwarded(parsed: Parsed, scope: Scope, names: frozenset[bytes]) -> Parsed:
    """``parsed`` with the request headers named in ``names`` (a surface's ``forwards``) in its native
    request; ``parsed`` itself when there are none (no copy)."""
    native = parsed.native
    assert native is not None
    headers: dict[str, str] | None = None  # a loop, not a comprehension: most requests have none
    for name, value in scope["headers"]:
        if name in names:
            if headers is None:
                headers = {}
            headers[name.decode("latin-1")] = value.decode("latin-1")
    return parsed if headers is None else replace(parsed, native=Native(native.format, native.body, headers))


def with_usage(result: Any, usage: dict[str, int]) -> Any:
    """A chat answer with ``usage`` in place of the upstream's (an answer that reported none: the
    estimate); a relayed answer (``Relayed``) stays the upstream's own for its caller."""
    changed = {**result, "usage": usage}
    return Relayed(changed, result.native) if type(result) is Relayed else changed


def say_dropped(
    headers: list[Header], answered: Answered[Any] | Answered[ChatStream], endpoint: str, parsed: Parsed
) -> None:
    """``X-Interlock-Dropped``: the request's fields the answering candidate's upstream never got (those
    the surface could not put in the internal form first); for a relayed request, only what its format's
    relay still leaves out (``RELAY_DROPS``: none but the OpenAI chat relay's Ollama-native fields)."""
    native = parsed.relayed(answered.candidate.relays)
    if native is not None:
        drops = RELAY_DROPS.get(native.format)
        dropped = drops.of(native.body) if drops is not None else []
    else:
        dropped = DROPS[answered.candidate.kind, endpoint].of(parsed.body)
        if parsed.dropped:
            dropped = [*parsed.dropped, *dropped]
        if parsed.native is not None and parsed.native.headers:  # betas only a relay takes along
            dropped = [*dropped, *(name for name in parsed.native.headers if name in RELAY_ONLY_HEADERS)]
    if dropped:
        # the names come from the caller: only plain ones go into a header, at most MAX_DROPPED_NAMES
        shown = [name for name in dropped if _PLAIN_NAME.fullmatch(name)][:MAX_DROPPED_NAMES]
        if len(shown) < len(dropped):
            shown.append(f"+{len(dropped) - len(shown)} more")
        headers.append((b"x-interlock-dropped", ", ".join(shown).encode()))
