"""Hostile input to the compiler: each test performs an attack from issue 7 and checks the defence.

`interlock lint` runs in pull-request CI on YAML written by whoever opens the pull request: includes that
reach for other files, special files, inputs that used to end in a traceback, an output path that is
not a plain file, anchor bombs, and lines long enough to flood a log. Every attack is bounded (small
inputs, small caps) so the whole file runs in about a second.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from interlock.cli import main
from interlock.compiler import CompileOptions, compile_config
from interlock.compiler.diagnostics import visible
from interlock.compiler.reading import FileReader, SourceUnreadable
from interlock.compiler.report import FORMATS, render
from tests.conftest import ROOT, text_report

PROVIDERS = """providers:
  groq: {kind: openai, base_url: "https://api.groq.com/openai/v1", api_key_env: GROQ_API_KEY}
  openrouter: {kind: openai, base_url: "https://openrouter.ai/api/v1", api_key_env: OPENROUTER_API_KEY}
"""
ALIASES = "aliases:\n  fast: {chain: [groq/llama-3.1-8b-instant, openrouter/openai/gpt-4o-mini]}\n"
CREDENTIALS = (
    "[default]\naws_access_key_id = AKIAEXAMPLEID12345678\naws_secret_access_key = wJalrXUtnFEMIsecret\n"
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def codes(ctx: object) -> list[str]:
    return sorted(d.code for d in ctx.sink.items)  # type: ignore[attr-defined]


def config(folder: Path, includes: str, body: str = PROVIDERS + ALIASES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "main.yaml"
    path.write_text(f"version: 1\ninclude: {includes}\n{body}")
    return path


# --- item 6: includes stay inside the configuration's folder tree ---------------------------------


def test_an_include_outside_the_tree_is_refused_and_never_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "credentials"
    secret.write_text(CREDENTIALS)
    inside = tmp_path / "repo" / "link.ini"
    main_path = config(tmp_path / "repo", f"[../credentials, {secret}, link.ini]")
    inside.symlink_to(secret)  # a link inside the tree that leads out of it
    for fmt in FORMATS:
        code, out, err = run(capsys, "lint", str(main_path), "--format", fmt)
        assert code == 1
        assert "wJalrXUtnFEMI" not in out + err
        assert "aws_" not in out + err
        assert out.count("IL010") == 3
    ctx = compile_config(str(main_path))
    assert codes(ctx) == ["IL010"] * 3
    assert [doc.file for doc in ctx.sources.docs] == [str(main_path)]  # only the main file was read


def test_include_root_allows_another_folder_and_shows_a_file_that_is_no_config_only_masked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "providers.yaml").write_text(PROVIDERS)
    (shared / "credentials").write_text(CREDENTIALS + "x" * 100_000 + "\n")
    main_path = config(tmp_path / "repo", "[../shared/providers.yaml]", ALIASES)
    assert run(capsys, "lint", str(main_path))[0] == 1
    assert run(capsys, "lint", str(main_path), "--include-root", str(shared))[0] == 0
    main_path.write_text(f"version: 1\ninclude: [../shared/credentials]\n{PROVIDERS}{ALIASES}")
    for fmt in FORMATS:
        code, out, err = run(capsys, "lint", str(main_path), "--format", fmt, "--include-root", str(shared))
        assert code == 1
        assert "wJalrXUtnFEMI" not in out + err
        assert "AKIAEXAMPLE" not in out + err
        assert len(out) < 4_000  # an excerpt, not the file


def test_a_profile_path_is_held_to_the_same_bounds(tmp_path: Path) -> None:
    (tmp_path / "box.yaml").write_text((ROOT / "profiles" / "cpu-only.yaml").read_text())
    body = (
        "providers:\n  local:\n    kind: ollama\n    workers:\n"
        "      - {name: a, url: 'http://10.0.0.1:11434', profile: ../box.yaml}\n"
        "      - {name: b, url: 'http://10.0.0.2:11434', profile: /dev/zero.yaml}\n"
        "aliases:\n  fast: {chain: [local/x, local/y]}\n"
    )
    main_path = config(tmp_path / "repo", "[]", body)
    ctx = compile_config(str(main_path))
    assert codes(ctx) == ["IL010", "IL010"]
    allowed = compile_config(str(main_path), CompileOptions(include_roots=("/",)))
    assert codes(allowed) == ["IL208"]  # /dev/zero.yaml does not exist; ../box.yaml is read


# --- item 7: special files -------------------------------------------------------------------------


@pytest.mark.timeout(60)  # bounds a hang (a FIFO read blocks for ever), not a speed
def test_a_fifo_or_a_device_is_a_diagnostic_and_never_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")  # opening it to read would block until a writer comes
    main_path = config(tmp_path, "[pipe.yaml, /dev/zero, /dev/urandom]")
    ctx = compile_config(str(main_path), CompileOptions(include_roots=("/dev",)))
    messages = sorted(d.message for d in ctx.sink.items)
    assert messages == [
        "included file `/dev/urandom` is a character device, not a regular file",
        "included file `/dev/zero` is a character device, not a regular file",
        f"included file `{tmp_path}/pipe.yaml` is a FIFO (named pipe), not a regular file",
    ]
    assert codes(ctx) == ["IL011"] * 3


def test_a_file_over_the_size_cap_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "big.yaml").write_text("# padding\n" * 200 + ALIASES)
    main_path = config(tmp_path, "[big.yaml]", PROVIDERS)
    ctx = compile_config(str(main_path), CompileOptions(reader=FileReader(max_bytes=1_000)))
    assert [(d.code, d.message) for d in ctx.sink.errors] == [
        ("IL011", f"included file `{tmp_path}/big.yaml` is larger than 1,000 bytes")
    ]
    assert run(capsys, "lint", str(main_path), "--max-file-bytes", "1000")[0] == 1
    assert run(capsys, "lint", str(main_path))[0] == 0  # the default cap is 16 MiB


def test_reading_stops_at_the_cap_when_a_file_is_larger_than_it_says(tmp_path: Path) -> None:
    # /proc files report size 0 and then deliver text; the cap holds while reading, not only at stat.
    proc = Path("/proc/self/status")
    if not proc.exists():
        pytest.skip("no /proc")
    with pytest.raises(SourceUnreadable, match=r"^is larger than 10 bytes$"):
        FileReader(max_bytes=10)(str(proc))


# --- item 8: no tracebacks -------------------------------------------------------------------------


def test_a_symlink_loop_and_an_unreadable_proc_file_are_diagnostics(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    main_path = config(tmp_path, "[a.yaml, /proc/self/mem]")
    ctx = compile_config(str(main_path), CompileOptions(include_roots=("/proc",)))
    found = {d.value: (d.code, d.message) for d in ctx.sink.items}
    assert found[f"{tmp_path}/a.yaml"] == (
        "IL011",
        f"included file `{tmp_path}/a.yaml` is a symbolic link loop",
    )
    if Path("/proc/self/mem").exists():
        code, message = found["/proc/self/mem"]
        assert code == "IL011"
        assert message.startswith("included file `/proc/self/mem` cannot be read: ")


def test_includes_a_thousand_deep_stop_at_the_depth_limit(tmp_path: Path) -> None:
    for level in range(1000):
        (tmp_path / f"{level}.yaml").write_text(f"include: ['{level + 1}.yaml']\n")
    main_path = config(tmp_path, "['0.yaml']")
    ctx = compile_config(str(main_path))
    assert codes(ctx) == ["IL012"]
    assert len(ctx.sources.docs) == 1 + 32  # the main file and 32 levels below it


def test_an_integer_past_the_digit_limit_is_a_diagnostic(tmp_path: Path) -> None:
    main_path = config(
        tmp_path, "[]", PROVIDERS + ALIASES + "health: {failure_threshold: " + "9" * 5000 + "}\n"
    )
    ctx = compile_config(str(main_path))
    [diagnostic] = ctx.sink.items
    assert (diagnostic.code, diagnostic.span.line, diagnostic.span.col) == ("IL001", 8, 29)
    assert diagnostic.message == "YAML syntax error: an integer of 5,000 digits is too long (at most 4,300)"
    key = config(tmp_path / "key", "[]", "aliases: {" + "1" * 5000 + ": {chain: [a/b]}}\n")
    assert "IL001" in codes(compile_config(str(key)))


def test_output_to_a_directory_is_refused_and_leaves_nothing_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main_path = config(tmp_path / "repo", "[]")
    target = tmp_path / "out"
    target.mkdir()
    code, _, err = run(capsys, "compile", str(main_path), "-o", str(target))
    assert code == 2
    assert err.endswith(f"interlock: refusing to write `{target}`: it is a directory, not a regular file\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "repo"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_a_full_standard_output_is_a_clean_error() -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "interlock", "schema", "--check", "-o", "schema"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            cwd=ROOT,
        )
    assert done.returncode == 0  # nothing to print: the check passes
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "interlock", "compile", "config.rtx4090.yaml"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            cwd=ROOT,
        )
    assert done.returncode == 2
    assert done.stderr == "interlock: cannot write to standard output: No space left on device\n"


# --- item 9: `compile -o` writes only a regular file -----------------------------------------------


def test_output_to_a_device_or_a_symlink_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main_path = config(tmp_path / "repo", "[]")
    code, _, err = run(capsys, "compile", str(main_path), "-o", "/dev/null")
    assert code == 2
    assert "it is a character device, not a regular file" in err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "plan.json"
    link.symlink_to(victim)
    code, _, err = run(capsys, "compile", str(main_path), "-o", str(link))
    assert code == 2
    assert err.endswith(
        f"interlock: refusing to write `{link}`: it is a symbolic link; name the file it points to instead\n"
    )
    assert link.is_symlink()
    assert victim.read_text() == "keep me\n"
    assert run(capsys, "compile", str(main_path), "-o", str(victim))[0] == 0  # the file itself: replaced
    assert json.loads(victim.read_text())["format_version"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "repo", "victim.txt"]


@pytest.mark.timeout(60)  # bounds a hang (a FIFO read blocks for ever), not a speed
def test_check_against_a_fifo_is_refused_not_waited_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main_path = config(tmp_path / "repo", "[]")
    os.mkfifo(tmp_path / "plan.json")
    fifo = tmp_path / "plan.json"
    for argv in (["compile", str(main_path)], ["codegen", str(main_path), "--lang", "ts"]):
        code, _, err = run(capsys, *argv, "--check", str(fifo))
        assert code == 2
        assert err.endswith(
            f"interlock: cannot check `{fifo}`: it is a FIFO (named pipe), not a regular file\n"
        )


# --- item 10: an absolute budget on values, whatever the file's size ------------------------------


def test_the_value_budget_does_not_grow_with_padding(tmp_path: Path) -> None:
    bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 5)
    )
    padding = ("#" + "p" * 999 + "\n") * 1000  # 1 MB of comments once bought 10 million values
    main_path = config(tmp_path, "[]", padding + bomb)
    ctx = compile_config(str(main_path), CompileOptions(max_values=5_000))
    assert [d.message for d in ctx.sink.items] == [
        "YAML syntax error: the configuration holds more than 5,000 values (aliases expanded)"
    ]


def test_the_value_budget_is_shared_by_all_included_files(tmp_path: Path) -> None:
    for name in "abc":
        (tmp_path / f"{name}.yaml").write_text(
            f"models:\n  {name}/m: {{capabilities: [{', '.join(['tools'] * 30)}]}}\n"
        )
    main_path = config(tmp_path, "[a.yaml, b.yaml, c.yaml]")
    assert "IL001" not in codes(compile_config(str(main_path), CompileOptions(max_values=150)))
    ctx = compile_config(str(main_path), CompileOptions(max_values=100))  # 40 a file, 20 in the main one
    assert [d.span.file for d in ctx.sink.items if d.code == "IL001"] == [str(tmp_path / "c.yaml")]


# --- item 12: the rest -----------------------------------------------------------------------------


def test_a_long_line_is_cut_around_the_column(tmp_path: Path) -> None:
    # A one-line file (minified, or padded on purpose) once printed in full under every diagnostic.
    flow = ", ".join(f"k{i}: v" for i in range(300)) + ", pad: " + "x" * 100_000
    body = PROVIDERS + ALIASES + f"health: {{{flow}, probe_interval: 1, bad: 2}}\n"
    ctx = compile_config(str(config(tmp_path, "[]", body)))
    report = text_report(ctx)
    assert len(ctx.sink.items) > 300
    assert max(len(line) for line in report.splitlines()) < 260
    lines = report.splitlines()
    last = lines.index(next(line for line in lines if "unknown key `bad`" in line))
    assert lines[last + 1].startswith("  8 | …")
    assert lines[last + 1].endswith("probe_interval: 1, bad: 2}")
    caret = lines[last + 2]
    assert caret.index("^") == lines[last + 1].index("bad: 2}")  # the caret still points at the key


@pytest.mark.parametrize(
    ("char", "name"), [("\x00", "a NUL character (U+0000)"), ("\x0c", "a form feed (U+000C)")]
)
def test_nul_and_form_feed_are_placed_and_named(tmp_path: Path, char: str, name: str) -> None:
    main_path = config(tmp_path, "[]", PROVIDERS + f"aliases:\n  fast: {{chain: [groq/a,{char} groq/b]}}\n")
    ctx = compile_config(str(main_path))
    [diagnostic] = ctx.sink.items
    assert (diagnostic.code, diagnostic.span.line, diagnostic.span.col) == ("IL001", 7, 25)
    assert diagnostic.message == f"the file holds {name}, which YAML does not allow"
    assert (
        diagnostic.hint
        == "delete it: YAML text may hold tabs and line breaks, but no other control characters"
    )
    assert "\x00" not in text_report(ctx)
    assert "\x0c" not in text_report(ctx)


def test_utf8_is_judged_by_the_bytes_not_by_replacement_characters(tmp_path: Path) -> None:
    body = (
        PROVIDERS + 'aliases:\n  fast: {chain: [groq/a, openrouter/b], description: "bad byte \ufffd ok"}\n'
    )
    good = config(tmp_path / "good", "[]", body)
    assert compile_config(str(good)).sink.items == []
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"version: 1\n# caf\xe9\n")
    [diagnostic] = compile_config(str(bad)).sink.items
    assert (diagnostic.message, diagnostic.span.line, diagnostic.span.col) == (
        "the file is not valid UTF-8 text",
        2,
        6,
    )
    assert "\udce9" not in text_report(compile_config(str(bad)))


def test_one_file_under_two_spellings_is_read_once(tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "providers.yaml").write_text(PROVIDERS)
    (tmp_path / "alias.yaml").symlink_to(tmp_path / "parts" / "providers.yaml")
    main_path = config(
        tmp_path,
        "[parts/providers.yaml, ./parts/providers.yaml, parts/../parts/providers.yaml, alias.yaml]",
        ALIASES,
    )
    ctx = compile_config(str(main_path))
    assert ctx.sink.items == []
    assert len(ctx.sources.docs) == 2


@pytest.mark.timeout(60)  # bounds a hang (a FIFO read blocks for ever), not a speed
def test_a_main_config_that_is_no_regular_file_is_named_for_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    os.mkfifo(tmp_path / "pipe")
    for path, what in (
        (tmp_path, "is a directory, not a regular file"),
        (tmp_path / "pipe", "is a FIFO (named pipe), not a regular file"),
        (Path("/dev/null"), "is a character device, not a regular file"),
        (tmp_path / "missing.yaml", "does not exist"),
    ):
        for command in (["lint"], ["compile"], ["explain"]):
            argv = [*command, str(path), *(["fast"] if command == ["explain"] else [])]
            assert run(capsys, *argv) == (2, "", f"interlock: configuration file `{path}` {what}\n")


def test_a_url_with_a_line_break_is_refused_not_silently_cleaned(tmp_path: Path) -> None:
    # `urlsplit` drops CR/LF/tab, so such a URL looked valid; the request would have carried them.
    body = (
        "providers:\n"
        '  groq: {kind: openai, base_url: "https://api.groq.com/v1\\r\\nX-Evil: 1", api_key_env: G}\n'
        "  local:\n    kind: ollama\n"
        '    workers: [{name: box, url: "http://10.0.0.1:11434\\n/x"}]\n'
        "aliases:\n  fast: {chain: [groq/a, local/b]}\n"
    )
    ctx = compile_config(str(config(tmp_path, "[]", body)))
    assert [(d.code, d.path, d.message.split(":")[0]) for d in ctx.sink.sorted()] == [
        ("IL106", "providers.groq.base_url", "`providers.groq.base_url` holds the control character U+000D"),
        (
            "IL106",
            "providers.local.workers[0].url",
            "`providers.local.workers[0].url` holds the control character U+000A",
        ),
    ]


def test_explain_escapes_what_it_cannot_print(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = PROVIDERS + 'aliases:\n  "a\\rb": {chain: [groq/a, openrouter/b], description: "one\\x1b[2Jtwo"}\n'
    code, out, err = run(capsys, "explain", str(config(tmp_path, "[]", body)), "a\rb")
    assert code == 0
    assert out.splitlines()[0] == "a\\x0db: one\\x1b[2Jtwo"
    assert "\r" not in out
    assert "\x1b" not in out
    assert err.startswith("note: the configuration has 1 error")


def test_the_compiler_refuses_every_header_the_runtime_would_refuse_at_plan_load(tmp_path: Path) -> None:
    """The runtime checks the plan's headers again when it loads it; what it refuses, the compiler
    refuses first, with a position (both read the rule from ``interlock.common.headers``)."""
    from interlock.common.headers import RESERVED_HEADERS, header_value_problem

    for header in sorted(RESERVED_HEADERS):
        body = PROVIDERS + ALIASES + f"server: {{resolved_header: {header.title()}}}\n"
        ctx = compile_config(str(config(tmp_path / header, "[]", body)))
        assert [(d.code, d.path) for d in ctx.sink.items] == [("IL013", "server.resolved_header")]
    for name in (" fast", "fast ", "fa\tst", "fa\x00st", "fa\x7fst", "fa\rst"):
        assert header_value_problem(name) is not None
        quoted = json.dumps(name)
        body = PROVIDERS + f"aliases:\n  {quoted}: {{chain: [groq/a, openrouter/b]}}\n"
        ctx = compile_config(str(config(tmp_path / str(ord(name[2])), "[]", body)))
        assert [(d.code, d.path) for d in ctx.sink.items] == [("IL013", f"aliases.{visible(name)}")]


def test_every_header_the_runtime_sets_on_an_answer_is_one_the_plan_may_not_name() -> None:
    """``server.resolved_header: X-Request-Id`` would send two request ids: every ``x-`` and
    ``retry-after`` header named in the runtime's code is reserved (or means something to browsers),
    but the request headers it only reads."""
    import ast

    from interlock.common.headers import MEANINGFUL_HEADERS, RESERVED_HEADERS, header_name_problem

    read_only = {
        "x-api-key",
        "x-interlock-priority",
        "x-stainless-timeout",  # the caller's own deadline, which no retry waits past
    }  # read from a request (a caller's key, its class), never sent back
    named: set[str] = set()
    for path in (ROOT / "interlock" / "runtime").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
                value = node.value.decode() if isinstance(node.value, bytes) else node.value
                if value.startswith(("x-", "retry-after")) and value.replace("-", "").isalpha():
                    named.add(value)
    assert {"x-request-id", "x-interlock-dropped", "retry-after-ms"} <= named
    assert named - read_only - RESERVED_HEADERS - MEANINGFUL_HEADERS == set()
    assert header_name_problem("X-Request-Id") == "is a header the gateway sets itself"


def test_the_json_report_of_a_hostile_file_stays_valid(tmp_path: Path) -> None:
    main_path = config(
        tmp_path, "[]", PROVIDERS + 'aliases:\n  "a\\r\\nb": {chain: [groq/a, openrouter/b]}\n'
    )
    ctx = compile_config(str(main_path))
    rows = json.loads(render(ctx.sink.items, "json", ctx.sources))
    assert [(row["code"], row["path"]) for row in rows] == [("IL013", "aliases.a\\x0d\\x0ab")]
