"""`interlock diff --base-ref`: a config compiled as it was at a git ref, includes and profile included."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from interlock.cli import main

from .tree import ConfigTree


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.invalid", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ConfigTree:
    """A repository whose first commit holds the base config and whose second commit edits two of its
    files: the included aliases file (a chain) and the hardware profile file (VRAM)."""
    tree = ConfigTree.copy(tmp_path / "repo")
    git(tree.root, "init", "-q", "-b", "main")
    git(tree.root, "add", ".")
    git(tree.root, "commit", "-q", "-m", "base")
    chain = tree.aliases["acme/chat"]["chain"]
    chain[0], chain[1] = chain[1], chain[0]
    tree.profile["hardware"]["vram_gib"] = 48
    tree.save()
    git(tree.root, "commit", "-q", "-am", "groq first, bigger card")
    monkeypatch.chdir(tree.root)
    return tree


def diff(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[tuple[str, str | None]], str]:
    code = main(["diff", "--format", "json", *argv])
    out, err = capsys.readouterr()
    kinds = [(c["kind"], c["field"]) for c in json.loads(out)] if out else []
    # with --format json the input errors are a JSON array on stderr: shown here as the text lines
    errors = "".join(f"error: {e['error']}\n" for e in json.loads(err)) if err else ""
    return code, kinds, errors


EXPECTED = [
    ("first-choice-changed", None),
    ("chain-reordered", None),
    ("hardware-changed", "vram_gib"),
    ("placement-changed", "budget_gib"),  # placement's budget is a share of that memory
    ("alerts-changed", None),  # the chain's first choice is in its fallback-rate alert
]


def test_base_ref_reads_the_include_and_the_profile_at_the_ref(repo: ConfigTree, capsys) -> None:
    assert diff(capsys, "--base-ref", "HEAD~1", "config.yaml") == (0, EXPECTED, "")


def test_the_working_tree_is_head_and_refs_ignore_it(repo: ConfigTree, capsys) -> None:
    repo.aliases["acme/vision"]["description"] = "uncommitted"
    repo.save()
    assert diff(capsys, "--base-ref", "HEAD~1", "config.yaml")[1] == [
        *EXPECTED[:-1],
        ("description-changed", None),  # cosmetic too, in the aliases' section: before the alerts
        EXPECTED[-1],
    ]
    assert diff(capsys, "--base-ref", "HEAD~1", "--head-ref", "HEAD", "config.yaml")[1] == EXPECTED
    assert diff(capsys, "--base-ref", "HEAD", "config.yaml")[1] == [("description-changed", None)]


def test_the_text_names_the_ref(repo: ConfigTree, capsys) -> None:
    assert main(["diff", "--base-ref", "HEAD~1", "config.yaml"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "5 changes from config.yaml@HEAD~1 to config.yaml (2 routing, 2 capacity, 1 cosmetic)"


def test_a_renamed_config_is_diffed_against_its_old_name(repo: ConfigTree, capsys) -> None:
    git(repo.root, "mv", "config.yaml", "gateway.yaml")
    git(repo.root, "commit", "-q", "-m", "rename")
    assert diff(capsys, "--base-ref", "HEAD~2", "config.yaml", "gateway.yaml") == (0, EXPECTED, "")


def test_a_file_missing_at_the_ref_is_reported(repo: ConfigTree, capsys) -> None:
    Path("other.yaml").write_text((repo.root / "config.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    assert diff(capsys, "--base-ref", "HEAD", "other.yaml") == (
        1,
        [],
        "error: other.yaml@HEAD: file does not exist\n",
    )


def test_an_include_missing_at_the_ref_fails_the_compile(repo: ConfigTree, capsys) -> None:
    repo.config["include"].append("extra.yaml")
    repo.save()
    Path("extra.yaml").write_text("models: {}\n", encoding="utf-8")
    git(repo.root, "add", "extra.yaml")
    git(repo.root, "commit", "-q", "-am", "extra include")
    assert diff(capsys, "--base-ref", "HEAD", "config.yaml")[0] == 0
    git(repo.root, "rm", "-q", "extra.yaml")
    git(repo.root, "commit", "-q", "-m", "drop the file, keep the include")
    code, _, err = diff(capsys, "--base-ref", "HEAD", "config.yaml")
    assert code == 1
    assert err.splitlines()[:2] == [
        "error: config.yaml@HEAD does not compile:",
        "config.yaml:3:25: error IL005 include-not-found: included file `extra.yaml` does not exist",
    ]


def test_a_file_that_was_not_utf8_at_the_ref_is_a_diagnostic(repo: ConfigTree, capsys) -> None:
    aliases = repo.root / "aliases.yaml"
    good = aliases.read_bytes()
    aliases.write_bytes(good + b"# caf\xe9\n")
    git(repo.root, "commit", "-q", "-am", "latin-1 comment")
    aliases.write_bytes(good)
    line = len(good.splitlines()) + 1
    code, _, err = diff(capsys, "--base-ref", "HEAD", "config.yaml")
    assert code == 1
    assert err.splitlines()[:2] == [
        "error: config.yaml@HEAD does not compile:",
        f"aliases.yaml:{line}:6: error IL001 yaml-syntax: the file is not valid UTF-8 text",
    ]


def test_a_file_at_the_ref_is_held_to_the_size_cap(repo: ConfigTree, capsys) -> None:
    aliases = repo.root / "aliases.yaml"
    good = aliases.read_bytes()
    aliases.write_bytes(good + b"#" * 4_000 + b"\n")
    git(repo.root, "commit", "-q", "-am", "padded")
    aliases.write_bytes(good)
    code, _, err = diff(capsys, "--base-ref", "HEAD", "config.yaml", "--max-file-bytes", "4000")
    assert code == 1
    assert (
        "error IL011 unreadable-file: included file `aliases.yaml` is larger than 4,000 bytes at HEAD" in err
    )
    assert diff(capsys, "--base-ref", "HEAD", "config.yaml")[0] == 0


def test_an_unknown_ref(repo: ConfigTree, capsys) -> None:
    code, _, err = diff(capsys, "--base-ref", "origin/nope", "config.yaml")
    assert code == 1
    assert err == (
        f"error: `origin/nope` is not a commit in {repo.root.resolve()}; in CI, fetch the base branch first "
        "(`actions/checkout` with `fetch-depth: 0`)\n"
    )


def test_outside_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    tree = ConfigTree.copy(tmp_path / "plain").save()
    monkeypatch.chdir(tree.root)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    code, _, err = diff(capsys, "--base-ref", "main", "config.yaml")
    assert (code, err) == (
        1,
        "error: `config.yaml` is not inside a git repository, so `main` cannot be read\n",
    )
