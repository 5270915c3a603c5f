"""Presets ship in the wheel and load from the installed location, not from a checkout.

Builds the real wheel with hatchling (as `pip install` would), unpacks it as an installer would into a
site directory, and compiles a configuration that names `profile: rtx4090` from a process whose import
path puts that site directory first and whose working directory is outside the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import ROOT

PROBE = """
import json, sys
import interlock, interlock.common.resources as r
from interlock.compiler import compile_config, CompileOptions
ctx = compile_config("config.yaml", CompileOptions(environ={}))
print(json.dumps({
    "package": interlock.__file__,
    "profiles": {name: str(path) for name, path in r.builtin_profiles().items()},
    "diagnostics": [d.code for d in ctx.sink.items],
    "worker": ctx.plan.workers["box"].model_dump(mode="json") if ctx.plan else None,
}))
"""

CONFIG = """version: 1
providers:
  ollama:
    kind: ollama
    workers:
      - {name: box, url: "http://127.0.0.1:11434", profile: rtx4090}
      - {name: own, url: "http://127.0.0.2:11434", profile: ./boxes/tiny.yaml}
  groq: {kind: openai, base_url: "https://api.groq.com/openai/v1", api_key_env: GROQ_API_KEY}
aliases:
  fast: {chain: [ollama/qwen3:8b, groq/llama-3.1-8b-instant]}
"""

TINY = """profile: tiny
hardware: {accelerator: none}
worker: {max_concurrent: 1}
"""


def test_wheel_ships_presets_and_loads_them_when_installed(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(dist)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("interlock-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for folder in ("profiles", "schema", "aliases"):
            for path in (ROOT / folder).iterdir():
                inside = f"interlock/_data/{folder}/{path.name}"
                assert inside in names
                assert archive.read(inside) == path.read_bytes()
        site = tmp_path / "site"
        archive.extractall(site)

    work = tmp_path / "work"
    (work / "boxes").mkdir(parents=True)
    (work / "config.yaml").write_text(CONFIG)
    (work / "boxes" / "tiny.yaml").write_text(TINY)
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=work, env=env, check=True, capture_output=True, text=True
    )
    report = json.loads(done.stdout)
    installed = site / "interlock"
    assert Path(report["package"]).parent == installed
    assert report["profiles"] == {
        name: str(installed / "_data" / "profiles" / f"{name}.yaml")
        for name in ("cpu-only", "mac-studio-256g", "rtx4090")
    }
    assert report["diagnostics"] == []
    assert report["worker"]["profile"] == "rtx4090"
    assert report["worker"]["hardware"]["gpu"] == "GeForce RTX 4090"
    assert report["worker"]["slots"] == {"qwen3:8b": 2}
