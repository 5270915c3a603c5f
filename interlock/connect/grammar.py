"""The three grammars `connect` writes (shell ``export`` lines, TOML, YAML), each escaped for its reader
and parsed back before it is returned.

Why a module of its own: `connect` prints text that users paste into a shell, a Codex ``config.toml``
or a LiteLLM ``config.yaml``, and parts of that text come from outside (the ``--alias`` and ``--url``
given, the caller-key variable's name). A newline in an alias once ended a comment line and ran
``$(id -u)`` when the lines were sourced. So every writer here escapes for its grammar, and a writer
whose output does not parse back (with ``shlex``, ``tomllib``, PyYAML) to exactly the data it meant
raises ``Unparsed``: a bug in this module, never something to print.

Comments are made visible, not trusted: every control character, line break (CR, NEL, U+2028,
U+2029) and the like becomes a ``\\uXXXX`` escape, so a comment is always one line in every grammar.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # what a shell (and Codex's env_key) takes as a name
_UNSEEN = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]")  # controls, C1, line and BOM breaks
_TOML_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


class Unparsed(AssertionError):
    """A writer's output did not parse back to the data it meant (a bug in the writer)."""


def visible(text: str) -> str:
    """``text`` on one line, every control or line-breaking character as a ``\\uXXXX`` escape."""
    return _UNSEEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def comment(*lines: str) -> str:
    """Comment lines (``# ...``) for any of the three grammars: one per argument, each kept on one line."""
    return "".join(f"# {visible(line)}\n" for line in lines)


def quoted(value: str) -> str:
    """A double-quoted string that reads back as ``value`` in TOML (a basic string) and in YAML (a
    double-quoted scalar): backslash, quote and every character ``visible`` escapes, escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + _UNSEEN.sub(lambda m: f"\\u{ord(m.group()):04x}", escaped) + '"'


def env_name(name: str) -> str:
    """``name`` when it is a variable name a shell and Codex accept; ValueError otherwise."""
    if not ENV_NAME.match(name):
        raise ValueError(f"`{visible(name)}` is not a variable name (letters, digits and `_`)")
    return name


@dataclass(frozen=True, slots=True)
class Expansion:
    """The value of another variable (``"${NAME}"``): how a caller key is named, never printed."""

    name: str


@dataclass
class Shell:
    """``export`` lines and comments, written for a POSIX shell: every value single-quoted unless it
    holds only characters no shell treats specially (``shlex.quote``)."""

    lines: list[str] = field(default_factory=list)
    _words: list[str] = field(default_factory=list)

    def comment(self, *lines: str) -> None:
        self.lines += comment(*lines).splitlines()

    def export(self, name: str, value: str | int | Expansion) -> None:
        env_name(name)
        if isinstance(value, Expansion):
            word = f'"${{{env_name(value.name)}}}"'
            self._words.append(f"{name}=${{{value.name}}}")
        else:
            word = shlex.quote(str(value))
            self._words.append(f"{name}={value}")
        self.lines.append(f"export {name}={word}")

    def text(self) -> str:
        """The lines, parsed back with ``shlex`` (comments dropped, quotes removed) to check that they
        are exactly the ``export NAME=value`` words meant, in order."""
        out = "\n".join(self.lines) + "\n"
        expected = [word for pair in (("export", w) for w in self._words) for word in pair]
        if shlex.split(out, comments=True, posix=True) != expected:
            raise Unparsed(f"the shell lines do not read back as written:\n{out}")
        return out


def toml(head: str, root: Mapping[str, Any], tables: Mapping[str, Mapping[str, Any]]) -> str:
    """``head`` (comment lines), the root keys, then one ``[table]`` per entry of ``tables`` (a dotted
    name such as ``model_providers.interlock``); strings quoted, numbers and booleans as they are;
    parsed back with ``tomllib`` to check it."""
    lines = [_toml_pair(key, value) for key, value in root.items()]
    for name, table in tables.items():
        lines += ["", f"[{'.'.join(_toml_key(part) for part in name.split('.'))}]"]
        lines += [_toml_pair(key, value) for key, value in table.items()]
    out = head + "\n".join(lines) + "\n"
    meant: dict[str, Any] = dict(root)
    for name, table in tables.items():
        node = meant
        for part in name.split("."):
            node = node.setdefault(part, {})
        node.update(table)
    if tomllib.loads(out) != meant:
        raise Unparsed(f"the TOML does not read back as written:\n{out}")
    return out


def _toml_key(key: str) -> str:
    return key if _TOML_KEY.match(key) else quoted(key)


def _toml_pair(key: str, value: Any) -> str:
    if isinstance(value, bool):
        shown = "true" if value else "false"
    elif isinstance(value, int):
        shown = str(value)
    else:
        shown = quoted(str(value))
    return f"{_toml_key(key)} = {shown}"


def yaml_document(head: str, lines: list[str], meant: Any) -> str:
    """``head`` (comment lines) and ``lines`` (YAML whose scalars were written with ``quoted``), parsed
    back with PyYAML's safe loader to check that they are ``meant``."""
    out = head + "\n".join(lines) + "\n"
    if yaml.safe_load(out) != meant:
        raise Unparsed(f"the YAML does not read back as written:\n{out}")
    return out
