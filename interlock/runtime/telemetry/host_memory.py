"""A host's memory without psutil: ``/proc/meminfo`` on Linux, ``sysctl hw.memsize`` + ``vm_stat`` on macOS.

Linux: used = ``MemTotal - MemAvailable`` (the kernel's own estimate of what can be had without
swapping; ``MemFree + Buffers + Cached`` on kernels older than 3.14). macOS: total is ``hw.memsize``,
used is total minus free, inactive and speculative pages (what Activity Monitor counts as available).
On Apple silicon that memory is also the GPU's (``unified``).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from interlock.runtime.telemetry.process import run_command
from interlock.runtime.telemetry.readings import HostMemory
from interlock.runtime.telemetry.source_errors import SourceMalformed, SourceMissing

MEMINFO = Path("/proc/meminfo")
_MEMINFO_LINE = re.compile(r"^(\w+):\s+(\d+)(?:\s+kB)?\s*$")
_VM_PAGE_SIZE = re.compile(r"page size of (\d+) bytes")
_VM_LINE = re.compile(r'^"?([^":]+)"?:\s+(\d+)\.?\s*$')


def read_host_memory(
    timeout_s: float, *, platform: str = sys.platform, meminfo: Path = MEMINFO
) -> HostMemory:
    """This host's memory (blocking)."""
    if platform.startswith("linux"):
        try:
            text = meminfo.read_text(encoding="ascii", errors="replace")
        except OSError as exc:
            raise SourceMissing(f"{meminfo}: cannot read ({exc.strerror or exc})") from exc
        return parse_meminfo(text)
    if platform == "darwin":
        total = run_command(["sysctl", "-n", "hw.memsize"], timeout_s).strip()
        if not total.isdigit():
            raise SourceMalformed(f"sysctl hw.memsize answered {total[:40]!r}, not a number")
        return parse_vm_stat(run_command(["vm_stat"], timeout_s), int(total), unified=True)
    raise SourceMissing(f"host memory is read on Linux and macOS, not on {platform}")


def parse_meminfo(text: str) -> HostMemory:
    values: dict[str, int] = {}
    for line in text.splitlines():
        match = _MEMINFO_LINE.match(line.strip())
        if match:
            values[match.group(1)] = int(match.group(2)) * 1024
    total = values.get("MemTotal")
    if not total:
        raise SourceMalformed("/proc/meminfo has no MemTotal")
    available = values.get("MemAvailable")
    if available is None:
        available = sum(values.get(key, 0) for key in ("MemFree", "Buffers", "Cached"))
    return HostMemory(total_bytes=total, used_bytes=max(total - available, 0))


def parse_vm_stat(text: str, total_bytes: int, *, unified: bool = False) -> HostMemory:
    page = _VM_PAGE_SIZE.search(text)
    if page is None:
        raise SourceMalformed("vm_stat printed no page size")
    pages: dict[str, int] = {}
    for line in text.splitlines()[1:]:
        match = _VM_LINE.match(line.strip())
        if match:
            pages[match.group(1).strip()] = int(match.group(2))
    if "Pages free" not in pages:
        raise SourceMalformed("vm_stat printed no `Pages free`")
    free = sum(pages.get(k, 0) for k in ("Pages free", "Pages inactive", "Pages speculative"))
    used = max(total_bytes - free * int(page.group(1)), 0)
    return HostMemory(total_bytes=total_bytes, used_bytes=used, unified=unified)
