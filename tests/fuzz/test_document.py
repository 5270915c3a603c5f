"""The document a running gateway serves: its plan's models, and every documented route answered by
its own handler (never the fallback's 404 or a 405)."""

from __future__ import annotations

from interlock.runtime.ops.openapi import routes
from interlock.runtime.ops.ui.view import SECTIONS
from tests.e2e.harness import Served

PARAMS = {
    "model_id": "fuzz/chat",
    "name": "page.css",
    "asset": "swagger-ui.css",
    "section": next(iter(SECTIONS)),
}


def test_the_served_document_lists_the_models_that_v1_models_lists(fuzzed: Served) -> None:
    doc = fuzzed.http.get("/openapi.json").json()
    listed = [model["id"] for model in fuzzed.http.get("/v1/models").json()["data"]]
    assert doc["components"]["schemas"]["ModelName"]["enum"] == listed
    assert {"fuzz/chat", "fuzz/cloud", "fuzz/claude", "fuzz/embed", "cloud/c-chat"} <= set(listed)


def test_every_documented_route_is_served(fuzzed: Served) -> None:
    assert routes()  # an empty table would let the loop below prove nothing
    for route in routes():
        path = route.path.format(**PARAMS)
        body = {} if route.doc.request is not None else None
        answer = fuzzed.http.request(route.method, path, json=body)
        expected = {"200"} | set(route.doc.statuses) | set(route.doc.extra)
        assert str(answer.status_code) in expected, (route.method, path, answer.status_code, answer.text)
        assert answer.status_code not in (404, 405) or route.doc.request is not None, (route.method, path)
