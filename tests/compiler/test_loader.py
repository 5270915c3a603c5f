"""The loader: YAML 1.2 typing, positions, merge keys, includes and their failure modes."""

from __future__ import annotations

from pathlib import Path

from interlock.compiler import CompileOptions, compile_config
from interlock.compiler.diagnostics import DiagnosticSink, Span
from interlock.compiler.loader import parse_document


def parse(text: str) -> tuple[object, DiagnosticSink]:
    sink = DiagnosticSink()
    return parse_document("t.yaml", text, sink).data, sink


def test_scalars_follow_the_yaml_1_2_core_schema() -> None:
    data, sink = parse(
        "a: on\nb: no\nc: 010\nd: 0o17\ne: 0x1f\nf: 1.5\ng: true\nh: ~\ni: 12:30\nj: '7'\nk: .inf\nl:\n"
    )
    assert sink.items == []
    assert data == {
        "a": "on",
        "b": "no",
        "c": 10,
        "d": 15,
        "e": 31,
        "f": 1.5,
        "g": True,
        "h": None,
        "i": "12:30",
        "j": "7",
        "k": float("inf"),
        "l": None,
    }


def test_positions_of_keys_and_values() -> None:
    sink = DiagnosticSink()
    doc = parse_document("t.yaml", "top:\n  key: [one, 'two']\n", sink)
    assert doc.key_span(("top", "key")) == Span("t.yaml", 2, 3, 2, 6)
    assert doc.span(("top", "key", 1)) == Span("t.yaml", 2, 14, 2, 19)
    assert doc.span(("top", "missing", 3)) == doc.span(("top",))


def test_every_duplicate_key_is_reported() -> None:
    data, sink = parse("a: 1\nb: {x: 1, x: 2}\na: 3\n")
    assert data == {"a": 1, "b": {"x": 1}}
    assert [(d.code, d.message, str(d.span)) for d in sink.items] == [
        ("IL002", "duplicate key `x` in `b`", "t.yaml:2:11"),
        ("IL002", "duplicate key `a` in `the file`", "t.yaml:3:1"),
    ]


def test_merge_keys_and_anchors() -> None:
    data, sink = parse("base: &b {kind: openai, probe: false}\nx:\n  <<: *b\n  probe: true\n")
    assert sink.items == []
    assert data == {"base": {"kind": "openai", "probe": False}, "x": {"kind": "openai", "probe": True}}


def test_a_recursive_alias_is_a_syntax_error_not_a_crash() -> None:
    data, sink = parse("a: &x [1, *x]\n")
    assert data is None
    assert [(d.code, d.message) for d in sink.items] == [
        ("IL001", "YAML syntax error: an alias refers to the node that contains it")
    ]


def test_syntax_errors_have_a_place_and_a_hint() -> None:
    _, sink = parse("a:\n\tb: 1\n")
    (d,) = sink.items
    assert (d.code, str(d.span), d.hint) == ("IL001", "t.yaml:2:1", "indent with spaces, not tabs")
    _, sink = parse("a: 1\n---\nb: 2\n")
    assert [d.hint for d in sink.items] == ["a configuration file holds one document: remove the extra `---`"]


def test_include_twice_loads_once_and_a_name_twice_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "providers:\n  groq: {kind: openai, base_url: 'https://g.internal/v1', api_key_env: G}\n"
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.yaml").write_text(
        "include: [../p.yaml]\naliases:\n  a: {chain: [groq/x, groq/y]}\n"
    )
    (tmp_path / "main.yaml").write_text("version: 1\ninclude: [p.yaml, sub/a.yaml]\n")
    ctx = compile_config(str(tmp_path / "main.yaml"), CompileOptions(environ={}))
    assert ctx.sink.items == []
    assert ctx.plan is not None

    (tmp_path / "sub" / "b.yaml").write_text("aliases:\n  a: {chain: [groq/z, groq/w]}\n")
    (tmp_path / "main.yaml").write_text("version: 1\ninclude: [p.yaml, sub/a.yaml, sub/b.yaml]\n")
    ctx = compile_config(str(tmp_path / "main.yaml"), CompileOptions(environ={}))
    (d,) = ctx.sink.items
    assert d.code == "IL007"
    assert d.message == "alias `a` is defined twice; a later file may not override an earlier one"
    assert d.hint is not None
    assert d.hint.startswith("first defined at ")
    assert "sub/a.yaml:3:3" in d.hint


def test_included_files_may_omit_version_but_not_contradict_it(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("version: 3\n")
    (tmp_path / "main.yaml").write_text("include: [a.yaml]\n")
    ctx = compile_config(str(tmp_path / "main.yaml"), CompileOptions(environ={}))
    assert [(d.code, d.message) for d in ctx.sink.items] == [
        ("IL009", "the main file must declare `version: 1`"),
        ("IL009", "unsupported configuration version `3`"),
    ]


def test_a_reader_compiles_sources_that_are_not_files() -> None:
    files = {
        "cfg/main.yaml": "version: 1\ninclude: [more.yaml]\n",
        "cfg/more.yaml": "providers:\n  g: {kind: openai, base_url: 'https://g.lan/v1', api_key_env: G}\n"
        "aliases:\n  a: {chain: [g/x, g/y]}\n",
    }
    ctx = compile_config("cfg/main.yaml", CompileOptions(reader=files.get, environ={}))
    assert ctx.sink.items == []
    assert ctx.plan is not None
    assert ctx.plan.aliases["a"].candidates == ["g/x", "g/y"]


def test_a_file_that_is_not_utf8_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "latin.yaml"
    path.write_bytes(b"version: 1\nserver: {resolved_header: X-\xff}\n")
    ctx = compile_config(str(path), CompileOptions(environ={}))
    assert [(d.code, d.message, d.span.line, d.span.col) for d in ctx.sink.items] == [
        ("IL001", "the file is not valid UTF-8 text", 2, 29)
    ]


def test_absurdly_deep_nesting_is_a_syntax_error_not_a_crash() -> None:
    data, sink = parse("x: " + "[" * 600 + "]" * 600 + "\n")
    assert data is None
    assert [(d.code, d.message, str(d.span)) for d in sink.items] == [
        ("IL001", "YAML syntax error: values are nested more than 100 levels deep", "t.yaml:1:103")
    ]
    data, _ = parse("x: " + "[" * 99 + "]" * 99 + "\n")
    assert data is not None


def test_aliases_that_multiply_without_bound_are_refused() -> None:
    # Six levels of ten: a 300-byte file that would become a million values.
    text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 6)
    )
    data, sink = parse(text)
    assert data is None
    assert [(d.code, d.message) for d in sink.items] == [
        ("IL001", "YAML syntax error: the configuration holds more than 500,000 values (aliases expanded)")
    ]
    data, sink = parse(text.rsplit("a4:", 1)[0])  # four levels: about 12,000 values, allowed
    assert sink.items == []
    assert isinstance(data, dict)
