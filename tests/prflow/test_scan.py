"""`interlock lint CONFIG --scan PATH...`: the drift gate over a fixture tree with hits and allowed files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interlock.cli import main
from interlock.compiler import compile_config
from interlock.scan import scan_into
from interlock.scan.globs import AllowList, translate
from interlock.scan.matcher import matcher_for

from .tree import ConfigTree

PROVIDERS = ("local", "spare", "groq", "openrouter")

# Every file of the fixture tree. The config itself (config.yaml, aliases.yaml, profiles/lab.yaml, copied
# from the base fixture) is full of `provider/model` strings and must not be reported.
TREE: dict[str, str | bytes] = {
    "src/writing.ts": (
        "const DEFAULT_MODEL = process.env.WRITING_MODEL || 'local/gemma3:4b';\n"
        "const fast = 'local/qwen2.5:7b';\n"
        'const agent = `groq/llama-3.1-8b-instant`; const vision = "openrouter/openai/gpt-4o";\n'
    ),
    "src/api/client.py": (
        '"""Talks to the gateway."""\n'
        'MODEL = "spare/phi3:mini"  # the batch model\n'
        'UNTAGGED = "local/llava"  # Ollama reads it as llava:latest, which no chain holds\n'
        'QUANT = "local/qwen2.5:7b-instruct-q4_K_M."\n'
    ),
    "src/not_models.ts": (
        "const url = 'https://gateway.internal/local/qwen2.5:7b';\n"
        "import { GoogleGenAI } from '@openrouter/sdk';\n"
        "const path = 'vendor/groq/llama-3.1-8b-instant';\n"
        "const other = 'mygroq/llama';\n"
        "if (model.startsWith('groq/')) { route(model); }\n"
        "import 'local/schema/any.proto';\n"
        "const dev = 'local/debug-model'; // interlock: allow-model\n"
        "const host = 'http://local:11434/api/tags';\n"
    ),
    "src/deep/a/b/c/d.go": 'const model = "groq/llama-3.3-70b-versatile"\n',
    "src/utf8.md": "Größe: ünïcode before local/qwen2.5:7b on one line\n",
    "src/image.png": b"\x89PNG\r\n\x1a\n\x00\x00 local/qwen2.5:7b in a binary\n",
    "tests/test_routing.py": 'CHAIN = ["local/qwen2.5:7b", "groq/llama-3.1-8b-instant"]\n',
    "docs/guide.md": "Use `local/qwen2.5:7b` only through `acme/chat`.\n",
    "docs/deeper/notes.md": "Not allowed: local/qwen2.5:7b\n",
    "node_modules/pkg/index.js": "module.exports = 'groq/llama-3.1-8b-instant';\n",
    ".git/config": "[remote] url = local/qwen2.5:7b\n",
    "venv-any-name/pyvenv.cfg": "home = /usr/bin\n",
    "venv-any-name/lib/site.py": "X = 'groq/llama-3.1-8b-instant'\n",
    "src/__pycache__/client.cpython-311.pyc": "local/qwen2.5:7b\n",
}


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ConfigTree:
    tree = ConfigTree.copy(tmp_path / "repo").save()
    for name, content in TREE.items():
        path = tree.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    monkeypatch.chdir(tree.root)
    return tree


def lint(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["lint", "config.yaml", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_text_report(tree: ConfigTree, capsys, snapshot) -> None:
    code, out, err = lint(capsys, "--scan", ".")
    assert code == 0  # hard-coded models are warnings: only `--strict` fails on them
    assert out == snapshot
    assert err == "scanned 6 file(s) under . (1 binary or large skipped): 10 hard-coded model(s)\n"


def test_strict_fails_and_github_annotations(tree: ConfigTree, capsys, snapshot) -> None:
    code, out, _ = lint(capsys, "--scan", "src", "docs", "--strict", "--format", "github")
    assert code == 1
    assert out == snapshot
    first = out.splitlines()[0]
    assert first == (
        "::warning file=docs/deeper/notes.md,line=1,col=14,title=IL601 hard-coded-model::hard-coded model "
        "`local/qwen2.5:7b` bypasses the aliases (hint: use `acme/chat` (first choice) or `acme/batch` "
        "(candidate 2) instead)"
    )


def test_json_rows(tree: ConfigTree, capsys) -> None:
    _, out, err = lint(capsys, "--scan", "src/writing.ts", "--format", "json")
    assert err == ""  # the scan's file count is a text status line: not with --format json
    rows = [(r["file"], r["line"], r["col"], r["code"], r["value"], r["hint"]) for r in json.loads(out)]
    assert rows == [
        (
            "src/writing.ts",
            1,
            53,
            "IL601",
            "local/gemma3:4b",
            "no alias's chain holds this model: add it to one, then use that alias",
        ),
        (
            "src/writing.ts",
            2,
            15,
            "IL601",
            "local/qwen2.5:7b",
            "use `acme/chat` (first choice) or `acme/batch` (candidate 2) instead",
        ),
        (
            "src/writing.ts",
            3,
            16,
            "IL601",
            "groq/llama-3.1-8b-instant",
            "use `acme/agent` (first choice) or `acme/chat` (candidate 2) instead",
        ),
        (
            "src/writing.ts",
            3,
            60,
            "IL601",
            "openrouter/openai/gpt-4o",
            "use `acme/agent` (candidate 2) or `acme/vision` (candidate 2) or `acme/chat` (candidate 3) "
            "instead",
        ),
    ]


def test_nothing_to_report(tree: ConfigTree, capsys) -> None:
    code, out, err = lint(capsys, "--scan", "tests", "--strict")
    assert (code, out) == (0, "config.yaml: ok (0 errors, 0 warnings)\n")
    assert err == "scanned 0 file(s) under tests (0 binary or large skipped): 0 hard-coded model(s)\n"


def test_a_missing_path_is_an_error(tree: ConfigTree, capsys) -> None:
    code, out, _ = lint(capsys, "--scan", "src/writing.ts", "nowhere")
    assert code == 1
    assert (
        out.splitlines()[0] == "nowhere: error IL602 scan-path-not-found: scan path `nowhere` does not exist"
    )


@pytest.mark.parametrize(
    ("chain_entry", "written", "hint"),
    [
        ("local/mistral", "local/mistral:latest", "use `acme/local` (first choice) instead"),
        ("local/mistral:latest", "local/mistral", "use `acme/local` (first choice) instead"),
        (
            "local/mistral:7b",
            "local/mistral",
            "no alias's chain holds this model: add it to one, then use that alias",
        ),
        (
            "groq/mistral",
            "groq/mistral:latest",
            "no alias's chain holds this model: add it to one, then use that alias",
        ),
    ],
)
def test_ollama_reads_an_untagged_model_as_latest(
    tree: ConfigTree, chain_entry: str, written: str, hint: str
) -> None:
    tree.aliases["acme/local"] = {"chain": [chain_entry, "groq/llama-3.1-8b-instant"]}
    tree.save()
    (tree.root / "src" / "one.py").write_text(f'M = "{written}"\n', encoding="utf-8")
    ctx = compile_config("config.yaml")
    scan_into(ctx, "config.yaml", ["src/one.py"])
    assert [(d.value, d.hint) for d in ctx.sink.items if d.code == "IL601"] == [(written, hint)]


def test_only_declared_providers_count(tree: ConfigTree) -> None:
    (tree.root / "src" / "other.ts").write_text("const m = 'together/mixtral-8x7b';\n", encoding="utf-8")
    ctx = compile_config("config.yaml")
    stats = scan_into(ctx, "config.yaml", ["src/other.ts"])
    assert (stats.files, stats.hits, ctx.sink.items) == (1, 0, [])


def test_allow_globs_are_relative_to_the_config(tree: ConfigTree, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    ctx = compile_config("repo/config.yaml")
    scan_into(ctx, "repo/config.yaml", ["repo"])
    files = sorted({d.span.file for d in ctx.sink.items})
    assert files == [
        "repo/docs/deeper/notes.md",
        "repo/src/api/client.py",
        "repo/src/deep/a/b/c/d.go",
        "repo/src/utf8.md",
        "repo/src/writing.ts",
    ]


# --- the token matcher -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("'groq/llama-3.1-8b-instant'", ["groq/llama-3.1-8b-instant"]),
        ("model: local/qwen2.5:7b", ["local/qwen2.5:7b"]),
        ("(local/qwen2.5:7b)", ["local/qwen2.5:7b"]),
        ("see local/qwen2.5:7b.", ["local/qwen2.5:7b"]),
        ("openrouter/anthropic/claude-3.5-sonnet,", ["openrouter/anthropic/claude-3.5-sonnet"]),
        ("x=local/a y=spare/b", ["local/a", "spare/b"]),
        ("https://host/local/qwen2.5:7b", []),
        ("src/local/model.py", []),
        ("@groq/sdk", []),
        ("my-groq/llama mygroq/llama groq_x/llama", []),
        ("'groq/'", []),
        ("localhost/x", []),
        ("http://local:11434/api", []),
        ("local/proto/any.proto local/readme.MD", []),
        ("Grüße/local/x", []),
        ("é local/x", ["local/x"]),
    ],
)
def test_tokens(text: str, tokens: list[str]) -> None:
    matcher = matcher_for(PROVIDERS)
    assert matcher is not None
    assert [hit.token for hit in matcher.find(text.encode("utf-8"))] == tokens


def test_positions_are_lines_and_characters() -> None:
    matcher = matcher_for(PROVIDERS)
    assert matcher is not None
    data = "first\nÄÖÜ 'local/a'\n\n  local/b local/c\n".encode()
    assert [(h.line, h.col, h.token) for h in matcher.find(data)] == [
        (2, 6, "local/a"),
        (4, 3, "local/b"),
        (4, 11, "local/c"),
    ]


def test_no_providers_no_matcher() -> None:
    assert matcher_for([]) is None


# --- allow globs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("glob", "allowed", "refused"),
    [
        ("tests/**", ["tests", "tests/a.py", "tests/x/y/z.ts"], ["src/tests/a.py", "testsuite/a.py"]),
        ("tests/", ["tests", "tests/a.py"], ["src/tests"]),
        ("docs/*.md", ["docs/a.md"], ["docs/x/a.md", "a.md", "docs/a.mdx"]),
        ("*.md", ["a.md", "x/y/a.md"], ["a.md.txt"]),
        ("**/fixtures/**", ["fixtures/a", "x/fixtures/y/z"], ["x/fixtures2/a"]),
        ("/aliases.yaml", ["aliases.yaml"], ["x/aliases.yaml"]),
        ("./scripts/seed?.py", ["scripts/seed1.py"], ["scripts/seed10.py"]),
        ("src/[!a]*.ts", ["src/b.ts"], ["src/a.ts"]),
    ],
)
def test_globs(glob: str, allowed: list[str], refused: list[str]) -> None:
    allow = AllowList.of([glob])
    assert [p for p in allowed if not allow.allows(p)] == [], translate(glob)
    assert [p for p in refused if allow.allows(p)] == [], translate(glob)


def test_an_empty_allow_list_allows_nothing() -> None:
    assert not AllowList.of([]).allows("anything")


@pytest.mark.parametrize("spelling", [".", "./", "docs/..", "{abs}", "{abs}/"])
def test_every_spelling_of_a_root_allows_the_same_files(tree: ConfigTree, spelling: str) -> None:
    ctx = compile_config("config.yaml")
    scan_into(ctx, "config.yaml", [spelling.format(abs=tree.root)])
    assert sorted({d.span.file for d in ctx.sink.items}) == [
        "docs/deeper/notes.md",
        "src/api/client.py",
        "src/deep/a/b/c/d.go",
        "src/utf8.md",
        "src/writing.ts",
    ]


def test_a_single_file_under_an_allowed_folder_stays_allowed(tree: ConfigTree) -> None:
    ctx = compile_config("config.yaml")
    stats = scan_into(ctx, "config.yaml", ["tests/test_routing.py", "docs/guide.md", "aliases.yaml"])
    assert (stats.files, ctx.sink.items) == (0, [])


def test_the_scan_codes_are_documented() -> None:
    from interlock.compiler.codes import CODES

    docs = (Path(__file__).resolve().parents[2] / "docs" / "review.md").read_text()
    rows = [
        f"| {c.code} | {c.name} | {c.level} | {c.summary} |"
        for c in CODES.values()
        if c.code.startswith("IL6")
    ]
    assert [row for row in rows if row not in docs] == []
    assert len(rows) == 2


def test_a_credential_on_a_reported_line_is_masked(tree: ConfigTree, capsys) -> None:
    """The scan registers each file with hits as a source doc; shown lines go through the same masking as
    config lines, and the caret still points at the model."""
    (tree.root / "src" / "keys.py").write_text(
        'c = Client(api_key="sk-proj-abcdefghijklmnop", model="groq/llama-3.1-8b-instant")\n'
        'url = "https://bot:pa55w0rd@git.example/x"; m = "groq/llama-3.1-8b-instant"\n',
        encoding="utf-8",
    )
    code, out, _ = lint(capsys, "--scan", "src/keys.py")
    assert code == 0
    assert "sk-proj" not in out
    assert "pa55w0rd" not in out
    lines = out.splitlines()
    shown = [(lines[i], lines[i + 1]) for i, line in enumerate(lines) if line.startswith(("  1 |", "  2 |"))]
    assert [text for text, _ in shown] == [
        '  1 | c = Client(api_key=***, model="groq/llama-3.1-8b-instant")',
        '  2 | url = "https://***@git.example/x"; m = "groq/llama-3.1-8b-instant"',
    ]
    assert [caret.index("^") for _, caret in shown] == [text.index("groq/") for text, _ in shown]
