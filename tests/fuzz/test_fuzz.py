"""Schemathesis against a real `interlock serve`, from the document it serves at ``/openapi.json``.

Every operation gets positive cases (valid by the document) and, where it takes a body, negative ones
(invalid by it). Each answer is checked by schemathesis (documented status, content type and schema;
an invalid request refused with a 4xx) and here: no 500, a 5xx only as an upstream-caused 502/503
(whose body the schema check holds to the surface's error shape), no credential in any answer, and
the server still running. Positive data that an upstream or the plan refuses (a 4xx) is fine: the
document types only what the gateway checks, the upstream judges the rest (docs/openapi.md).

Bounded for CI: ``FUZZ_EXAMPLES`` examples per operation and mode, derandomized. A longer run:
``INTERLOCK_FUZZ_EXAMPLES=500 INTERLOCK_FUZZ_SEED=7 python -m pytest tests/fuzz -q``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error, positive_data_acceptance

from interlock.runtime.openapi import routes
from tests.e2e.harness import Served
from tests.fuzz.conftest import SECRETS

FUZZ_EXAMPLES = int(os.environ.get("INTERLOCK_FUZZ_EXAMPLES", "15"))
FUZZ_SEED = os.environ.get("INTERLOCK_FUZZ_SEED")  # set: random cases from this seed (else derandomized)
UPSTREAM_CAUSED = (502, 503)  # the only 5xx the gateway may answer, in the surface's error shape

ROUTES = list(routes())
POSITIVE = [(r.method, r.path) for r in ROUTES]
# a path parameter is any non-empty segment: only a request body can be made invalid
NEGATIVE = [(r.method, r.path) for r in ROUTES if r.doc.request is not None]


@pytest.fixture(scope="module")
def served_schema(fuzzed: Served) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{fuzzed.url}/openapi.json")


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        yield s


def fuzz(
    fuzzed: Served,
    schema: schemathesis.BaseSchema,
    session: requests.Session,
    method: str,
    path: str,
    mode: GenerationMode,
) -> int:
    """Run the cases of one operation in one mode; returns how many ran."""
    operation = schema[path][method]
    ran = 0

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=FUZZ_EXAMPLES,
        derandomize=FUZZ_SEED is None,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )
    def one(case: schemathesis.Case) -> None:
        nonlocal ran
        ran += 1
        response = case.call(base_url=fuzzed.url, session=session, timeout=30)
        case.validate_response(response, excluded_checks=[positive_data_acceptance, not_a_server_error])
        status = response.status_code
        assert status < 500 or status in UPSTREAM_CAUSED, (
            f"{method} {path} answered {status}: {response.text[:300]}"
        )
        seen = response.text + "".join(f"{k}: {v}\n" for k, v in response.headers.items())
        for secret in SECRETS:
            assert secret not in seen, f"{method} {path} answered a credential"
        assert fuzzed.proc.poll() is None, f"the gateway exited after {method} {path}"

    test = seed(int(FUZZ_SEED))(one) if FUZZ_SEED is not None else one
    test()
    return ran


@pytest.mark.parametrize(("method", "path"), POSITIVE, ids=[f"{m} {p}" for m, p in POSITIVE])
def test_positive(
    fuzzed: Served, served_schema: schemathesis.BaseSchema, session: requests.Session, method: str, path: str
) -> None:
    assert fuzz(fuzzed, served_schema, session, method, path, GenerationMode.POSITIVE) >= 1


@pytest.mark.parametrize(("method", "path"), NEGATIVE, ids=[f"{m} {p}" for m, p in NEGATIVE])
def test_negative(
    fuzzed: Served, served_schema: schemathesis.BaseSchema, session: requests.Session, method: str, path: str
) -> None:
    assert fuzz(fuzzed, served_schema, session, method, path, GenerationMode.NEGATIVE) >= 1
