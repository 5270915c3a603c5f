"""The words for a plan that does not validate (``plan._validated``: imported only then).

JSON Schema's validator (``plan.schema.json``) names each error by its JSON path; what it does not find
(a check only the model makes) is worded by pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import ValidationError

from interlock.runtime.base.errors import PlanError


def refusal(data: Mapping[str, Any], exc: ValidationError, origin: str) -> PlanError:
    """The PlanError for ``data``, which pydantic refused with ``exc``: at most five errors named."""
    _validate_schema(data, origin)
    shown = [f"{_json_path(e['loc'])}: {e['msg']}" for e in exc.errors()[:5]]
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return PlanError(f"{origin}: the plan is not a valid routing plan: " + "; ".join(shown) + more)


def _validate_schema(data: Mapping[str, Any], origin: str) -> None:
    import jsonschema  # type: ignore[import-untyped]

    from interlock.common.resources import data_dir

    schema = orjson.loads((data_dir("schema") / "plan.schema.json").read_bytes())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        shown = [f"{_json_path(e.absolute_path)}: {e.message}" for e in errors[:5]]
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise PlanError(f"{origin}: the plan does not match plan.schema.json: " + "; ".join(shown) + more)


def _json_path(parts: Any) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)
    return path.lstrip(".") or "(root)"
