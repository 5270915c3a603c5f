"""Recognising credentials so that no diagnostic, source excerpt or plan ever shows one.

The compiler never needs a credential's value: a provider names the *variable* that holds it. Anything
that looks like a value is reported (IL103/IL104) and masked wherever source text is shown.
"""

from __future__ import annotations

import re

CREDENTIAL_KEY = re.compile(
    r"^(api[_-]?key|apikey|key|token|access[_-]?token|secret|client[_-]?secret|password|passwd|"
    r"authorization|auth|bearer|credentials?|private[_-]?key)$",
    re.IGNORECASE,
)
"""Keys under which someone wrote a credential value instead of naming a variable."""

_TOKEN = (
    r"(?:sk-|sk_live_|sk_test_|rk_live_|gsk_|xai-|AIza|hf_|ghp_|gho_|ghs_|github_pat_|glpat-|xox[abpr]-|"
    r"AKIA|pplx-|r8_|nvapi-)[A-Za-z0-9_\-]{12,}"
)
_SECRET_VALUE = re.compile(rf"^\s*(?:Bearer\s+)?{_TOKEN}\s*$")
_SECRET_IN_TEXT = re.compile(_TOKEN)
_INLINE_CREDENTIAL = re.compile(
    r"(?P<key>(?<![\w.-])(?P<name>[\w.-]+)['\"]?[ \t]*[:=][ \t]*)(?P<value>[^\s,}#]+)"
)
_CREDENTIAL_WORD = re.compile(
    r"api[_-]?key|apikey|access[_-]?key|private[_-]?key|token(?!s)|secret|password|passwd|authorization|"
    r"bearer|credential",
    re.IGNORECASE,
)
"""`api_key: value`, and compound keys as INI and .env files write them (`aws_secret_access_key = v`)."""
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^/@\s]+@")
_URL_QUERY_CREDENTIAL = re.compile(
    r"(?P<key>[?&;](?:key|api[_-]?key|apikey|token|access[_-]?token|secret|password|passwd|auth|sig|"
    r"signature)=)(?P<value>[^&#\s'\"`]+)",
    re.IGNORECASE,
)
"""`?key=value` in a URL: Google's APIs take the key as a query parameter."""


def looks_like_secret(value: object) -> bool:
    """A string shaped like a well-known API key (``sk-...``, ``gsk_...``, ``AIza...`` and kin)."""
    return isinstance(value, str) and _SECRET_VALUE.match(value) is not None


def contains_secret(text: str) -> bool:
    """Whether free text (a description) holds a key-shaped token or a URL with a credential in it.

    Stricter than what ``redact_text`` masks on display: "max token: 4k" in a description is prose.
    """
    if _SECRET_IN_TEXT.search(text) or _URL_QUERY_CREDENTIAL.search(text):
        return True
    return "@" in text and _URL_USERINFO.search(text) is not None


def redact_text(text: str) -> str:
    """Mask key-shaped tokens, ``api_key: value`` pairs and URL user-info in free text.

    A safety net for any text shown to a person: messages, hints and source excerpts.
    """
    text = _SECRET_IN_TEXT.sub("***", text)
    # each pattern only where it can match: this runs for every diagnostic and excerpt line
    if "@" in text and "://" in text:
        text = _URL_USERINFO.sub(r"\g<scheme>***@", text)
    if "=" in text:
        text = _URL_QUERY_CREDENTIAL.sub(_mask_query, text)
    if _CREDENTIAL_WORD.search(text) is None:
        return text
    return _INLINE_CREDENTIAL.sub(_mask_pair, text)


_NOT_A_SECRET = frozenset(("***", "...", "|", ">", "''", '""', "true", "false", "null", "~"))


def _mask_query(match: re.Match[str]) -> str:
    return match.group(0) if match.group("value") in ("...", "***") else match.group("key") + "***"


def _mask_pair(match: re.Match[str]) -> str:
    value, key, name = match.group("value"), match.group("key"), match.group("name")
    if not _CREDENTIAL_WORD.search(name) or re.search(r"[_-]env$", name, re.IGNORECASE):
        # not a credential's name, or `api_key_env: NAME` (a variable's name); a pair may follow inside
        # what was taken as the value (`c = Client(api_key="..."`)
        return key + _INLINE_CREDENTIAL.sub(_mask_pair, value)
    if value in _NOT_A_SECRET or value.startswith(("{", "[")):
        return match.group(
            0
        )  # a placeholder, a block marker, or a YAML boolean/null (`allow_credentials: true`)
    return key + "***"
