"""A commented starting configuration from what ``discover`` found, as ruamel.yaml data (comments kept).

One provider per server found (its workers with the slots it reports), the facts of models no worker
reports live, and one alias per model class that can be inferred (``CLASSES``: chat, tools, vision,
thinking, embeddings). Credentials appear only as variable names. The file is meant to pass
``interlock lint --strict`` as written, except where the fleet cannot give an alias a second candidate
(IL502), which the header then says.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from interlock.common.vendors import unlisted_hosts
from interlock.discover.base import Found, FoundModel, said

NAMESPACE = "local/"
SERVE_PORTS = (8080, 4000, 8081, 8090)  # interlock's default first; the others where a server found is
LOCAL_HOSTS = frozenset(("127.0.0.1", "localhost", "::1", "0.0.0.0", "::"))
MAX_COMMENT_CHARS = 200  # a comment beside a value: the server's text in it escaped and cut (``said``)
MAX_HEADER_CHARS = 2000  # a line of the header (it holds the command, with the URLs given)


@dataclass(frozen=True, slots=True)
class ModelClass:
    alias: str
    capability: str  # what its models must have
    description: str


CLASSES: tuple[ModelClass, ...] = (
    ModelClass("chat", "completion", "Chat and completions: every chat model found"),
    ModelClass("tools", "tools", "Tool calls (agents)"),
    ModelClass("vision", "vision", "Images and text"),
    ModelClass("thinking", "thinking", "Reasoning models (thinking)"),
    ModelClass("embed", "embedding", "Embeddings"),
)

PROVIDER_NAMES = {  # server -> the provider name it gets (a number is added for the second and later)
    "ollama": "ollama",
    "llama.cpp": "llamacpp",
    "vllm": "vllm",
    "sglang": "sglang",
    "openai": "compat",  # not `openai`: the server is not OpenAI's
    "anthropic": "anthropic",
}


@dataclass(frozen=True, slots=True)
class Candidate:
    id: str  # provider/model
    model: FoundModel


def starter(found: Sequence[Found], command: str) -> tuple[CommentedMap, list[str]]:
    """The configuration and the variables it reads (to be set before `interlock serve`)."""
    config = CommentedMap()
    config["version"] = 1
    providers = CommentedMap()
    facts = CommentedMap()
    candidates: list[Candidate] = []
    variables: list[str] = []
    commented: list[str] = []
    names: dict[str, int] = {}
    for server in found:
        base = PROVIDER_NAMES[server.signals or server.kind]
        names[base] = names.get(base, 0) + 1
        name = base if names[base] == 1 else f"{base}{names[base]}"
        if server.kind == "anthropic":
            commented.append(_anthropic_note(server, name))
            continue
        providers[name] = _provider(server, name, variables)
        providers.yaml_set_comment_before_after_key(
            name, before=said(f"{server.server} at {server.url}", MAX_COMMENT_CHARS), indent=2
        )
        for model in server.models:
            cid = f"{name}/{model.name}"
            candidates.append(Candidate(cid, model))
            if server.kind != "ollama" and (model.context_tokens or model.capabilities):
                facts[cid] = _facts(model)
    aliases, single, alone = _aliases(candidates)
    header = _header(command, serve_port(found), variables, single, alone)
    for note in commented:
        header += ["", *note.splitlines()]
    config.yaml_set_start_comment("\n".join(said(line, MAX_HEADER_CHARS) for line in header))
    if aliases:
        settings = CommentedMap()
        settings["default_alias"] = (
            f"{NAMESPACE}chat" if f"{NAMESPACE}chat" in aliases else next(iter(aliases))
        )
        settings["alias_namespace"] = NAMESPACE
        config["server"] = settings
    config["providers"] = providers
    if facts:
        config["models"] = facts
        config.yaml_set_comment_before_after_key(
            "models",
            before="What the OpenAI-compatible servers said of their models (Ollama's are read live).",
            indent=0,
        )
    config["aliases"] = aliases if aliases else CommentedMap()
    config.yaml_set_comment_before_after_key(
        "aliases",
        before="One alias per model class found; a chain is tried in order, the first healthy answers.",
        indent=0,
    )
    return config, variables


def _header(command: str, port: int, variables: list[str], single: list[str], alone: list[str]) -> list[str]:
    header = [
        "Written by `interlock init` as a starting point: change any value below.",
        f"  {command}",
        "Check it:  interlock lint <this file> --strict",
        f"Serve it:  interlock serve <this file> --port {port}",
        f"Connect:   interlock connect claude-code --url http://127.0.0.1:{port} --alias local/chat",
    ]
    if variables:
        header.append("Set first: " + ", ".join(f"export {v}=..." for v in variables))
    if single:
        header.append(f"Aliases with one candidate ({', '.join(single)}) warn in `lint --strict` (IL502):")
        header.append("  add a second one, e.g. a cloud provider, to fall back to.")
    return header + alone


def serve_port(found: Sequence[Found]) -> int:
    """The first of ``SERVE_PORTS`` that no server found on this machine listens on (llama-server's
    default port is interlock's, 8080), else the first free one above them."""
    taken = {_local_port(server.url) for server in found}
    ports: list[int] = [*SERVE_PORTS, *range(max(SERVE_PORTS) + 1, 65536)]
    return next(port for port in ports if port not in taken)


def _local_port(url: str) -> int | None:
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return port if (parts.hostname or "") in LOCAL_HOSTS else None


def _provider(server: Found, name: str, variables: list[str]) -> CommentedMap:
    provider = CommentedMap()
    provider["kind"] = server.kind
    if server.kind == "openai":
        variable = f"{name.upper()}_KEY"  # never a vendor's variable (OPENAI_API_KEY, ...): IL117
        variables.append(variable)
        provider["api_key_env"] = variable
        why = "the server's --api-key" if server.needs_key else "it asked for none: set it to any value"
        provider.yaml_add_eol_comment(f"{why}; only the variable's name is written here", "api_key_env")
        off = unlisted_hosts(variable, [server.worker_url], ())
        if off:  # off this network: the variable goes there only because this line says so (IL120)
            provider["api_key_hosts"] = _flow(off)
            provider.yaml_add_eol_comment(f"{variable} is sent off this network only here", "api_key_hosts")
    worker = CommentedMap()
    worker["name"] = f"{name}-1"
    worker["url"] = server.worker_url
    if server.signals is not None:
        worker["server"] = server.signals
        worker.yaml_add_eol_comment("its own load is read each probe round", "server")
    if server.profile is not None:
        worker["profile"] = server.profile
        worker.yaml_add_eol_comment(
            said("; ".join(server.notes) or "inferred from its answers", 300), "profile"
        )
    if server.slots is not None:
        worker["max_concurrent"] = server.slots
        worker.yaml_add_eol_comment("the slots it reports", "max_concurrent")
    elif server.kind == "ollama":
        worker["max_concurrent"] = 1
        worker.yaml_add_eol_comment("OLLAMA_NUM_PARALLEL, if you raised it", "max_concurrent")
    workers = CommentedSeq([worker])
    provider["workers"] = workers
    return provider


def _facts(model: FoundModel) -> CommentedMap:
    """A model's facts on one line, or one a line with the remarks beside them."""
    out = CommentedMap()
    if model.capabilities:
        out["capabilities"] = _flow(list(model.capabilities))
    if model.context_tokens:
        out["context_tokens"] = model.context_tokens
    if model.remarks:
        out.fa.set_block_style()
    else:
        out.fa.set_flow_style()
    for key, why in model.remarks:
        if key in out:
            out.yaml_add_eol_comment(said(why, MAX_COMMENT_CHARS), key)
    return out


def _flow(items: list[str]) -> CommentedSeq:
    seq = CommentedSeq(items)
    seq.fa.set_flow_style()
    return seq


def _has(model: FoundModel, capability: str) -> bool:
    caps = model.capabilities
    if caps is None:  # the server does not say: a chat model, nothing more is assumed
        return capability == "completion"
    return capability in caps


def _aliases(candidates: list[Candidate]) -> tuple[CommentedMap, list[str], list[str]]:
    """One alias per class: loaded models first, then the larger windows. A class other than chat gets
    an alias once two models have it (one alone has nothing to fall back to: it is named instead).
    Returns the aliases, those with one candidate, and the lines naming the lone models."""
    ordered = sorted(candidates, key=lambda c: (not c.model.loaded, -(c.model.context_tokens or 0), c.id))
    aliases = CommentedMap()
    single: list[str] = []
    alone: list[str] = []
    for cls in CLASSES:
        chain = [c for c in ordered if _has(c.model, cls.capability)]
        if not chain:
            continue
        if len(chain) == 1 and cls.alias != "chat":
            alone.append(f"{cls.description}: only {said(chain[0].id)}; an alias for it wants a second model")
            continue
        alias = CommentedMap()
        alias["description"] = cls.description
        alias["chain"] = CommentedSeq([c.id for c in chain])
        name = NAMESPACE + cls.alias
        aliases[name] = alias
        if len(chain) == 1:
            single.append(name)
    return aliases, single, alone


def _anthropic_note(server: Found, name: str) -> str:
    lines = [
        f"{said(server.server)} at {said(server.url)}: uncomment once you know its models (it lists none "
        "without a key)",
        "providers:",
        f"  {name}:",
        "    kind: anthropic",
        f"    base_url: {said(server.url)}",
        f"    api_key_env: {re.sub(r'[^A-Z0-9]', '_', name.upper())}_COMPAT_KEY",
    ]
    return "\n".join(lines)
