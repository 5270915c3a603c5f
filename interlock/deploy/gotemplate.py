"""Text for Prometheus' Go templates, written so that it renders as itself.

Prometheus expands the labels and annotations of an alerting rule as Go ``text/template`` before it
sends an alert (``{{ $labels.worker }}``, ``{{ query "..." }}``). A name taken from the plan is text
anyone with a pull request can choose: an alias ``h/{{`` made ``promtool check rules`` refuse the whole
file, and ``h/chat{{with query `up`}}{{.|first|value}}{{end}}`` ran a PromQL query of its author's at
alert time and sent its result to every receiver. ``literal`` writes every brace as an action that prints
it (``{{"{"}}``), so no text is ever an action of its own; ``rendered`` is what Go makes of such text,
and refuses any other action, which is how a generator proves its output.
"""

from __future__ import annotations

import re

_BRACE = re.compile(r"[{}]")
_PRINTED = re.compile(r'\{\{"([{}])"\}\}')
"""The only action ``literal`` writes: a string constant of one brace, printed as it is."""


class TemplateError(ValueError):
    """Text that Go's ``text/template`` would not render as plain text."""


def literal(text: str) -> str:
    """``text`` as a Go template that renders as ``text``."""
    return _BRACE.sub(lambda brace: '{{"' + brace.group() + '"}}', text)


def rendered(template: str) -> str:
    """What Go's ``text/template`` makes of ``template``; raises ``TemplateError`` unless every brace in it
    is inside one of ``literal``'s actions (any other action could run a function or a query)."""
    out: list[str] = []
    position = 0
    for action in _PRINTED.finditer(template):
        out.append(_plain(template[position : action.start()]))
        out.append(action.group(1))
        position = action.end()
    out.append(_plain(template[position:]))
    return "".join(out)


def _plain(text: str) -> str:
    brace = _BRACE.search(text)
    if brace is not None:
        raise TemplateError(f"a `{brace.group()}` outside an action that prints it: {text!r:.80}")
    return text
