"""YAML text -> a node graph with positions, parsed by libyaml and typed by the YAML 1.2 core schema.

The loader needs nodes (not Python objects) to know where every key and value stands. libyaml, through
PyYAML's C binding, composes them about twenty times faster than a pure-Python parser (measured in
``bench/compile_bench.py``); the pure-Python PyYAML parser is the fallback where the binding is missing.
PyYAML types scalars by YAML 1.1 (`on`, `no` and `12:30` are not strings there), so the resolver here
is replaced by the YAML 1.2 core schema: only `true`/`false` are booleans, `010` is ten.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = ["MappingNode", "Node", "ScalarNode", "SequenceNode", "YamlSyntaxError", "compose", "scalar"]

NULL = "tag:yaml.org,2002:null"
BOOL = "tag:yaml.org,2002:bool"
INT = "tag:yaml.org,2002:int"
FLOAT = "tag:yaml.org,2002:float"
STR = "tag:yaml.org,2002:str"
MERGE = "tag:yaml.org,2002:merge"

MAX_INT_DIGITS = 4300
"""Python's default limit on converting decimal text to int (``sys.get_int_max_str_digits``)."""


class YamlSyntaxError(Exception):
    """The text is not one well-formed YAML document; ``line``/``col`` are 1-based, 0 when unknown."""

    def __init__(self, problem: str, line: int, col: int) -> None:
        super().__init__(problem)
        self.problem, self.line, self.col = problem, line, col


class _CoreResolver(yaml.resolver.BaseResolver):
    """The YAML 1.2 core schema's implicit tags (plus `<<` merge keys, which configs use with anchors)."""


for _tag, _pattern, _first in (
    (BOOL, r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    (INT, r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        FLOAT,
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+.0123456789",
    ),
    (NULL, r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    (MERGE, r"^<<$", "<"),
):
    _CoreResolver.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))


def _c_parser() -> Any:
    try:
        from yaml._yaml import CParser
    except ImportError:  # pragma: no cover - PyYAML built without libyaml
        return None
    return CParser


_Parser: Any = _c_parser()
if _Parser is not None:

    class _Loader(_Parser, _CoreResolver):  # type: ignore[misc]
        def __init__(self, text: str) -> None:
            _Parser.__init__(self, text)
            _CoreResolver.__init__(self)

else:  # pragma: no cover - PyYAML without libyaml

    class _Loader(  # type: ignore[no-redef]
        yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer, _CoreResolver
    ):
        def __init__(self, text: str) -> None:
            yaml.reader.Reader.__init__(self, text)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)
            yaml.composer.Composer.__init__(self)
            _CoreResolver.__init__(self)


def compose(text: str) -> Node | None:
    """The single document in ``text`` as a node graph; None for an empty document."""
    loader = _Loader(text)
    try:
        node: Node | None = loader.get_single_node()
        return node
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = ", ".join(part for part in (exc.context, exc.problem) if part) or "invalid YAML"
        raise YamlSyntaxError(problem, mark.line + 1 if mark else 0, mark.column + 1 if mark else 0) from exc
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(str(exc), 0, 0) from exc
    finally:
        loader.dispose()


def scalar(node: ScalarNode) -> Any:
    """The Python value of a scalar node: None, bool, int, float or str (unknown tags stay text).

    Raises ``ValueError`` for a decimal integer longer than ``MAX_INT_DIGITS`` digits.
    """
    tag, value = node.tag, node.value
    if tag == STR:
        return value
    if tag == NULL:
        return None
    if tag == BOOL:
        return value.lower() == "true"
    if tag == INT:
        if value.startswith(("0o", "0x")):
            return int(value, 0)
        if len(value.lstrip("+-")) > MAX_INT_DIGITS:  # int() would raise past Python's own limit
            raise ValueError(f"an integer of {len(value):,} digits is too long (at most {MAX_INT_DIGITS:,})")
        return int(value, 10)
    if tag == FLOAT:
        lowered = value.lower().lstrip("+")
        if lowered in (".inf", "-.inf"):
            return -math.inf if lowered.startswith("-") else math.inf
        if lowered == ".nan":
            return math.nan
        return float(value)
    return value
