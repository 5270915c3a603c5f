"""Consumer constants from the aliases: a TypeScript or Python module that names every alias.

Consumers import ``MANA_LLM.FAST_TEXT`` instead of writing ``'mana/fast-text'`` (or worse, a
``provider/model``). Only what consumers depend on goes into the file (alias names, descriptions and
guaranteed capabilities), so routing changes do not make it stale. Aliases are sorted by name, so a
config and the plan it compiles to generate the same bytes.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass

from interlock.schema.plan import RoutingPlan
from interlock.templates import render_template

LANGUAGES: dict[str, str] = {"ts": "codegen.ts.j2", "python": "codegen.py.j2"}

DOC_WIDTH = 76

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class CodegenError(Exception):
    """The aliases cannot be turned into constants (e.g. two aliases map to the same key)."""


@dataclass(frozen=True)
class Constant:
    """One alias as a member of the generated object."""

    key: str  # FAST_TEXT
    alias: str  # mana/fast-text
    doc: list[str]  # doc comment lines, already escaped for the language


def constant_name(namespace: str | None) -> str:
    """`mana/` -> `MANA_LLM`; without a namespace, `LLM`."""
    stem = _upper_snake(namespace or "")
    return f"{stem}_LLM" if stem else "LLM"


def type_name(constant: str) -> str:
    """`MANA_LLM` -> `ManaLlmAlias`: the union type of every alias name."""
    return "".join(part.capitalize() for part in constant.split("_") if part) + "Alias"


def key_for(alias: str, namespace: str | None) -> str:
    """`mana/fast-text` under `mana/` -> `FAST_TEXT`; outside a namespace the whole name is used."""
    name = alias.removeprefix(namespace) if namespace else alias
    key = _upper_snake(name) or "ALIAS"
    return f"_{key}" if key[0].isdigit() else key


def _upper_snake(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").upper()


def valid_name(name: str) -> bool:
    return bool(_IDENTIFIER.match(name))


def generate(plan: RoutingPlan, lang: str, name: str | None = None) -> str:
    """The module text for ``lang`` (`ts` or `python`); ``name`` overrides the constant's name."""
    constant = name or constant_name(plan.server.alias_namespace)
    if not valid_name(constant):
        raise CodegenError(f"`{constant}` is not a valid identifier for the constant")
    namespace = plan.server.alias_namespace
    escape = _ts_doc if lang == "ts" else _py_doc
    members: list[Constant] = []
    seen: dict[str, str] = {}
    for alias_name in sorted(plan.aliases):
        alias = plan.aliases[alias_name]
        key = key_for(alias_name, namespace)
        if key in seen:
            raise CodegenError(
                f"aliases `{seen[key]}` and `{alias_name}` both become `{constant}.{key}`; rename one"
            )
        seen[key] = alias_name
        doc = [escape(line) for line in _wrap(alias.description)]
        if alias.requires:
            if doc:
                doc.append("")
            doc.append(escape(f"Guarantees: {', '.join(alias.requires)}."))
        members.append(Constant(key, alias_name, doc))
    literal = _ts_string if lang == "ts" else _py_string
    return render_template(
        LANGUAGES[lang],
        constant=constant,
        type_name=type_name(constant),
        members=members,
        literal=literal,
        namespace=namespace,
    )


def _wrap(text: str) -> list[str]:
    """Description paragraphs as lines that fit an 88-column file once indented and quoted."""
    lines: list[str] = []
    for paragraph in text.splitlines():
        lines.extend(textwrap.wrap(paragraph, width=DOC_WIDTH, break_long_words=False))
    return lines


def _ts_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r")
    return f"'{escaped}'"


def _py_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid Python string literal


def _ts_doc(line: str) -> str:
    return line.strip().replace("*/", "*\\/")


def _py_doc(line: str) -> str:
    escaped = line.strip().replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return escaped[:-1] + '\\"' if escaped.endswith('"') else escaped  # `""""` would end the string early
