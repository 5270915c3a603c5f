"""The request's ``model`` -> what to try: an alias's candidate chain, or one raw ``provider/model``.

No model -> the default alias. A name in the alias namespace that is not an alias -> 404 listing the
aliases. ``provider/model`` of a known provider -> passed through when the plan allows direct models,
else 400 (on Ollama, `m` and `m:latest` find the same listed candidate). Anything else -> 404. For a
caller key, a 404 lists only the aliases it may call, in the words of a refused model
(``Caller.not_found``): neither confirms what exists.
"""

from __future__ import annotations

from collections.abc import Iterable

from interlock.runtime.base.errors import DirectModelDenied, InvalidRequest, ModelNotFound, shown
from interlock.runtime.loaded.callers import ANONYMOUS, Caller
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.loaded.tables import Target

DIRECT_LABEL = "(direct)"  # the alias label of raw provider/model requests in metrics
MAX_DIRECT_NAME = 256  # a raw model name ends up in response headers: keep it short and printable


def resolve(plan: RuntimePlan, model: str | None, caller: Caller = ANONYMOUS) -> Target:
    """An alias is one lookup (it is its own target); only a raw model is built here. A name not found
    is worded for ``caller``: a key is told only what it may use (``Caller.not_found``). The lifecycle
    does the alias lookup itself and calls this for every other outcome (no model, a raw model, a
    name not found), so a request that names an alias runs nothing here."""
    server = plan.server
    if model is None:
        if server.default_alias is None:
            raise InvalidRequest("`model` is required: this gateway has no default alias", param="model")
        model = server.default_alias
    alias = plan.aliases.get(model)
    if alias is not None:
        return alias
    namespace = server.alias_namespace
    in_namespace = bool(namespace) and model.startswith(namespace or "")
    provider_name, slash, provider_model = model.partition("/")
    provider = plan.providers.get(provider_name) if slash and provider_model and not in_namespace else None
    if provider is None and not caller.anonymous:
        raise caller.not_found(model)
    if in_namespace:
        raise ModelNotFound(
            f"`{shown(model)}` is not an alias; aliases: {_listed(plan.aliases)}", param="model"
        )
    if provider is None:
        raise ModelNotFound(
            f"`{shown(model)}` is neither an alias nor `provider/model` of a configured provider; "
            f"aliases: {_listed(plan.aliases)}; providers: {_listed(plan.providers)}",
            param="model",
        )
    if not server.direct_models:
        raise DirectModelDenied(
            f"`{shown(model)}` names a provider model directly, which this gateway does not allow; "
            f"use an alias: {_listed(plan.aliases) if caller.anonymous else caller.offered or 'none'}",
            param="model",
        )
    candidate = plan.listed_candidate(provider, provider_model)
    if candidate is None:
        if len(model) > MAX_DIRECT_NAME or not (model.isascii() and model.isprintable()):
            raise InvalidRequest(
                f"`model` must be printable ASCII of at most {MAX_DIRECT_NAME} characters", param="model"
            )
        candidate = plan.direct_candidate(provider, provider_model)
    return Target(model, DIRECT_LABEL, (candidate,), (b"x-interlock-alias", model.encode()), (None,), ())


def _listed(names: Iterable[str]) -> str:
    return ", ".join(sorted(names)) or "none"
