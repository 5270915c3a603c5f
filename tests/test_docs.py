"""The project's own documentation stands on its own: no path outside the repository, no dead link."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
OUTSIDE = re.compile(r"\.\./shared|\bshared/(?:reference|seeds|STYLE)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_doc_points_outside_the_repository(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    assert [m.group(0) for m in OUTSIDE.finditer(text)] == []
    for match in LINK.finditer(text):
        target = match.group(1)
        if "://" in target or target.startswith("mailto:"):
            continue
        resolved = (doc.parent / target).resolve()
        assert resolved.is_relative_to(ROOT), f"{doc.name} links outside the repository: {target}"
        assert resolved.exists(), f"{doc.name} links to a missing file: {target}"


HEADLINE = re.compile(r"<!-- headline: start -->\n(.*?)\n<!-- headline: end -->", re.S)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    kept = "".join(c for c in heading.strip().lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def test_the_readme_shows_the_benchmark_headline_block_as_docs_benchmarks_has_it() -> None:
    readme = HEADLINE.search((ROOT / "README.md").read_text(encoding="utf-8"))
    bench_text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    bench = HEADLINE.search(bench_text)
    assert readme is not None, "README.md holds a `<!-- headline -->` block"
    assert bench is not None, "docs/benchmarks.md holds a `<!-- headline -->` block"
    # the README links into docs/benchmarks.md; the page itself links to its own anchors
    assert readme.group(1).replace("](docs/benchmarks.md#", "](#") == bench.group(1)
    anchors = {_slug(line.lstrip("#")) for line in bench_text.splitlines() if line.startswith("#")}
    linked = re.findall(r"\]\(#([^)]+)\)", bench.group(1))
    assert linked
    assert [a for a in linked if a not in anchors] == []


def test_the_readme_s_smallest_configuration_lints_clean(tmp_path: Path) -> None:
    from interlock.cli import main

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## The configuration, in brief\n.*?```yaml\n(.*?)```", text, re.S)
    assert block is not None
    config = tmp_path / "interlock.yaml"
    config.write_text(block.group(1), encoding="utf-8")
    assert main(["lint", str(config), "--strict"]) == 0
