"""Model names -> targets: default alias, alias namespace, raw provider/model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from interlock.runtime.base.errors import DirectModelDenied, InvalidRequest, ModelNotFound
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.request.resolve import resolve
from tests.runtime.conftest import BASIC, build


def test_no_model_means_the_default_alias(basic_plan: RuntimePlan) -> None:
    target = resolve(basic_plan, None)
    assert (target.label, target.header) == ("t/chat", (b"x-interlock-alias", b"t/chat"))
    assert target is basic_plan.aliases["t/chat"]  # built at load: an alias is its own target


def test_a_name_in_the_namespace_that_is_no_alias_is_404_listing_the_aliases(basic_plan: RuntimePlan) -> None:
    with pytest.raises(ModelNotFound, match=r"^`t/nope` is not an alias; aliases: t/chat, t/cloud$"):
        resolve(basic_plan, "t/nope")


def test_unknown_providers_are_404(basic_plan: RuntimePlan) -> None:
    with pytest.raises(
        ModelNotFound,
        match=r"^`gpt-4` is neither an alias nor `provider/model` of a configured provider; "
        r"aliases: t/chat, t/cloud; providers: cloud, free, local$",
    ):
        resolve(basic_plan, "gpt-4")


def test_raw_models_pass_through_when_allowed(basic_plan: RuntimePlan) -> None:
    planned = resolve(basic_plan, "cloud/c1")
    assert planned.candidates == (basic_plan.candidates["cloud/c1"],)
    ad_hoc = resolve(basic_plan, "cloud/some/nested-model")
    assert (ad_hoc.candidates[0].provider, ad_hoc.candidates[0].model) == ("cloud", "some/nested-model")


def test_raw_models_are_400_when_the_plan_denies_them(plan_data: Callable[..., dict[str, Any]]) -> None:
    plan = build(plan_data(BASIC.replace("direct_models: allow", "direct_models: deny")))
    with pytest.raises(
        DirectModelDenied,
        match=r"^`cloud/c1` names a provider model directly, which this gateway does not allow; "
        r"use an alias: t/chat, t/cloud$",
    ):
        resolve(plan, "cloud/c1")


def test_raw_model_names_must_be_short_printable_ascii(basic_plan: RuntimePlan) -> None:
    with pytest.raises(InvalidRequest, match=r"^`model` must be printable ASCII of at most 256 characters$"):
        resolve(basic_plan, "cloud/bad\r\nx-injected: 1")
    with pytest.raises(InvalidRequest, match=r"^`model` must be printable ASCII of at most 256 characters$"):
        resolve(basic_plan, "cloud/" + "x" * 300)
    assert resolve(basic_plan, "cloud/" + "x" * 250).label == "cloud/" + "x" * 250  # 256 in all: allowed


def test_echoed_names_are_cut_short(basic_plan: RuntimePlan) -> None:
    with pytest.raises(ModelNotFound, match=r"^`t/x{97}…` is not an alias; aliases: t/chat, t/cloud$"):
        resolve(basic_plan, "t/" + "x" * 5000)
