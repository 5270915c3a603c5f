"""examples/open_webui (run by hand before a release: Open WebUI's install is too slow for CI) stays
runnable, and pinned to the Open WebUI version whose recorded requests the replay tests use."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.clients.test_recorded import OPEN_WEBUI, OPEN_WEBUI_TOOL_RESULTS, RECORDED

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "open_webui"


def test_the_script_pins_the_version_of_the_recorded_requests() -> None:
    (version,) = re.findall(r"^OPEN_WEBUI_VERSION=(\S+)", (EXAMPLE / "run.sh").read_text(), re.M)
    names = OPEN_WEBUI + OPEN_WEBUI_TOOL_RESULTS
    assert all(name.startswith(f"open-webui-{version}_") for name in names)
    assert all((RECORDED / name).exists() for name in names)


def test_the_script_parses_and_the_driver_starts() -> None:
    subprocess.run(["bash", "-n", str(EXAMPLE / "run.sh")], check=True)
    ran = subprocess.run(
        [sys.executable, str(EXAMPLE / "drive.py"), "--help"], capture_output=True, text=True, check=True
    )
    assert "--record" in ran.stdout
