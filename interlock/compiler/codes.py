"""Every diagnostic code, its stable name, severity and one-line meaning.

Codes are part of the contract: CI configurations and editors match on them. Never renumber; retire a
code by leaving it here marked as retired. ``tests/compiler/test_codes.py`` checks each code is documented in
the README and raised by at least one fixture.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class CodeInfo:
    code: str
    name: str
    level: str  # "error" | "warning"
    summary: str

    @property
    def severity(self) -> Severity:
        return Severity(self.level)


def _codes(*rows: tuple[str, str, str, str]) -> dict[str, CodeInfo]:
    return {code: CodeInfo(code, name, level, summary) for code, name, level, summary in rows}


CODES: dict[str, CodeInfo] = _codes(
    # Sources
    ("IL001", "yaml-syntax", "error", "The file is not valid YAML."),
    ("IL002", "duplicate-key", "error", "A mapping holds the same key twice."),
    ("IL003", "unknown-key", "error", "A key the schema does not know (often a typo)."),
    ("IL004", "wrong-type", "error", "A value of the wrong type or outside its allowed range."),
    ("IL005", "include-not-found", "error", "An `include` names a file that does not exist."),
    ("IL006", "include-cycle", "error", "Files include each other in a cycle."),
    ("IL007", "duplicate-definition", "error", "A name or section is defined in more than one file."),
    ("IL008", "bad-duration", "error", "A duration is not written like `500ms`, `3s`, `10m` or `1h`."),
    ("IL009", "bad-version", "error", "The main file's `version` is missing or unsupported."),
    ("IL010", "include-outside-root", "error", "An include or profile path leaves the allowed folders."),
    ("IL011", "unreadable-file", "error", "A source is not a regular file, is too large, or cannot be read."),
    ("IL012", "include-too-deep", "error", "Includes nest deeper than the loader follows."),
    ("IL013", "unsendable-name", "error", "A name or header that cannot be sent in an HTTP header."),
    # Providers
    ("IL101", "unknown-provider-kind", "error", "A provider `kind` other than `ollama` or `openai`."),
    ("IL102", "missing-base-url", "error", "A `kind: openai` provider has no `base_url`."),
    ("IL103", "inline-credential", "error", "A credential value is written in the config."),
    ("IL104", "bad-env-name", "error", "`api_key_env` is not a valid environment variable name."),
    ("IL105", "env-unset", "error", "With `--require-env`: a referenced credential variable is unset."),
    (
        "IL106",
        "bad-url",
        "error",
        "A URL without `http`/`https` scheme or host, or holding a space or control character.",
    ),
    (
        "IL107",
        "bad-provider-shape",
        "error",
        "Workers on an `anthropic` provider, `workers` and `base_url` both on an `openai` one, or no "
        "workers on `ollama`.",
    ),
    ("IL108", "no-credential", "warning", "An `openai` provider has no `api_key_env`."),
    ("IL109", "bad-provider-name", "error", "A provider name is empty or holds `/` or whitespace."),
    (
        "IL110",
        "shared-credential",
        "warning",
        "Providers on different servers (host and port, of a base URL or a worker) share one credential "
        "variable.",
    ),
    (
        "IL111",
        "not-a-credential-variable",
        "error",
        "`api_key_env`/`key_env` names a process, path or `INTERLOCK_*` variable, another system's secret, "
        "or another entry's (for a caller key, also a model vendor's).",
    ),
    ("IL112", "url-query-or-fragment", "error", "A base or worker URL holds `?` or `#`."),
    ("IL113", "metadata-host", "warning", "A URL points at a cloud metadata or link-local address."),
    ("IL114", "loopback-base-url", "warning", "A `base_url` points at this machine (loopback)."),
    ("IL115", "plain-http", "warning", "A `base_url` is plain `http://` to a host off this machine."),
    (
        "IL116",
        "responses-not-spoken",
        "error",
        "`responses: true` on a kind with no Responses API.",
    ),
    (
        "IL117",
        "key-sent-off-vendor",
        "error",
        "A vendor's credential goes to a host not its vendor's, or to one `api_key_hosts` does not list.",
    ),
    (
        "IL118",
        "bad-key-host",
        "error",
        "An `api_key_hosts` entry is not a host name or address, or the provider has no `api_key_env`.",
    ),
    (
        "IL119",
        "unused-key-host",
        "warning",
        "An `api_key_hosts` entry names a host the provider never calls.",
    ),
    (
        "IL120",
        "unlisted-key-host",
        "error",
        "A variable that is no model vendor's goes to a host off this network that `api_key_hosts` does "
        "not list.",
    ),
    # Workers
    ("IL201", "duplicate-worker-name", "error", "Two workers share a name."),
    ("IL202", "duplicate-worker-url", "error", "Two workers share a URL."),
    ("IL203", "bad-max-concurrent", "error", "`max_concurrent` is below 1."),
    ("IL204", "bad-pattern", "error", "A concurrency pattern is not `name`, `prefix*` or `*`."),
    ("IL205", "bad-slot-limit", "error", "A per-model slot limit is below 1."),
    ("IL206", "slot-limit-above-max", "error", "A per-model slot limit exceeds `max_concurrent`."),
    ("IL207", "shadowed-pattern", "warning", "A pattern can never match: an earlier one covers it."),
    ("IL208", "unknown-profile", "error", "A worker names a hardware profile that does not exist."),
    ("IL209", "bad-context-tokens", "error", "A context size is below 1."),
    ("IL210", "telemetry-reads-nothing", "warning", "A worker's `telemetry` enables no source."),
    (
        "IL211",
        "placement-overcommit",
        "warning",
        "The models of a provider cannot all stay loaded on its workers.",
    ),
    (
        "IL212",
        "primary-without-home",
        "warning",
        "An alias's first candidate has no worker to stay loaded on.",
    ),
    (
        "IL213",
        "bad-keep-alive",
        "error",
        "`routing.placement.keep_alive` is not `forever` or a positive duration.",
    ),
    (
        "IL214",
        "placement-memory-unknown",
        "warning",
        "Warm-up is on, but a worker's memory is unknown: nothing is placed there.",
    ),
    (
        "IL215",
        "placement-size-unknown",
        "warning",
        "Warm-up is on, but a model's size is not declared: placed once a worker reports it.",
    ),
    ("IL216", "unknown-server", "error", "A worker's `server` is not `llama.cpp`, `vllm` or `sglang`."),
    ("IL217", "server-on-ollama", "error", "An Ollama worker sets `server` (only `openai` workers may)."),
    (
        "IL218",
        "resume-without-replica",
        "warning",
        "An alias resumes cut streams (`resume: same_model`), but its chain holds no model twice.",
    ),
    # Aliases
    ("IL301", "alias-outside-namespace", "error", "An alias name is not under `alias_namespace`."),
    ("IL302", "empty-chain", "error", "An alias has no candidates."),
    ("IL303", "malformed-chain-entry", "error", "A chain entry is not `provider/model`."),
    ("IL304", "unknown-provider", "error", "A chain entry or model fact names an undeclared provider."),
    ("IL305", "duplicate-chain-entry", "error", "A chain lists the same entry twice."),
    ("IL306", "alias-cycle", "error", "Aliases refer to each other in a cycle."),
    ("IL307", "unknown-default-alias", "error", "`server.default_alias` is not a declared alias."),
    ("IL308", "capability-missing", "error", "A candidate is known to lack a capability the alias requires."),
    ("IL309", "capability-unknown", "warning", "A candidate's capabilities are unknown for a `requires`."),
    ("IL310", "unknown-alias", "error", "A chain entry in the alias namespace is not a declared alias."),
    ("IL311", "duplicate-after-expansion", "warning", "Expanding nested aliases repeats a candidate."),
    ("IL312", "alias-shadows-candidate", "error", "An alias is named like a `provider/model` of a provider."),
    # Health and timeouts
    ("IL401", "probe-timeout-too-long", "error", "`probe_timeout` is not shorter than `probe_interval`."),
    ("IL402", "not-positive", "error", "A duration or count that must be positive is not."),
    ("IL403", "timeout-order", "warning", "`connect` or `first_byte` is longer than `total`."),
    (
        "IL404",
        "cold-load-timeout",
        "warning",
        "An Ollama `first_byte` under 30s: too short for a cold load.",
    ),
    # Preflight
    ("IL701", "bad-preflight-mode", "error", "`preflight.mode` is not `enforce`, `observe` or `off`."),
    ("IL702", "negative-reserve", "error", "A preflight token reserve is negative."),
    ("IL703", "margin-out-of-range", "error", "`preflight.margin_percent` is outside 0 to 100."),
    (
        "IL704",
        "context-limit-above-maximum",
        "warning",
        "A worker's context limit exceeds the model's maximum.",
    ),
    ("IL705", "vram-overcommit", "warning", "A model at its slot count does not fit the worker's memory."),
    # Lint
    ("IL501", "unused-provider", "warning", "No alias uses this provider."),
    ("IL502", "single-candidate", "warning", "An alias has a single candidate: nothing to fall back to."),
    ("IL503", "unused-model-facts", "warning", "Facts about a model no alias uses."),
    (
        "IL504",
        "window-spread",
        "warning",
        "An agent's alias (it requires tools) whose candidates' windows differ more than 2x.",
    ),
    (
        "IL505",
        "mixed-reasoning",
        "warning",
        "A chain mixes reasoning contracts: a fallback mid-session is refused on the next turn.",
    ),
    ("IL515", "unknown-surface", "error", "`server.surfaces` names a surface the gateway does not have."),
    ("IL516", "no-surface", "error", "`server.surfaces` is empty: the gateway would serve no API."),
    # Drift gate (`lint --scan`)
    ("IL601", "hard-coded-model", "warning", "Source code names a `provider/model` instead of an alias."),
    ("IL602", "scan-path-not-found", "error", "A `lint --scan` path does not exist."),
    # Server
    ("IL801", "cors-any-origin-with-credentials", "error", "CORS allows any origin (`*`) and credentials."),
    (
        "IL802",
        "bad-cors-origin",
        "error",
        "A CORS origin is malformed, or `allow_origins` is empty or mixes `*` with others.",
    ),
    ("IL803", "bad-cors-header", "error", "A CORS `allow_headers` entry is not a header name."),
    # Access (tenants, keys, ACLs)
    ("IL811", "unknown-tenant", "error", "A key belongs to a tenant that is not declared."),
    ("IL812", "duplicate-api-key", "error", "Two keys share one `key_env` variable or one `hash`."),
    ("IL813", "bad-acl-pattern", "error", "An `allowed`/`denied` or `pricing` pattern is malformed."),
    (
        "IL814",
        "acl-pattern-matches-nothing",
        "warning",
        "An ACL pattern matches no alias and no declared model.",
    ),
    ("IL815", "key-without-models", "error", "A key's ACL (with its tenant's) allows no declared model."),
    ("IL816", "bad-key-secret", "error", "A key has not exactly one of `key_env` and a well-formed `hash`."),
    ("IL817", "bad-key-id", "error", "A key id holds characters a generated key cannot carry."),
    ("IL818", "auth-without-keys", "error", "`server.auth: required` with no key declared."),
    (
        "IL819",
        "unpriced-model",
        "warning",
        "Credits in money, but a model the caller may reach has no price.",
    ),
    (
        "IL820",
        "no-operator-key",
        "warning",
        "Keys are read, but none is `operator: true`: any valid key sees every tenant's budgets.",
    ),
    (
        "IL821",
        "key-variable-not-secret",
        "error",
        "A caller key's `key_env` is not named as a secret (`*_KEY`, `*_TOKEN`, `*_SECRET`, `*_APIKEY`, "
        "a declared prefix).",
    ),
    (
        "IL822",
        "weak-key-secret",
        "error",
        "With `--require-env`: a caller key's variable holds a path, a short value or another's value.",
    ),
    (
        "IL823",
        "bad-key-env-prefix",
        "error",
        "A `server.key_env_prefixes` entry is malformed or admits process or other systems' variables.",
    ),
    ("IL831", "bad-queue-weight", "error", "A tenant's fair-queuing `weight` is not from 0.01 to 1000."),
    # Routing
    ("IL901", "negative-routing-weight", "error", "A `routing.weights` value is negative."),
    (
        "IL902",
        "avoid-vram-out-of-range",
        "error",
        "`routing.avoid_vram_percent` is not above 0 and at most 100.",
    ),
    (
        "IL903",
        "speed-smoothing-out-of-range",
        "error",
        "`routing.speed_smoothing` is not above 0 and at most 1.",
    ),
    ("IL904", "bad-saturation-policy", "error", "An `on_saturation` other than `fallback` or `queue`."),
    ("IL905", "sticky-bound-out-of-range", "error", "A `routing.sticky` bound is below 1."),
    ("IL906", "bad-session-header", "error", "`routing.sticky.header` is not a usable header name."),
    ("IL907", "bad-fallback-after", "error", "A `fallback_after` is not a positive duration."),
)
