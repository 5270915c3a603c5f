"""Host memory (/proc/meminfo, vm_stat) and the sidecar's document: reading, refusing, merging."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from interlock.runtime.telemetry import document
from interlock.runtime.telemetry.host_memory import parse_meminfo, parse_vm_stat, read_host_memory
from interlock.runtime.telemetry.readings import GpuReading, HostMemory, overlay
from interlock.runtime.telemetry.source_errors import SourceMalformed, SourceMissing
from tests.runtime.telemetry.conftest import FIXTURES

KIB = 1024


def test_meminfo_of_a_real_linux_host() -> None:
    text = (FIXTURES / "meminfo-linux.txt").read_text()
    values = {line.split(":")[0]: int(line.split()[1]) * KIB for line in text.splitlines()}
    memory = parse_meminfo(text)
    assert memory == HostMemory(
        total_bytes=values["MemTotal"], used_bytes=values["MemTotal"] - values["MemAvailable"]
    )


def test_meminfo_without_memavailable_counts_free_buffers_and_cache() -> None:
    text = "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 250 kB\n"
    assert parse_meminfo(text) == HostMemory(total_bytes=1000 * KIB, used_bytes=600 * KIB)


@pytest.mark.parametrize("text", ["", "garbage\n", "MemFree: 10 kB\n", "MemTotal: 0 kB\n"])
def test_meminfo_without_a_total_is_malformed(text: str) -> None:
    with pytest.raises(SourceMalformed, match=r"^/proc/meminfo has no MemTotal$"):
        parse_meminfo(text)


def test_read_host_memory_from_a_file(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 2048 kB\nMemAvailable: 1024 kB\n")
    assert read_host_memory(1.0, platform="linux", meminfo=meminfo) == HostMemory(2048 * KIB, 1024 * KIB)
    with pytest.raises(SourceMissing, match=r"cannot read"):
        read_host_memory(1.0, platform="linux", meminfo=tmp_path / "absent")


def test_other_platforms_are_missing_not_guessed() -> None:
    with pytest.raises(SourceMissing, match=r"^host memory is read on Linux and macOS, not on win32$"):
        read_host_memory(1.0, platform="win32")


def test_vm_stat_of_a_unified_memory_mac() -> None:
    total = 256 * 1024**3
    memory = parse_vm_stat((FIXTURES / "vm_stat-macos.txt").read_text(), total, unified=True)
    available = (4_000_000 + 2_000_000 + 100_000) * 16384  # free + inactive + speculative pages
    assert memory == HostMemory(total_bytes=total, used_bytes=total - available, unified=True)


@pytest.mark.parametrize(
    "text", ["", "Pages free: 10.\n", "Mach Virtual Memory Statistics: (page size of 4096 bytes)\n"]
)
def test_vm_stat_garbage_is_malformed(text: str) -> None:
    with pytest.raises(SourceMalformed):
        parse_vm_stat(text, 1024)


H200 = GpuReading(0, "NVIDIA H200", 150754820096, 32269926400, 100.0, 55.0, 692.16, 700.0)


def test_a_document_reads_back_what_it_was_built_from() -> None:
    host = HostMemory(270582939648, 12884901888)
    doc = document.build([H200, GpuReading(1)], host, {}, "2026-11-30T22:04:58.120Z")
    assert doc["format"] == "interlock-telemetry/1"
    assert document.read(doc, 0) == (H200, host)
    assert document.read(doc, 1) == (GpuReading(1), host)


def test_a_document_without_gpus_or_host_is_fine() -> None:
    assert document.read({"format": document.FORMAT}, 0) == (None, None)
    assert document.read({"format": document.FORMAT, "gpus": [], "extra": {"new": 1}}, 3) == (None, None)


def _doc(**changes: Any) -> dict[str, Any]:
    doc = document.build([H200], HostMemory(10, 5), {}, "t")
    doc.update(changes)
    return doc


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "the document is a JSON list, not an object"),
        (
            _doc(format="interlock-telemetry/2"),
            "`format` is 'interlock-telemetry/2', expected 'interlock-telemetry/1'",
        ),
        (_doc(gpus={"0": {}}), "`gpus` is not a list"),
        (_doc(gpus=["x"]), "`gpus[0]` is not an object"),
        (_doc(gpus=[{"index": True}]), "`gpus[0].index` is not a GPU index"),
        (_doc(gpus=[{"index": 0, "name": 7}]), "`gpus[0].name` is not a string"),
        (
            _doc(gpus=[{"index": 0, "vram_used_bytes": "30 GB"}]),
            "`gpus[0].vram_used_bytes` is not a non-negative number",
        ),
        (_doc(gpus=[{"index": 0, "power_watts": -1}]), "`gpus[0].power_watts` is not a non-negative number"),
        (_doc(gpus=[{"index": 1}, {"index": 2}]), "the document reports GPU(s) 1, 2, not GPU 0"),
        (_doc(host=[]), "`host` is not an object"),
        (_doc(host={"unified_memory": "yes"}), "`host.unified_memory` is not a boolean"),
        (_doc(host={"memory_total_bytes": False}), "`host.memory_total_bytes` is not a non-negative number"),
    ],
)
def test_a_malformed_document_is_refused_whole(doc: Any, message: str) -> None:
    with pytest.raises(SourceMalformed) as caught:
        document.read(doc, 0)
    assert str(caught.value) == message


def test_remote_values_override_local_ones_field_by_field() -> None:
    local = GpuReading(0, "NVIDIA H200", 100, 10, 5.0, 40.0, 80.0, 700.0)
    remote = GpuReading(0, None, None, 20, None, 45.0)
    assert overlay(local, remote) == GpuReading(0, "NVIDIA H200", 100, 20, 5.0, 45.0, 80.0, 700.0)
    assert overlay(None, remote) == remote
    assert overlay(local, None) == local
    assert overlay(HostMemory(8, 4, unified=True), HostMemory(None, 6)) == HostMemory(8, 6, unified=True)


def test_the_sidecars_own_errors() -> None:
    assert document.read_errors(_doc(errors={"nvidia_smi": "missing"})) == {"nvidia_smi": "missing"}
    assert document.read_errors({"format": document.FORMAT}) == {}
    with pytest.raises(SourceMalformed, match=r"^`errors` is not an object of strings$"):
        document.read_errors(_doc(errors={"nvidia_smi": 3}))
