"""nvidia-smi: the parser on real H200 output and on garbage; the command with real fake executables."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from interlock.runtime.telemetry.nvidia_smi import FIELDS, parse_readings, parse_rows, query_argv, query_gpus
from interlock.runtime.telemetry.readings import MIB, GpuReading
from interlock.runtime.telemetry.source_errors import (
    SourceFailed,
    SourceMalformed,
    SourceMissing,
    SourceTimeout,
)
from tests.runtime.telemetry.conftest import FakeSmi, capture, captures, load_as_runtime_query, printing

CAPTURE_FIELDS = re.search(r"--query-gpu=(\S+)", next(t for t in captures() if "--query-gpu=" in t))
assert CAPTURE_FIELDS is not None
ALL_FIELDS = tuple(CAPTURE_FIELDS.group(1).split(","))


def test_the_capture_holds_what_the_tests_rely_on() -> None:
    assert len(ALL_FIELDS) == 23
    assert "fan.speed" in ALL_FIELDS
    assert "[N/A]" in capture("--query-gpu (under load")


def test_the_h200_under_load() -> None:
    [gpu] = parse_readings(capture("--query-gpu (under load"), ALL_FIELDS)
    assert gpu == GpuReading(
        index=0,
        name="NVIDIA H200",
        vram_total_bytes=143771 * MIB,
        vram_used_bytes=30775 * MIB,
        utilization_percent=100.0,
        temperature_celsius=55.0,
        power_watts=692.16,
        power_limit_watts=700.0,
    )
    assert gpu.vram_total_bytes == 150754820096  # what NVML reports for the same GPU


def test_the_fan_of_a_datacenter_gpu_is_not_reported_rather_than_zero() -> None:
    [row] = parse_rows(capture("--query-gpu (under load"), ALL_FIELDS)
    assert row["fan.speed"] is None
    assert row["pstate"] == "P0"


def test_idle_and_after_load() -> None:
    [idle] = parse_readings(capture("same, --format=csv,noheader,nounits (idle)"), ALL_FIELDS)
    [after] = parse_readings(capture("--query-gpu (after load)"), ALL_FIELDS)
    assert (idle.vram_used_bytes, idle.utilization_percent, idle.power_watts) == (0, 0.0, 79.0)
    assert (after.temperature_celsius, after.power_watts) == (40.0, 335.05)


def test_the_csv_form_with_a_header_and_units() -> None:
    """`--format=csv`: the header line is skipped, units in the values are read past."""
    [gpu] = parse_readings(capture("nvidia-smi --query-gpu="), ALL_FIELDS)
    assert gpu.vram_total_bytes == 143771 * MIB
    assert (gpu.utilization_percent, gpu.power_watts, gpu.power_limit_watts) == (0.0, 79.02, 700.0)


def test_the_runtime_query_reads_the_same_values() -> None:
    [gpu] = parse_readings(load_as_runtime_query())
    [full] = parse_readings(capture("--query-gpu (under load"), ALL_FIELDS)
    assert gpu == full


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
        "No devices were found\n",
        "0, NVIDIA H200, 143771\n",  # too few columns
        "0, NVIDIA H200, 143771, 0, 0, 35, 79.00, 700.00, extra\n",  # too many
        "index, name, memory.total [MiB], memory.used [MiB], utilization.gpu [%], temperature.gpu, "
        "power.draw [W], power.limit [W]\n",  # a header alone
        "-1, X, 1, 1, 1, 1, 1, 1\n",
        "1.5, X, 1, 1, 1, 1, 1, 1\n",
        "\x00\xff garbage, , , , , , , \n",
    ],
)
def test_garbage_yields_no_gpu(text: str) -> None:
    assert parse_readings(text) == []


def test_every_bracketed_value_is_not_reported() -> None:
    text = "0, [Unknown Error], [Not Supported], [N/A], [GPU is lost], [Insufficient Permissions], N/A, \n"
    assert parse_readings(text) == [GpuReading(index=0)]


def test_the_command_asks_for_one_gpu_without_header_or_units() -> None:
    assert query_argv(3) == [
        "nvidia-smi",
        "--query-gpu=" + ",".join(FIELDS),
        "--format=csv,noheader,nounits",
        "--id=3",
    ]


def test_a_fake_nvidia_smi_on_path_is_run_and_read(fake_smi: FakeSmi) -> None:
    where = fake_smi(printing(load_as_runtime_query()))
    [gpu] = query_gpus(0, 5.0)
    assert gpu.vram_used_bytes == 30775 * MIB
    assert (where / "calls").read_text().split() == query_argv(0)[1:]


def test_no_line_for_the_gpu_is_malformed(fake_smi: FakeSmi) -> None:
    fake_smi(printing(load_as_runtime_query()))  # reports GPU 0 only
    with pytest.raises(SourceMalformed, match=r"^nvidia-smi reported no usable line for GPU 2$"):
        query_gpus(2, 5.0)


def test_a_missing_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SourceMissing, match=r"^nvidia-smi: not found$"):
        query_gpus(0, 5.0)


def test_a_driver_failure_is_a_failed_read(fake_smi: FakeSmi) -> None:
    fake_smi('echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\nexit 9')
    with pytest.raises(
        SourceFailed,
        match=r"^nvidia-smi: exit status 9: NVIDIA-SMI has failed because it couldn't communicate",
    ):
        query_gpus(0, 5.0)


def test_an_executable_that_is_not_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "bin"
    directory.mkdir()
    (directory / "nvidia-smi").write_text("not executable")
    monkeypatch.setenv("PATH", str(directory))
    with pytest.raises(SourceMissing):
        query_gpus(0, 5.0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _zombie_or_gone(pid: int) -> bool:
    if not _alive(pid):
        return True
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z")


def test_a_hung_nvidia_smi_is_killed_with_what_it_started(fake_smi: FakeSmi) -> None:
    """The script starts a child that would outlive it, then hangs; both are killed at the deadline."""
    here = '"$(dirname "$0")"'
    where = fake_smi(f"sleep 600 &\necho $! > {here}/child\necho $$ > {here}/pid\nwait")
    with pytest.raises(SourceTimeout, match=r"^nvidia-smi: no answer within 0.5s; killed$"):
        query_gpus(0, 0.5)
    for name in ("pid", "child"):
        pid = int((where / name).read_text())
        deadline = time.monotonic() + 10  # the kernel delivers SIGKILL promptly; this only bounds a hang
        while not _zombie_or_gone(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _zombie_or_gone(pid), f"{name} {pid} survived"


def test_output_that_never_ends_is_a_timeout_too(fake_smi: FakeSmi) -> None:
    fake_smi("echo '0, NVIDIA H200,'\nexec sleep 600")
    with pytest.raises(SourceTimeout):
        query_gpus(0, 0.3)
