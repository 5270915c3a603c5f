"""Schemathesis against a real `interlock serve`, from the document it serves at ``/openapi.json``.

Every operation gets positive cases (valid by the document) and, where it takes a body, negative ones
(invalid by it), on three fronts: the gateway with ``auth: off``; the same with ``auth: required``
called with a key; and that one called without a key. Each answer is checked by schemathesis
(documented status, content type and schema; an invalid request refused with a 4xx) and here: no 500,
a 5xx only as an upstream-caused 502/503 (whose body the schema check holds to the surface's error
shape), no credential in any answer, without a key a 401 exactly on the routes behind keys, and the
server still running. Positive data that an upstream or the plan refuses (a 4xx) is fine: the
document types what the gateway checks, the upstream judges the rest (docs/openapi.md).

Bounded for CI: a few examples per operation, mode and front, derandomized. A longer run:
``INTERLOCK_FUZZ_EXAMPLES=500 INTERLOCK_FUZZ_SEED=7 python -m pytest tests/fuzz -q``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from schemathesis import GenerationMode
from schemathesis.checks import ignored_auth, not_a_server_error, positive_data_acceptance

from interlock.runtime.loaded.callers import needs_key
from interlock.runtime.ops.openapi import routes
from tests.e2e.harness import Served
from tests.fuzz.conftest import CALLER_KEY, SECRETS

EXAMPLES = os.environ.get("INTERLOCK_FUZZ_EXAMPLES")  # set: this many per operation, mode and front
FUZZ_SEED = os.environ.get("INTERLOCK_FUZZ_SEED")  # set: random cases from this seed (else derandomized)
UPSTREAM_CAUSED = (502, 503)  # the only 5xx the gateway may answer, in the surface's error shape
EXCLUDED = [
    positive_data_acceptance,  # valid by the document, an upstream or the plan may still refuse it
    not_a_server_error,  # replaced by the UPSTREAM_CAUSED rule below
    ignored_auth,  # it reads our real key as one schemathesis made up; the "no key" front checks 401s
]


@dataclass(frozen=True)
class Front:
    gateway: str  # the fixture
    key: str | None  # the caller key sent
    examples: int  # per operation and mode, in CI

    @property
    def headers(self) -> dict[str, str]:  # the document is fetched with `Authorization: Bearer`
        return {"x-api-key": self.key} if self.key else {}


FRONTS = {
    "open": Front("fuzzed", None, 6),
    "keyed": Front("keyed", CALLER_KEY, 3),
    "no key": Front("keyed", None, 2),  # every answer is a 401 or an open route's
}
WITH_BODY = ("open", "keyed")  # without a key, the body is never read: negative cases say nothing more
ROUTES = list(routes())
POSITIVE = [(r.method, r.path) for r in ROUTES]
# a path parameter is any non-empty segment: only a request body can be made invalid
NEGATIVE = [(r.method, r.path) for r in ROUTES if r.doc.request is not None]


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        yield s


@pytest.fixture(scope="module")
def documents(fuzzed: Served, keyed: Served) -> dict[str, schemathesis.BaseSchema]:
    """Each gateway's document, fetched as its caller would (with the key, where one is needed)."""
    headers = {"authorization": f"Bearer {CALLER_KEY}"}
    return {
        "fuzzed": schemathesis.openapi.from_url(f"{fuzzed.url}/openapi.json"),
        "keyed": schemathesis.openapi.from_url(f"{keyed.url}/openapi.json", headers=headers),
    }


def fuzz(
    request: pytest.FixtureRequest,
    documents: dict[str, schemathesis.BaseSchema],
    session: requests.Session,
    front: Front,
    route: tuple[str, str],
    mode: GenerationMode,
) -> int:
    """Run the cases of one operation in one mode on one front; returns how many ran."""
    gateway: Served = request.getfixturevalue(front.gateway)
    method, path = route
    operation = documents[front.gateway][path][method]
    ran = 0

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=int(EXAMPLES) if EXAMPLES else front.examples,
        derandomize=FUZZ_SEED is None,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )
    def one(case: schemathesis.Case) -> None:
        nonlocal ran
        ran += 1
        response = case.call(base_url=gateway.url, session=session, headers=front.headers, timeout=30)
        case.validate_response(response, excluded_checks=EXCLUDED)
        status = response.status_code
        assert status < 500 or status in UPSTREAM_CAUSED, f"{method} {path}: {status} {response.text[:300]}"
        if front.gateway == "keyed" and front.key is None:
            assert (status == 401) == needs_key(path), f"{method} {path} without a key: {status}"
        seen = response.text + "".join(f"{k}: {v}\n" for k, v in response.headers.items())
        for secret in SECRETS:
            assert secret not in seen, f"{method} {path} answered a credential"
        assert gateway.proc.poll() is None, f"the gateway exited after {method} {path}"

    test = seed(int(FUZZ_SEED))(one) if FUZZ_SEED is not None else one
    test()
    return ran


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("route", POSITIVE, ids=[f"{m} {p}" for m, p in POSITIVE])
def test_positive(
    request: pytest.FixtureRequest,
    documents: dict[str, schemathesis.BaseSchema],
    session: requests.Session,
    route: tuple[str, str],
    front: str,
) -> None:
    assert fuzz(request, documents, session, FRONTS[front], route, GenerationMode.POSITIVE) >= 1


@pytest.mark.parametrize("front", WITH_BODY)
@pytest.mark.parametrize("route", NEGATIVE, ids=[f"{m} {p}" for m, p in NEGATIVE])
def test_negative(
    request: pytest.FixtureRequest,
    documents: dict[str, schemathesis.BaseSchema],
    session: requests.Session,
    route: tuple[str, str],
    front: str,
) -> None:
    assert fuzz(request, documents, session, FRONTS[front], route, GenerationMode.NEGATIVE) >= 1
