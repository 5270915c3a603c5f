"""The jinja2 templates shipped with interlock (diff comments, consumer constants) and their environment.

Templates only lay out values the Python side has already computed and escaped for the target language;
they hold no logic beyond loops and conditionals.
"""

from __future__ import annotations

from typing import Any

import jinja2


def environment() -> jinja2.Environment:
    """A strict environment: undefined names fail, whitespace is exactly what the template shows."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("interlock", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # Markdown, TypeScript and Python: callers escape for their language
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_template(name: str, **context: Any) -> str:
    """Render the template ``name`` (e.g. ``diff.md.j2``) with ``context``."""
    return environment().get_template(name).render(**context)
