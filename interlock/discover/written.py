"""The starting configuration as text, proven: written with ruamel.yaml (comments kept), read back by a
YAML 1.2 parser of its own, and refused unless it reads as exactly the data meant.

Text a discovered server chose reaches the file as scalars (a model's name) and in comments (its version,
``build_info``). ruamel.yaml ends a comment only at ``\\n``, while a YAML reader also breaks lines at CR,
NEL, U+2028 and U+2029, so an unescaped ``build_info`` could end its comment and write a provider of its
own. The comments are escaped where they are made (``base.said``); this check is what proves, for every
file written, that no text became configuration, and that no scalar was folded or changed on the way.
"""

from __future__ import annotations

import io
import re
from typing import Any

from ruamel.yaml import YAML

WIDTH = 110


class UnprovenConfig(Exception):
    """The text written does not read back as the configuration meant; ``str()`` says where."""


_UNPRINTABLE = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""What a YAML stream may not hold (the compiler refuses a file that holds one: IL001)."""


def writer() -> YAML:
    yaml = YAML()  # round trip: comments, order, flow style kept
    yaml.width = WIDTH
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def written(config: Any) -> str:
    """``config`` (ruamel.yaml data with comments) as YAML text that reads back as ``config``'s data."""
    out = io.StringIO()
    writer().dump(config, out)
    text = out.getvalue()
    prove(text, config)
    return text


def prove(text: str, meant: Any) -> None:
    """Raise ``UnprovenConfig`` unless ``text`` is YAML a reader takes as exactly ``meant``'s data."""
    bad = _UNPRINTABLE.search(text)
    if bad is not None:
        raise UnprovenConfig(f"the text holds U+{ord(bad.group()):04X}, which YAML does not allow")
    try:
        read = YAML(typ="safe", pure=True).load(text)
    except Exception as exc:  # ruamel's parser and scanner errors share no narrower base
        raise UnprovenConfig(f"the text is not YAML: {exc}") from None
    expected = plain(meant)
    if read != expected:
        raise UnprovenConfig(f"the text reads as other data than meant: {_first_difference(read, expected)}")


def plain(data: Any) -> Any:
    """ruamel.yaml's commented maps and sequences as plain dicts and lists."""
    if isinstance(data, dict):
        return {key: plain(value) for key, value in data.items()}
    if isinstance(data, list):
        return [plain(item) for item in data]
    return data


def _first_difference(read: Any, meant: Any, path: str = "") -> str:
    if isinstance(read, dict) and isinstance(meant, dict):
        for key in [*meant, *(k for k in read if k not in meant)]:
            if key not in read or key not in meant:
                return f"`{path}{key!r}` is {'missing' if key not in read else 'not meant'}"
            if read[key] != meant[key]:
                return _first_difference(read[key], meant[key], f"{path}{key!r}.")
    if isinstance(read, list) and isinstance(meant, list) and len(read) == len(meant):
        for index, (got, want) in enumerate(zip(read, meant, strict=True)):
            if got != want:
                return _first_difference(got, want, f"{path}[{index}].")
    return f"`{path.rstrip('.') or 'the document'}` reads as {read!r:.80}, meant {meant!r:.80}"
