"""`connect`: print what a client (Claude Code, Codex, Open WebUI, an SDK, LiteLLM) needs to use an alias
of a running gateway, with the alias's guaranteed window as the gateway reports it."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from interlock.connect import CLIENTS, AliasFacts, Refused
from interlock.connect.grammar import env_name, visible

if TYPE_CHECKING:
    import httpx

MAX_WINDOW = 100_000_000  # above any model's window: a larger number is not believed


class Unanswered(Exception):
    """The gateway could not say what the alias is; ``str()`` says why, ready to print."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "connect",
        help="print the settings a client needs to use an alias of a running gateway",
        description=(
            "Asks the gateway at URL about ALIAS (POST /api/show: its guaranteed window, the smallest of "
            "its chain) and prints what CLIENT needs: environment lines, a Codex config.toml part, Open "
            "WebUI's connections, a LiteLLM model_list entry; a window too small for a coding agent's own "
            "prompt is refused with the numbers. The caller key is never printed, only the variable "
            "holding it."
        ),
    )
    p.add_argument("client", choices=tuple(CLIENTS), metavar="CLIENT", help=", ".join(CLIENTS))
    p.add_argument(
        "--url", default="http://127.0.0.1:8080", help="the gateway (default: http://127.0.0.1:8080)"
    )
    p.add_argument("--alias", required=True, help="the alias the client sends as its model")
    p.add_argument(
        "--api-key-env",
        default="INTERLOCK_API_KEY",
        type=_variable,
        metavar="VARIABLE",
        help="the variable holding your caller key (default: INTERLOCK_API_KEY; sent only when set)",
    )
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the gateway (default: 5)")
    p.set_defaults(handler=run_connect)


def run_connect(args: argparse.Namespace) -> int:
    url = args.url.rstrip("/")
    key = os.environ.get(args.api_key_env) or None
    try:
        window, output = alias_limits(url, args.alias, key, args.timeout)
    except Unanswered as exc:
        print(f"interlock connect: {exc}", file=sys.stderr)
        return 1
    facts = AliasFacts(url, args.alias, window, args.api_key_env if key else None, output)
    try:
        text = CLIENTS[args.client](facts)
    except Refused as exc:
        print(f"interlock connect: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


def _variable(name: str) -> str:
    try:
        return env_name(name)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def alias_limits(url: str, alias: str, key: str | None, timeout_s: float) -> tuple[int | None, int | None]:
    """The alias's guaranteed window and output ceiling (``model_info["interlock.context_length"]`` and
    ``["interlock.output_tokens"]`` of ``POST /api/show``), each None when unknown."""
    import httpx

    headers = {"authorization": f"Bearer {key}"} if key else {}
    try:
        with httpx.Client(base_url=url, timeout=timeout_s, trust_env=False, headers=headers) as http:
            response = http.post("/api/show", json={"model": alias})
            if response.status_code == 404:  # no such alias, or no Ollama surface (`server.surfaces`)
                return _listed_limits(url, alias, http.get(f"/v1/models/{quote(alias, safe='/')}"))
    except httpx.HTTPError as exc:
        raise Unanswered(f"cannot reach {url}: {exc or type(exc).__name__}") from None
    _refused(url, response)
    if response.status_code != 200:
        raise Unanswered(f"{url}/api/show answered {response.status_code}")
    try:
        info = response.json()["model_info"]
    except (ValueError, KeyError, TypeError):
        raise Unanswered(
            f"{url}/api/show did not answer as interlock does; is this an interlock gateway?"
        ) from None
    if not isinstance(info, dict):
        return None, None
    return _tokens(info.get("interlock.context_length")), _tokens(info.get("interlock.output_tokens"))


def _refused(url: str, response: httpx.Response) -> None:
    """``Unanswered`` for a 401 (no or a wrong caller key)."""
    if response.status_code == 401:
        raise Unanswered(
            f"{url} answered 401: the gateway needs a caller key; put one in INTERLOCK_API_KEY "
            "(or the variable named by --api-key-env)"
        )


def _listed_limits(url: str, alias: str, response: httpx.Response) -> tuple[int | None, int | None]:
    """The alias's window and output ceiling as ``GET /v1/models/{alias}`` lists them (the compiled
    ``max_input_tokens`` and ``max_tokens``): what a gateway that does not serve Ollama's ``/api/show``
    (``server.surfaces`` without ``ollama``) tells; each None when unknown."""
    _refused(url, response)
    if response.status_code == 404:
        raise Unanswered(
            f"{url} has no alias `{visible(alias)}` (that this key may use); GET {url}/v1/models lists them"
        )
    if response.status_code != 200:
        raise Unanswered(f"{url}/v1/models/{visible(alias)} answered {response.status_code}")
    try:
        listed = response.json()
    except ValueError:
        listed = None
    if not isinstance(listed, dict) or listed.get("id") != alias:
        raise Unanswered(f"{url}/v1/models did not answer as interlock does; is this an interlock gateway?")
    return _tokens(listed.get("max_input_tokens")), _tokens(listed.get("max_tokens"))


def _tokens(value: object) -> int | None:
    """A token count from the network, bounded where it enters: None unless 1 to ``MAX_WINDOW``."""
    known = isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_WINDOW
    return value if known and isinstance(value, int) else None
