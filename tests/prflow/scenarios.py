"""One edit of the base configuration per kind of change, and the kinds the diff must report for it.

Some edits have side effects a reviewer should see too (moving a worker changes its effective slots);
those kinds are listed as well, so each scenario states the complete expected result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .tree import ConfigTree

Edit = Callable[[ConfigTree], None]


@dataclass(frozen=True)
class Scenario:
    name: str
    edit: Edit
    kinds: frozenset[str]
    base_edit: Edit | None = None  # applied to both sides first, when a kind needs another start

    def __str__(self) -> str:
        return self.name


def _set(path: tuple[str, ...], value: object) -> Edit:
    """An edit that sets ``config.yaml`` at ``path`` to ``value``."""

    def edit(tree: ConfigTree) -> None:
        node = tree.config
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    return edit


def _add_alias(tree: ConfigTree) -> None:
    tree.aliases["acme/summary"] = {"description": "Summaries", "chain": ["groq/llama-3.1-8b-instant"]}


def _swap_first_two(tree: ConfigTree) -> None:
    chain = tree.aliases["acme/chat"]["chain"]
    chain[0], chain[1] = chain[1], chain[0]


def _replace_last(tree: ConfigTree) -> None:
    tree.aliases["acme/chat"]["chain"][-1] = "local/llava:7b"


def _openai_provider(name: str, base_url: str, api_key_env: str) -> Edit:
    """An edit that sets provider ``name`` to an OpenAI-compatible one (added or replacing it)."""
    return _set(("providers", name), {"kind": "openai", "base_url": base_url, "api_key_env": api_key_env})


def _key_elsewhere(base_url: str, host: str) -> Edit:
    """OpenRouter's provider pointed at ``base_url``: its vendor's key may go there only when the
    provider lists ``host`` in ``api_key_hosts`` (IL117 otherwise)."""

    def edit(tree: ConfigTree) -> None:
        tree.provider("openrouter").update(base_url=base_url, api_key_hosts=[host])

    return edit


_add_provider = _openai_provider("together", "https://api.together.xyz/v1", "TOGETHER_API_KEY")


def _remove_provider(tree: ConfigTree) -> None:
    del tree.config["providers"]["together"]


_spare_to_openai = _openai_provider("spare", "https://spare.internal/v1", "SPARE_API_KEY")


def _swap_workers(tree: ConfigTree) -> None:
    workers = tree.provider("local")["workers"]
    workers[0], workers[1] = workers[1], workers[0]


def _add_server_worker(tree: ConfigTree) -> None:
    worker = {"name": "box-a", "url": "http://10.0.0.30:8080/v1"}
    tree.config["providers"]["boxes"] = {"kind": "openai", "workers": [worker]}


def _name_server(tree: ConfigTree) -> None:
    tree.provider("boxes")["workers"][0]["server"] = "llama.cpp"


def _add_worker(tree: ConfigTree) -> None:
    tree.provider("local")["workers"].append({"name": "gpu-c", "url": "http://10.0.0.4:11434"})


def _remove_worker(tree: ConfigTree) -> None:
    workers = tree.provider("local")["workers"]
    workers.remove(tree.worker("local", "gpu-b"))


def _move_worker(tree: ConfigTree) -> None:
    worker = tree.worker("local", "gpu-b")
    tree.provider("local")["workers"].remove(worker)
    tree.provider("spare")["workers"].append(worker)


def _worker_set(name: str, key: str, value: object) -> Edit:
    def edit(tree: ConfigTree) -> None:
        provider = "spare" if name == "cpu-a" else "local"
        tree.worker(provider, name)[key] = value

    return edit


def _concurrency(pattern: str, limit: int) -> Edit:
    def edit(tree: ConfigTree) -> None:
        tree.worker("local", "gpu-a")["model_concurrency"][pattern] = limit

    return edit


def _profile_vram(tree: ConfigTree) -> None:
    tree.profile["hardware"]["vram_gib"] = 48


def _model(model: str, key: str, value: object) -> Edit:
    def edit(tree: ConfigTree) -> None:
        tree.config["models"][model][key] = value

    return edit


def _alias(name: str, key: str, value: object) -> Edit:
    def edit(tree: ConfigTree) -> None:
        if value is None:
            del tree.aliases[name][key]
        else:
            tree.aliases[name][key] = value

    return edit


def _remove_alias(tree: ConfigTree) -> None:
    del tree.aliases["acme/agent"]


def _cors(**changes: object) -> Edit:
    """An edit that sets ``server.cors`` to a browser-app policy, with ``changes`` applied."""
    policy: dict[str, object] = {
        "allow_origins": ["https://app.acme.example"],
        "allow_credentials": True,
        "allow_headers": ["authorization", "content-type"],
        "max_age": "10m",
    }
    return _set(("server", "cors"), {**policy, **changes})


_TENANTS = {"acme": {"allowed": ["acme/*"], "requests_per_minute": 60}}
_KEYS = {"ci": {"tenant": "acme", "key_env": "CI_KEY"}}


def _access(tree: ConfigTree) -> None:
    """Base for the access scenarios: one tenant and one key, auth optional."""
    tree.config["server"]["auth"] = "optional"
    tree.config["tenants"] = {name: dict(body) for name, body in _TENANTS.items()}
    tree.config["keys"] = {name: dict(body) for name, body in _KEYS.items()}


_HASH_1 = "hmac-sha256$" + "0" * 32 + "$" + "1" * 64
_HASH_2 = "hmac-sha256$" + "2" * 32 + "$" + "3" * 64


def _hashed(tree: ConfigTree) -> None:
    """Base for rotating a hashed key: the access base, the key `ci` kept as a hash."""
    _access(tree)
    tree.config["keys"]["ci"] = {"tenant": "acme", "hash": _HASH_1}


def _two_keys(tree: ConfigTree) -> None:
    """Base for the operator scenarios: the access base with a second key, `bot`."""
    _access(tree)
    tree.config["keys"]["bot"] = {"tenant": "acme", "key_env": "BOT_KEY"}


def _operator(tree: ConfigTree) -> None:
    """Base for revoking an operator: two keys, `ci` the operator."""
    _two_keys(tree)
    tree.config["keys"]["ci"]["operator"] = True


def _tenant(key: str, value: object) -> Edit:
    def edit(tree: ConfigTree) -> None:
        tree.config["tenants"]["acme"][key] = value

    return edit


def _key(key: str, value: object) -> Edit:
    def edit(tree: ConfigTree) -> None:
        tree.config["keys"]["ci"][key] = value

    return edit


def _add_key(tree: ConfigTree) -> None:
    tree.config["keys"]["bot"] = {"tenant": "acme", "key_env": "BOT_KEY"}


def _move_key(tree: ConfigTree) -> None:
    tree.config["tenants"]["ops"] = {}
    tree.config["keys"]["ci"]["tenant"] = "ops"


def _k(*kinds: str) -> frozenset[str]:
    return frozenset(kinds)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("alias-added", _add_alias, _k("alias-added", "alerts-changed")),
    Scenario("alias-removed", _remove_alias, _k("alias-removed", "alerts-changed")),
    Scenario(
        "first-choice", _swap_first_two, _k("first-choice-changed", "chain-reordered", "alerts-changed")
    ),
    Scenario(
        "candidate-replaced",
        _replace_last,
        _k("candidate-added", "candidate-removed", "alerts-changed", "agent-window-raised"),
    ),
    Scenario("requires-dropped", _alias("acme/vision", "requires", None), _k("requires-dropped")),
    Scenario("requires-added", _alias("acme/chat", "requires", ["tools"]), _k("requires-added")),
    Scenario(
        "description", _alias("acme/chat", "description", "Short | quick answers"), _k("description-changed")
    ),
    Scenario("default-alias", _set(("server", "default_alias"), "acme/agent"), _k("default-alias-changed")),
    Scenario("alias-namespace", _set(("server", "alias_namespace"), None), _k("alias-namespace-changed")),
    Scenario("direct-denied", _set(("server", "direct_models"), "deny"), _k("direct-models-denied")),
    Scenario(
        "direct-allowed",
        _set(("server", "direct_models"), "allow"),
        _k("direct-models-allowed"),
        base_edit=_set(("server", "direct_models"), "deny"),
    ),
    Scenario(
        "resolved-header", _set(("server", "resolved_header"), "X-Acme-Model"), _k("resolved-header-changed")
    ),
    Scenario("max-body", _set(("server", "max_body_bytes"), 1048576), _k("max-body-changed")),
    Scenario("cors-on", _cors(), _k("cors-origins-added", "cors-credentials-allowed")),
    Scenario("surfaces-narrowed", _set(("server", "surfaces"), ["openai"]), _k("surfaces-removed")),
    Scenario(
        "surfaces-widened",
        _set(("server", "surfaces"), ["openai", "ollama"]),
        _k("surfaces-added"),
        base_edit=_set(("server", "surfaces"), ["openai"]),
    ),
    Scenario("cors-off", _set(("server", "cors"), None), _k("cors-origins-removed"), base_edit=_cors()),
    Scenario(
        "cors-origin-added",
        _cors(allow_origins=["https://app.acme.example", "http://localhost:5173"]),
        _k("cors-origins-added"),
        base_edit=_cors(),
    ),
    Scenario(
        "cors-credentials",
        _cors(allow_credentials=False),
        _k("cors-credentials-denied"),
        base_edit=_cors(),
    ),
    Scenario(
        "cors-headers",
        _cors(allow_headers=["authorization", "x-request-id"]),
        _k("cors-headers-removed", "cors-headers-added"),
        base_edit=_cors(),
    ),
    Scenario("cors-max-age", _cors(max_age="1h"), _k("cors-max-age-changed"), base_edit=_cors()),
    Scenario("server-limit", _set(("server", "header_timeout"), "5s"), _k("server-limit-changed")),
    Scenario("provider-added", _add_provider, _k("provider-added", "credential-sent")),
    Scenario("provider-removed", _remove_provider, _k("provider-removed"), base_edit=_add_provider),
    Scenario(
        "provider-kind",
        _spare_to_openai,
        _k(
            "provider-kind-changed",
            "base-url-changed",
            "credential-changed",
            "worker-removed",
            "credential-sent",
            "alerts-changed",
        ),
    ),
    Scenario(
        "base-url",
        _key_elsewhere("https://openrouter.example/api/v1", "openrouter.example"),
        _k("base-url-changed", "credential-sent", "key-host-allowed"),
    ),
    Scenario(
        "key-host-allowed",
        _set(("providers", "openrouter", "api_key_hosts"), ["openrouter.example"]),
        _k("key-host-allowed"),
    ),
    Scenario(
        "key-host-withdrawn",
        lambda tree: tree.provider("openrouter").pop("api_key_hosts"),
        _k("key-host-withdrawn"),
        base_edit=_set(("providers", "openrouter", "api_key_hosts"), ["openrouter.example"]),
    ),
    Scenario(
        "base-url-same-host",
        _set(("providers", "openrouter", "base_url"), "https://openrouter.ai/api/v2"),
        _k("base-url-changed"),
    ),
    Scenario(
        "credential",
        _set(("providers", "groq", "api_key_env"), "GROQ_KEY_PROD"),
        _k("credential-changed", "credential-sent"),
    ),
    Scenario("probe", _set(("providers", "openrouter", "probe"), True), _k("probe-changed")),
    Scenario(
        "recovery-check",
        _set(("providers", "openrouter", "recovery_check"), "request"),
        _k("recovery-check-changed"),
    ),
    Scenario("responses", _set(("providers", "openrouter", "responses"), True), _k("responses-changed")),
    Scenario("provider-retry", _set(("providers", "groq", "retry"), {"count": 2}), _k("retry-changed")),
    Scenario("alias-resume", _alias("acme/chat", "resume", "same_model"), _k("alias-resume-changed")),
    Scenario(
        "alias-retry",
        _alias("acme/chat", "retry", {"retry_after_max": "30s"}),
        _k("alias-retry-changed"),
    ),
    Scenario(
        "provider-timeout",
        _set(("providers", "local", "timeouts"), {"first_byte": "90s"}),
        _k("timeout-changed"),
    ),
    Scenario(
        "provider-idle",  # the stall bound of a stream: from the kind's default to the provider's own
        _set(("providers", "groq", "timeouts"), {"idle": "30s"}),
        _k("timeout-changed"),
    ),
    Scenario("worker-order", _swap_workers, _k("worker-order-changed")),
    Scenario("worker-added", _add_worker, _k("worker-added", "alerts-changed")),
    Scenario(  # gpu-b knew no window: without it the local models' windows are known, and smaller
        "worker-removed",
        _remove_worker,
        _k("worker-removed", "alerts-changed", "agent-window-dropped", "agent-window-raised"),
    ),
    Scenario(
        "worker-moved",
        _move_worker,
        _k("worker-moved", "slots-changed", "alerts-changed", "agent-window-dropped", "agent-window-raised"),
    ),
    Scenario("worker-url", _worker_set("gpu-b", "url", "http://10.0.0.20:11434"), _k("worker-url-changed")),
    Scenario(
        "profile",
        _worker_set("gpu-a", "profile", "rtx4090"),
        _k("profile-changed", "queue-changed", "alerts-changed"),
    ),
    Scenario("hardware", _profile_vram, _k("hardware-changed", "placement-changed")),  # the budget too
    Scenario(
        "max-concurrent",
        _worker_set("gpu-b", "max_concurrent", 2),
        _k("max-concurrent-changed", "slots-changed"),
    ),
    Scenario("slot-limit", _concurrency("qwen2.5:7b", 1), _k("slots-changed", "patterns-changed")),
    Scenario("pattern-only", _concurrency("gemma4:*", 1), _k("patterns-changed")),
    Scenario(
        "context-limit", _worker_set("gpu-a", "default_context_tokens", 4096), _k("context-limit-changed")
    ),
    Scenario(
        "queue",
        _worker_set("gpu-b", "queue", {"max_waiting": 4, "max_wait": "5s"}),
        _k("queue-changed", "alerts-changed"),
    ),
    Scenario(
        "telemetry",
        _worker_set("gpu-b", "telemetry", {"nvidia_smi": True}),
        _k("telemetry-changed", "alerts-changed"),
    ),
    Scenario(
        "worker-saturation", _worker_set("gpu-b", "on_saturation", "queue"), _k("worker-saturation-changed")
    ),
    Scenario("worker-server", _name_server, _k("worker-server-changed"), base_edit=_add_server_worker),
    Scenario("health", _set(("health", "open_for"), "30s"), _k("health-changed")),
    Scenario("preflight-mode", _set(("preflight", "mode"), "observe"), _k("preflight-mode-changed")),
    Scenario("preflight", _set(("preflight", "margin_percent"), 25), _k("preflight-changed")),
    Scenario(
        "routing",
        _set(("routing", "avoid_vram_percent"), 80),
        _k("routing-changed", "placement-changed", "alerts-changed"),
    ),  # placement's budgets are that share of each worker's memory
    Scenario("placement", _set(("routing", "placement"), {"warm": True}), _k("placement-changed")),
    Scenario(
        "fallback-after",
        _alias("acme/chat", "fallback_after", "2s"),
        _k("saturation-policy-changed"),
    ),
    Scenario(
        "saturation-policy",
        _alias("acme/chat", "on_saturation", "queue"),
        _k("saturation-policy-changed"),
    ),
    Scenario(
        "capabilities",
        _model("groq/llama-3.1-8b-instant", "capabilities", ["completion", "tools", "vision"]),
        _k("capabilities-changed"),
    ),
    Scenario(
        "context-tokens", _model("local/llava:7b", "context_tokens", 8192), _k("context-tokens-changed")
    ),
    Scenario(
        "agent-window-dropped",
        _model("openrouter/openai/gpt-4o", "context_tokens", 64000),
        _k("context-tokens-changed", "agent-window-dropped"),
    ),
    Scenario(
        "agent-window-raised",
        _model("openrouter/openai/gpt-4o", "context_tokens", 131072),
        _k("context-tokens-changed", "agent-window-raised"),
    ),
    Scenario(
        "output-ceiling-raised",
        _model("groq/llama-3.1-8b-instant", "max_output_tokens", 8192),
        _k("max-output-changed", "output-ceiling-raised"),
    ),
    Scenario(
        "output-ceiling-dropped",
        _model("groq/llama-3.1-8b-instant", "max_output_tokens", 4096),
        _k("max-output-changed", "output-ceiling-dropped"),
        _model("groq/llama-3.1-8b-instant", "max_output_tokens", 8192),
    ),
    Scenario(
        "reasoning",
        _model("groq/llama-3.1-8b-instant", "capabilities", ["completion", "tools", "thinking"]),
        _k("capabilities-changed", "reasoning-changed"),
    ),
    Scenario("auth-tightened", _set(("server", "auth"), "required"), _k("auth-tightened"), _access),
    Scenario("auth-loosened", _set(("server", "auth"), "off"), _k("auth-loosened"), _access),
    Scenario("key-added", _add_key, _k("caller-added", "key-variable-added"), _access),
    Scenario("key-removed", lambda tree: tree.config["keys"].pop("ci"), _k("caller-removed"), _access),
    Scenario("acl-tightened", _tenant("denied", ["acme/agent"]), _k("acl-tightened"), _access),
    Scenario("acl-loosened", _tenant("allowed", ["*"]), _k("acl-loosened"), _access),
    Scenario("key-variable", _key("key_env", "CI_KEY_2"), _k("key-secret-source-changed"), _access),
    Scenario(
        "key-prefixes", _set(("server", "key_env_prefixes"), ["CK_"]), _k("key-prefixes-changed"), _access
    ),
    Scenario("key-secret", _key("hash", _HASH_2), _k("key-secret-changed"), _hashed),
    Scenario("key-tenant", _move_key, _k("key-tenant-changed", "caller-added"), _access),
    Scenario(
        "operator-granted", _key("operator", True), _k("operator-granted", "operator-revoked"), _two_keys
    ),
    Scenario("operator-revoked", _key("operator", False), _k("operator-revoked"), _operator),
    Scenario("caller-limit", _tenant("requests_per_minute", 120), _k("caller-limit-changed"), _access),
    Scenario("caller-queue", _tenant("weight", 3), _k("caller-queue-changed"), _access),
    Scenario("caller-priority", _key("priority", "batch"), _k("caller-queue-changed"), _access),
    Scenario("caller-description", _tenant("description", "Acme"), _k("caller-description-changed"), _access),
    Scenario(
        "price",
        _set(("pricing",), {"models": {"groq/*": {"input": 0.05, "output": 0.08}}}),
        _k("price-changed"),
    ),
)
