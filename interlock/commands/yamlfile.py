"""Configuration files edited by commands (`interlock init`, `keys add --write`): a ruamel.yaml round
trip, so a person's comments, key order, quoting and indentation survive every edit.

The indentation is read from the file itself (``load_yaml_guess_indent``), so a file indented with two
spaces and sequences flush with their key stays that way. The compiler never reads YAML this way; the
runtime reads no YAML at all.
"""

from __future__ import annotations

import io
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.util import load_yaml_guess_indent

WIDTH = 110


class ConfigEditError(Exception):
    """The file cannot be edited as asked; ``str()`` says why, ready to print."""


def round_trip(mapping: int = 2, sequence: int = 4, offset: int = 2) -> YAML:
    yaml = YAML()  # round-trip mode: comments, order, quotes and flow style are kept
    yaml.preserve_quotes = True
    yaml.width = WIDTH
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


def load(text: str) -> tuple[YAML, Any]:
    """The document and a YAML that writes it back in the file's own indentation."""
    try:
        data, indent, block_seq_indent = load_yaml_guess_indent(text)
    except Exception as exc:  # ruamel's parser and scanner errors share no narrower base
        raise ConfigEditError(f"not YAML that can be edited: {exc}") from None
    indent = indent or 2
    offset = block_seq_indent or 0
    yaml = round_trip(mapping=indent, sequence=max(indent, offset + 2), offset=offset)
    data = yaml.load(text)  # again, with the YAML that will write it
    return yaml, data


def dump(yaml: YAML, data: Any) -> str:
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()
