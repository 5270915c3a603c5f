"""The OpenAPI document: built from the route tables, complete both ways, every status explained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.routing import Route

from interlock.cli import main
from interlock.commands.gateway import build_gateway
from interlock.runtime.base.errors import GatewayError
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.ops.admin import model_objects
from interlock.runtime.ops.openapi import STATUSES, document, plan_document, routes
from interlock.schema.canonical import canonical_json
from tests.conftest import ROOT


def test_the_document_has_every_route_the_gateway_serves_and_no_other(basic_plan: RuntimePlan) -> None:
    gateway = build_gateway(basic_plan, probes=False)
    served = set(gateway.parts.routes.handlers)  # the surface rows, as the gateway dispatches them
    for route in gateway.parts.admin.app.routes:  # the admin app, as Starlette registered it
        assert isinstance(route, Route), route
        served |= {(method, route.path_format) for method in route.methods}
    documented = {(method.upper(), path) for path, ops in document()["paths"].items() for method in ops}
    assert documented == served
    assert len(list(routes())) == len(served)  # no route twice


def test_every_status_the_gateway_refuses_with_is_explained() -> None:
    found: set[int] = set()
    pending: list[type[GatewayError]] = list(GatewayError.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        found.add(cls.status)
    assert {str(status) for status in found} <= STATUSES.keys()
    used = {status for route in routes() for status in (*route.doc.statuses, *route.doc.extra)}
    assert used - {"503"} <= STATUSES.keys()


def test_every_operation_has_a_unique_id_and_every_answer_a_schema() -> None:
    doc = document()
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            ok = op["responses"]["200"]
            assert ("content" in ok) == (method != "head"), (method, path)
            for media in ok.get("content", {}).values():
                assert media["schema"], (method, path)


def test_the_plan_document_names_the_plan_models(basic_plan: RuntimePlan) -> None:
    doc = plan_document(basic_plan)
    names = doc["components"]["schemas"]["ModelName"]["enum"]
    assert names == [model["id"] for model in model_objects(basic_plan)]  # what GET /v1/models lists
    assert set(names) == {"t/chat", "t/cloud", "local/m1", "cloud/c1", "free/f1"}
    chat = doc["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"]["application/json"]
    assert chat["schema"]["required"] == ["messages"]  # the plan has a default alias


def test_without_a_default_alias_model_is_required() -> None:
    doc = document(["a"], default_model=False)
    for path in ("/v1/chat/completions", "/api/embed", "/v1/messages", "/v1/responses"):
        schema = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert "model" in schema["required"], path


def test_interlock_openapi_writes_the_committed_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    committed = ROOT / "schema" / "openapi.json"
    assert committed.read_text() == canonical_json(document()), (
        "run `interlock openapi -o schema/openapi.json`"
    )
    assert main(["openapi", "--check", "-o", str(committed)]) == 0
    out = tmp_path / "openapi.json"
    assert main(["openapi", "-o", str(out)]) == 0
    assert capsys.readouterr().err == f"wrote {out}\n"
    assert out.read_text() == committed.read_text()
    assert main(["openapi"]) == 0
    assert json.loads(capsys.readouterr().out)["openapi"] == "3.1.0"
    out.write_text("{}")
    assert main(["openapi", "--check", "-o", str(out)]) == 1
    assert capsys.readouterr().err == f"{out} is stale: run `interlock openapi -o {out}`\n"
    assert main(["openapi", "--check"]) == 2


def test_the_document_is_valid_openapi_3_1_and_its_schemas_valid_json_schema(basic_plan: RuntimePlan) -> None:
    import jsonschema_rs
    from jsonschema import Draft202012Validator
    from schemathesis.specs.openapi.definitions import OPENAPI_31  # the meta-schema schemathesis checks

    meta = jsonschema_rs.Draft202012Validator(OPENAPI_31)
    for doc in (document(), plan_document(basic_plan), document(["a"], auth="required")):
        meta.validate(doc)
    for route in routes():
        for schema in (route.doc.request, route.doc.error, *route.doc.answers.values()):
            if schema is not None:
                Draft202012Validator.check_schema(schema)


def test_every_route_that_takes_a_body_documents_it() -> None:
    for route in routes():
        assert (route.doc.request is not None) == (route.method == "POST"), (route.method, route.path)


def test_under_auth_the_routes_behind_keys_declare_them_and_their_401() -> None:
    from interlock.runtime.loaded.callers import needs_key

    for mode, anonymous in (("required", []), ("optional", [{}])):
        doc = document(auth=mode)
        assert set(doc["components"]["securitySchemes"]) == {"bearer", "apiKey"}
        for path, ops in doc["paths"].items():
            for op in ops.values():
                behind = needs_key(path)
                assert op.get("security") == (
                    [{"bearer": []}, {"apiKey": []}, *anonymous] if behind else None
                )
                assert ("401" in op["responses"]) == behind, path
    assert "securitySchemes" not in document()["components"]
