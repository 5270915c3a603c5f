"""`interlock diff`: every kind of change, its classification, the three formats, exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from interlock.cli import main
from interlock.diff import KINDS, Change, Classification, diff_plans
from interlock.diff.inputs import PlanInput, load_plan
from interlock.diff.render import render

from .scenarios import SCENARIOS, Scenario
from .tree import ConfigTree

ROOT = Path(__file__).resolve().parents[2]


def redact(text: str) -> str:
    """Plan hashes change whenever the plan format grows; the snapshots are about everything else."""
    return re.sub(r"sha256:[0-9a-f]{12}\b", "sha256:<hash>", text)


@pytest.fixture
def trees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ConfigTree, ConfigTree]:
    monkeypatch.chdir(tmp_path)
    return ConfigTree.copy(tmp_path / "base"), ConfigTree.copy(tmp_path / "head")


def apply(scenario: Scenario, base: ConfigTree, head: ConfigTree) -> None:
    if scenario.base_edit is not None:
        scenario.base_edit(base)
        scenario.base_edit(head)
    scenario.edit(head)
    base.save()
    head.save()


def diff_of(
    scenario: Scenario, trees: tuple[ConfigTree, ConfigTree]
) -> tuple[PlanInput, PlanInput, list[Change]]:
    apply(scenario, *trees)
    base, head = load_plan("base/config.yaml"), load_plan("head/config.yaml")
    return base, head, diff_plans(base.plan, head.plan)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_each_kind_of_change_in_every_format(scenario: Scenario, trees, snapshot) -> None:
    base, head, changes = diff_of(scenario, trees)
    assert {change.kind for change in changes} == scenario.kinds
    assert render(changes, "text", base, head) == snapshot(name="text")
    assert redact(render(changes, "markdown", base, head)) == snapshot(name="markdown")
    assert render(changes, "json", base, head) == snapshot(name="json")


def test_every_kind_has_a_scenario() -> None:
    covered = set().union(*(scenario.kinds for scenario in SCENARIOS))
    assert sorted(set(KINDS) - covered) == []


def test_every_kind_is_documented_with_its_classification() -> None:
    docs = (ROOT / "docs" / "review.md").read_text(encoding="utf-8")
    missing = [
        name for name, kind in KINDS.items() if f"| `{name}` | {kind.classification.value} |" not in docs
    ]
    assert missing == []


BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}


@pytest.mark.parametrize(
    ("name", "classes"),
    [
        ("alias-removed", {Classification.BREAKING, Classification.COSMETIC}),  # and its alerts
        ("default-alias", {Classification.BREAKING}),
        ("requires-dropped", {Classification.BREAKING}),
        ("direct-denied", {Classification.BREAKING}),
        ("first-choice", {Classification.ROUTING, Classification.COSMETIC}),
        ("candidate-replaced", {Classification.ROUTING, Classification.COSMETIC}),
        ("alias-added", {Classification.ROUTING, Classification.COSMETIC}),
        ("base-url", {Classification.ROUTING, Classification.CREDENTIALS}),
        ("base-url-same-host", {Classification.ROUTING}),
        ("key-variable", {Classification.CREDENTIALS}),
        ("slot-limit", {Classification.CAPACITY}),
        ("provider-timeout", {Classification.CAPACITY}),
        ("health", {Classification.CAPACITY}),
        ("queue", {Classification.CAPACITY, Classification.COSMETIC}),
        ("description", {Classification.COSMETIC}),
    ],
)
def test_classification(name: str, classes: set[Classification], trees) -> None:
    _, _, changes = diff_of(BY_NAME[name], trees)
    assert {change.classification for change in changes} == classes


def _combined(tree: ConfigTree) -> None:
    for name in ("description", "health", "first-choice", "alias-removed", "max-concurrent"):
        BY_NAME[name].edit(tree)


def test_breaking_changes_come_first(trees, snapshot) -> None:
    base, head, changes = diff_of(Scenario("combined", _combined, frozenset()), trees)
    ranks = [change.classification.rank for change in changes]
    assert ranks == sorted(ranks)
    assert changes[0].kind == "alias-removed"
    markdown = render(changes, "markdown", base, head)
    titles = re.findall(r"^#### (.+)$", markdown, flags=re.MULTILINE)
    assert titles == ["Aliases", "Workers", "Health and circuit breakers"]
    assert f"`{base.plan.content_hash[:19]}`" in markdown
    assert redact(markdown) == snapshot(name="markdown")
    assert render(changes, "text", base, head) == snapshot(name="text")


def _secret_elsewhere(tree: ConfigTree) -> None:
    BY_NAME["alias-removed"].edit(tree)
    tree.provider("openrouter")["base_url"] = "https://collector.example.net/v1"
    tree.provider("openrouter")["api_key_hosts"] = ["collector.example.net"]  # IL117 without it


def test_a_credential_sent_to_a_new_host_comes_first_naming_the_variable_and_the_host(trees) -> None:
    base, head, changes = diff_of(Scenario("elsewhere", _secret_elsewhere, frozenset()), trees)
    first = changes[0]
    assert (first.kind, first.subject, first.field) == (
        "credential-sent",
        "OPENROUTER_API_KEY",
        "collector.example.net",
    )
    assert first.summary == (
        "`OPENROUTER_API_KEY` is now sent to collector.example.net (provider `openrouter`); "
        "before: openrouter.ai"
    )
    titles = re.findall(r"^#### (.+)$", render(changes, "markdown", base, head), flags=re.MULTILINE)
    assert titles[0].startswith("Credentials")


def test_the_chain_change_names_the_new_first_model(trees) -> None:
    _, _, changes = diff_of(BY_NAME["first-choice"], trees)
    first = next(change for change in changes if change.kind == "first-choice-changed")
    assert first.summary == (
        "`acme/chat` now answers with `groq/llama-3.1-8b-instant` first (was `local/qwen2.5:7b`)"
    )


def test_effective_slots_per_model_before_and_after(trees) -> None:
    _, _, changes = diff_of(BY_NAME["max-concurrent"], trees)
    slots = [(c.subject, c.field, c.before, c.after) for c in changes if c.kind == "slots-changed"]
    assert slots == [("gpu-b", "llava:7b", 1, 2), ("gpu-b", "qwen2.5:7b", 1, 2)]


# --- the command -------------------------------------------------------------------------------


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["diff", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_no_changes_says_so_and_exits_0(trees, capsys) -> None:
    for tree in trees:
        tree.save()
    code, out, _ = cli(capsys, "base/config.yaml", "head/config.yaml", "--fail-on", "any")
    assert (code, out) == (
        0,
        "no routing changes from base/config.yaml to head/config.yaml: both compile to the same plan\n",
    )
    code, out, _ = cli(capsys, "base/config.yaml", "head/config.yaml", "--format", "json")
    assert (code, out) == (0, "[]\n")
    code, out, _ = cli(capsys, "base/config.yaml", "head/config.yaml", "--format", "markdown")
    assert code == 0
    assert (
        "No routing changes from `base/config.yaml` to `head/config.yaml`: both compile to the same plan."
        in out
    )


@pytest.mark.parametrize(
    ("name", "fail_on", "code"),
    [
        ("alias-removed", "breaking", 1),
        ("alias-removed", "routing", 1),
        ("alias-removed", "any", 1),
        ("first-choice", "breaking", 0),
        ("first-choice", "routing", 1),
        ("first-choice", "any", 1),
        ("health", "breaking", 0),
        ("health", "routing", 0),
        ("health", "any", 1),
        ("description", "routing", 0),
        ("description", "any", 1),
        ("alias-removed", None, 0),
        ("base-url", "credentials", 1),
        ("base-url", "breaking", 1),
        ("key-variable", "credentials", 1),
        ("alias-removed", "credentials", 0),
        ("base-url-same-host", "credentials", 0),
    ],
)
def test_fail_on(name: str, fail_on: str | None, code: int, trees, capsys) -> None:
    apply(BY_NAME[name], *trees)
    flags = ["--fail-on", fail_on] if fail_on else []
    assert cli(capsys, "base/config.yaml", "head/config.yaml", *flags)[0] == code


def test_plans_and_configs_give_the_same_diff(trees, capsys) -> None:
    apply(BY_NAME["first-choice"], *trees)
    assert main(["compile", "base/config.yaml", "-o", "base.json"]) == 0
    assert main(["compile", "head/config.yaml", "-o", "head.json"]) == 0
    capsys.readouterr()
    from_configs = cli(capsys, "base/config.yaml", "head/config.yaml", "--format", "json")
    from_plans = cli(capsys, "base.json", "head.json", "--format", "json")
    mixed = cli(capsys, "base.json", "head/config.yaml", "--format", "json")
    assert from_configs == from_plans == mixed
    assert json.loads(from_plans[1])[0]["kind"] == "first-choice-changed"


def test_a_hand_edited_plan_is_refused(trees, capsys) -> None:
    trees[0].save()
    assert main(["compile", "base/config.yaml", "-o", "base.json"]) == 0
    text = (
        Path("base.json").read_text(encoding="utf-8").replace('"open_for_ms": 60000', '"open_for_ms": 1000')
    )
    Path("edited.json").write_text(text, encoding="utf-8")
    capsys.readouterr()
    code, out, err = cli(capsys, "base.json", "edited.json")
    assert (code, out) == (1, "")
    assert err == (
        "error: edited.json: the content hash does not match the plan; it was edited after compiling, "
        "so compile it again\n"
    )


def test_a_config_that_does_not_compile_prints_its_diagnostics(trees, capsys) -> None:
    base, head = trees
    base.save()
    head.aliases["acme/chat"]["chain"].append("grok/llama-3.1-8b-instant")
    head.save()
    code, out, err = cli(capsys, "base/config.yaml", "head/config.yaml")
    assert (code, out) == (1, "")
    assert err.startswith("error: head/config.yaml does not compile:\nhead/aliases.yaml:4:")
    assert "IL304 unknown-provider" in err


def test_missing_input(trees, capsys) -> None:
    trees[0].save()
    code, _, err = cli(capsys, "base/config.yaml", "nowhere.yaml")
    assert (code, err) == (1, "error: nowhere.yaml: file does not exist\n")


@pytest.mark.parametrize("argv", [["one.yaml"], ["a.yaml", "b.yaml", "c.yaml"]])
def test_usage_errors(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["diff", *argv])
    assert exc.value.code == 2
    assert "give BASE and HEAD, or --base-ref REF and HEAD" in capsys.readouterr().err


# --- completeness: no difference between two plans goes unreported ----------------------------

MIRRORED = {
    ("format_version",): "one value only",
    ("content_hash",): "differs exactly when something else does",
    ("providers", "*", "name"): "the key",
    ("workers", "*", "name"): "the key",
    ("aliases", "*", "name"): "the key",
    ("aliases", "*", "contract", "largest_window_tokens"): "derived from the candidates' windows (models)",
    ("aliases", "*", "contract", "unknown_windows"): "derived from the workers' defaults (workers)",
    ("aliases", "*", "contract", "unknown_windows", "+"): "derived from the workers' defaults (workers)",
    ("aliases", "*", "contract", "prefill_ms"): "derived from the providers' `first_byte` (providers)",
    ("aliases", "*", "contract", "reasoning", "*", "candidate"): "the chain's candidates (alias changes)",
    ("aliases", "*", "contract", "reasoning", "+"): "the chain's candidates (alias changes)",
    ("aliases", "*", "contract", "reasoning"): "the chain's order (alias changes); each compared",
    ("candidates", "*", "id"): "the key",
    ("candidates", "*", "provider"): "the key's part before `/`",
    ("candidates", "*", "model"): "the key's part after `/`",
    ("workers", "*", "patterns", "*", "match"): "derived from `pattern`",
    ("workers", "*", "patterns", "*", "prefix"): "derived from `pattern`",
    ("providers", "*", "workers", "+"): "membership mirrors `workers.*.provider`; order is compared",
    ("placement", "models", "*", "candidate"): "placement's ranking follows the chains (alias changes)",
    ("placement", "models", "*", "provider"): "the candidate's part before `/`",
    ("placement", "models", "*", "model"): "the candidate's part after `/`",
    ("placement", "models", "*", "position"): "derived from the chains (alias changes)",
    ("placement", "models", "*", "aliases"): "derived from the chains (alias changes)",
    ("placement", "homeless", "+"): "derived from `homes`, compared",
    ("placement", "homeless"): "derived from `homes`, compared",
    ("access", "tenants", "*", "name"): "the key",
    ("access", "keys", "*", "id"): "the key",
    **{
        ("access", section, "*", "limits", acl, "*", part): "derived from `pattern`"
        for section in ("tenants", "keys")
        for acl in ("allowed", "denied")
        for part in ("match", "prefix")
    },
}

FILL: dict[str, object] = {
    "gpu-b": 8.0,  # placement.budgets_gib.<worker>: a worker's memory, unknown -> known
    "cpu-a": 8.0,
    "profile": "other",
    "max_connections": 2048,
    "hardware": {
        "accelerator": "none",
        "gpu": None,
        "vram_gib": None,
        "unified_memory": False,
        "system_memory_gib": 8.0,
    },
    "gpu": "other",
    "vram_gib": 1.0,
    "system_memory_gib": 1.0,
    "default_context_tokens": 5,
    "max_context_tokens": 5,
    "capabilities": ["completion"],
    "context_tokens": 5,
    "base_url": "http://other",
    "api_key_env": "OTHER_KEY",
    "default_alias": "acme/agent",
    "alias_namespace": "other/",
    "telemetry": {"gpu": 0, "nvidia_smi": True, "host_memory": False, "url": None},
    "url": "http://other:9400/telemetry",
    "state_file": "other/speeds.json",
    "fallback_after_ms": 2000,
    "on_saturation": "queue",
    "allowed": [{"pattern": "zzz", "match": "exact", "prefix": "zzz"}],
    "key_env": "OTHER_KEY",
    "hash": "hmac-sha256$" + "2" * 32 + "$" + "3" * 64,
    "priority": "batch",  # a key's priority, unset (its tenant's) -> set
    "output_tokens": 4096,  # an alias's output ceiling, undeclared -> declared
    "issuer": "other.example",
    "window_tokens": 5,
    "largest_window_tokens": 5,
}

ITEM: dict[str, object] = {
    "requires": "insert",
    "capabilities": "insert",
    "patterns": {"pattern": "zzz*", "match": "prefix", "prefix": "zzz", "limit": 1},
    "reasoning": {"candidate": "zzz/added", "contract": "none", "issuer": None},
    "denied": {"pattern": "zzz", "match": "exact", "prefix": "zzz"},
    "allowed": {"pattern": "zzz", "match": "exact", "prefix": "zzz"},
}

REPLACE: dict[str, object] = {
    "kind": {"ollama": "openai", "openai": "ollama"},
    "accelerator": {"nvidia": "amd"},
    "mode": {"enforce": "observe", "observe": "enforce", "off": "enforce"},
    "on_saturation": {"fallback": "queue", "queue": "fallback"},
    "auth": {"off": "optional", "optional": "required", "required": "off"},
    "credits_unit": {"tokens": "money", "money": "tokens"},
    "max_tokens": {"ceiling": "strict", "strict": "ceiling"},
    "priority": {"interactive": "batch", "batch": "interactive"},
    "contract": {"none": "reasoning_content", "reasoning_content": "none", "unknown": "none"},
}


_KEYED = {
    "providers",
    "workers",
    "aliases",
    "candidates",
    "patterns",
    "slots",
    "context_limits",
    "tenants",
    "keys",
    "prices",
    "homes",
    "budgets_gib",
    "footprint_gib",
}


def _shape(path: tuple[str | int, ...]) -> tuple[str, ...]:
    """`("workers", "gpu-a", "patterns", 0, "limit")` -> `("workers", "*", "patterns", "*", "limit")`."""
    out: list[str] = []
    for index, part in enumerate(path):
        keyed = index > 0 and path[index - 1] in _KEYED and out[-1] != "*"
        out.append("*" if isinstance(part, int) or keyed else str(part))
    return tuple(out)


def _mutations(node: object, path: tuple[str | int, ...] = ()):
    """(path, mutated value) for every leaf: scalars changed, lists appended to and reversed."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _mutations(value, (*path, key))
        return
    key = next((p for p in reversed(path) if isinstance(p, str)), "")
    if isinstance(node, list) and node and isinstance(node[0], dict):
        for index, item in enumerate(node):
            yield from _mutations(item, (*path, index))
        return
    if isinstance(node, list):
        if (*_shape(path), "+") not in MIRRORED:
            yield path, [*node, ITEM.get(key, "zzz/added")]
        if len(node) > 1:
            yield path, list(reversed(node))
        return
    if node is None:
        assert key in FILL, f"no replacement for null at {path}"
        yield path, FILL[key]
    elif key in REPLACE:
        yield path, REPLACE[key][node]  # type: ignore[index]
    elif isinstance(node, bool):
        yield path, not node
    elif isinstance(node, int | float):
        yield path, node + 1
    else:
        yield path, f"{node}-other"


def _set_at(data: dict, path: tuple[str | int, ...], value: object) -> dict:
    copy = json.loads(json.dumps(data))
    node = copy
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return copy


def test_every_difference_in_a_plan_is_reported(trees) -> None:
    from interlock.schema.plan import RoutingPlan

    trees[0].config["server"]["cors"] = {  # one entry per list: a set's order carries no meaning
        "allow_origins": ["https://app.acme.example"],
        "allow_credentials": True,
        "allow_headers": ["authorization"],
    }
    trees[0].config["server"]["auth"] = "optional"
    trees[0].config["tenants"] = {"acme": {"allowed": ["acme/*"], "denied": ["acme/agent"]}}
    trees[0].config["keys"] = {
        "ci": {"tenant": "acme", "key_env": "CI_KEY", "description": "CI", "credits": 5},
        "bot": {"tenant": "acme", "hash": "hmac-sha256$" + "0" * 32 + "$" + "1" * 64},
    }
    trees[0].config["pricing"] = {"models": {"groq/*": {"input": 0.05, "output": 0.08}}}
    trees[0].save()
    plan = load_plan("base/config.yaml").plan
    data = plan.model_dump(mode="json")
    unreported = []
    checked = 0
    for path, value in _mutations(data):
        if _shape(path) in MIRRORED:
            continue
        other = RoutingPlan.model_validate(_set_at(data, path, value))
        checked += 1
        if not diff_plans(plan, other) or not diff_plans(other, plan):
            unreported.append(path)
    assert unreported == []
    assert checked > 100


def test_a_removed_alias_with_the_chain_of_an_added_one_looks_like_a_rename(trees) -> None:
    def rename(tree: ConfigTree) -> None:
        tree.aliases["acme/tools"] = tree.aliases.pop("acme/agent")

    _, _, changes = diff_of(Scenario("rename", rename, frozenset()), trees)
    assert [(c.kind, c.subject) for c in changes] == [
        ("alias-removed", "acme/agent"),
        ("alias-added", "acme/tools"),
        ("alerts-changed", "prometheus-rules"),  # the alerts are named by alias
    ]
    assert changes[0].summary == (
        "alias `acme/agent` is removed: callers that still send it will get an error; "
        "`acme/tools` has the same chain (renamed?)"
    )
