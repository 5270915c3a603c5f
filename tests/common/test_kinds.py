"""Provider kinds are one table: every consumer finds every row."""

from __future__ import annotations

from typing import get_args

from interlock.common.kinds import KINDS, PROVIDER_KINDS, KindName
from interlock.runtime.upstream.base import Adapter
from interlock.runtime.wire.fields import DROPS
from interlock.schema.config import PROVIDER_KINDS as CONFIG_KINDS


def test_the_plan_schema_enum_is_the_table() -> None:
    assert set(get_args(KindName)) == set(KINDS) == set(PROVIDER_KINDS) == set(CONFIG_KINDS)


def test_every_kind_has_an_adapter_and_a_drops_row_per_operation() -> None:
    assert KINDS  # an empty table would let the loop below prove nothing
    for name, kind in KINDS.items():
        assert issubclass(kind.load_adapter(), Adapter), name
        assert (name, "chat") in DROPS, name
        assert (name, "embeddings") in DROPS, name


def test_credentials_travel_in_the_kind_s_header() -> None:
    assert KINDS["openai"].auth("k") == {"Authorization": "Bearer k"}
    assert KINDS["anthropic"].auth("k") == {"x-api-key": "k"}
    assert KINDS["anthropic"].fixed_headers == {"anthropic-version": "2023-06-01"}
