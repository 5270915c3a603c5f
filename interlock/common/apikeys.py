"""Caller API keys: how one is made, written down as a hash, and recognised.

A generated key is ``il-<key id>.<43 random url-safe characters>`` (256 bits from ``secrets``). The
config holds only ``hmac-sha256$<salt>$<digest>``: HMAC-SHA256 of the whole key under a random 16-byte
salt. Why not scrypt or argon2: those slow a guess down, which protects short human passwords; a
256-bit random key cannot be guessed either way, while a slow KDF would cost milliseconds on every
request (or a cache of verified keys in memory). The key id inside the key makes the lookup one
dictionary access, and the digest comparison is ``hmac.compare_digest`` (constant time). A key held in
an environment variable (``key_env``) may be any string that looks like a secret (``weak_secret``: long
enough, not a path, not another variable's value); the runtime keeps its SHA-256 digest. The variable
itself must be named as a secret (``secret_like``: ``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_APIKEY``, or
a prefix the operator declared in ``server.key_env_prefixes``, IL821): a deny list
(``envnames.not_a_credential``) never knows every variable a shell exports (``_`` is the path of the
last command); a name that says "secret" is one an operator chose for it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping

from interlock.common.envnames import not_a_credential

SCHEME = "hmac-sha256"
TOKEN_PREFIX = "il-"
KEY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
"""A key id: what logs, metrics and audit lines name (never the secret)."""
MIN_KEY_CHARS = 16
"""The shortest secret a caller key's variable may hold: a generated key has 50 or more characters, and
what a process exports without being asked (`COLUMNS=80`, `SHLVL=1`, `PS4=+ `, a locale) is shorter."""
_PATH = re.compile(r"^(/|~|\.{1,2}[/\\]|[A-Za-z]:[/\\]|\\\\)")
_HASH = re.compile(r"^hmac-sha256\$([0-9a-f]{32})\$([0-9a-f]{64})$")


SECRET_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_APIKEY")
"""How a caller key's variable is named unless the operator declares a prefix: the name says it is one
(a rotation's number may follow: ``TEAM_KEY_2``, ``TEAM_KEY2``)."""

_SECRET_NAME = re.compile(rf"^.+({'|'.join(SECRET_SUFFIXES)})(_?[0-9]+)?$")
_PREFIX = re.compile(r"^[A-Z][A-Z0-9_]*_$")


def secret_like(variable: str, prefixes: tuple[str, ...] = ()) -> bool:
    """Whether a caller key's ``variable`` is named as a secret: ``*_KEY``, ``*_TOKEN``, ``*_SECRET``,
    ``*_APIKEY`` (a number may follow), or one of the operator's ``prefixes`` (case folded, as in
    ``not_a_credential``)."""
    name = variable.upper()
    return bool(_SECRET_NAME.match(name)) or name.startswith(tuple(p.upper() for p in prefixes))


def bad_prefix(prefix: str) -> str | None:
    """Why ``prefix`` may not mark caller key variables (None when it may); completes "`P` ..."."""
    if not _PREFIX.match(prefix) or len(prefix) < 3:
        return "is not an upper-case variable prefix of three characters or more ending in `_` (e.g. `CK_`)"
    reason = not_a_credential(f"{prefix}X")
    return None if reason is None else f"would admit variables like `{prefix}X`, which {reason}"


def new_key(key_id: str) -> str:
    """A fresh key for ``key_id``; shown once, never stored by interlock."""
    return f"{TOKEN_PREFIX}{key_id}.{secrets.token_urlsafe(32)}"


def hash_key(key: str, salt: bytes | None = None) -> str:
    """The config's ``hash`` for ``key`` (a new random salt unless one is given)."""
    salt = secrets.token_bytes(16) if salt is None else salt
    digest = hmac.new(salt, key.encode(), hashlib.sha256).hexdigest()
    return f"{SCHEME}${salt.hex()}${digest}"


def parse_hash(text: str) -> tuple[bytes, bytes] | None:
    """``(salt, digest)`` of a well-formed ``hash``, else None."""
    found = _HASH.match(text)
    if found is None:
        return None
    return bytes.fromhex(found.group(1)), bytes.fromhex(found.group(2))


def key_id_of(key: str) -> str | None:
    """The id a generated key carries (``il-<id>.<secret>``), or None for any other string."""
    if not key.startswith(TOKEN_PREFIX):
        return None
    key_id, dot, rest = key[len(TOKEN_PREFIX) :].partition(".")
    return key_id if dot and rest else None


def verify(key: str, salt: bytes, digest: bytes) -> bool:
    """Whether ``key`` hashes to ``digest`` under ``salt`` (constant-time comparison)."""
    return hmac.compare_digest(hmac.digest(salt, key.encode(), "sha256"), digest)


def weak_secret(variable: str, env: Mapping[str, str]) -> str | None:
    """Why the value of caller key variable ``variable`` in ``env`` is no secret (None when it may be
    one); completes "the value of `X` ...", and never shows the value. Read once, when a plan loads."""
    value = env.get(variable, "")
    if _PATH.match(value):
        return "is a path, not a secret (the variable holds a file or a program's name)"
    if len(value) < MIN_KEY_CHARS:
        return f"has {len(value)} characters; a caller key's secret has at least {MIN_KEY_CHARS}"
    for other, seen in sorted(env.items()):
        if seen == value and other != variable and not secret_like(other):
            return f"is also the value of `{other}`, which is no secret"
    return None
