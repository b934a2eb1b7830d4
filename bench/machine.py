"""What every benchmark prints about the machine it ran on (figures mean little without it)."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def _first(path: str, prefix: str) -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(prefix):
                return line
    except OSError:
        pass
    return None


def machine() -> dict[str, str]:
    cpu_line = _first("/proc/cpuinfo", "model name")
    mem_line = _first("/proc/meminfo", "MemTotal")
    return {
        "cores": str(os.cpu_count()),
        "ram": f"{int(mem_line.split()[1]) / 1024 / 1024:.1f} GiB" if mem_line else "unknown",
        "cpu": cpu_line.split(":", 1)[1].strip() if cpu_line else (platform.processor() or "unknown"),
        "python": platform.python_version(),
        "load": ", ".join(f"{value:.2f}" for value in os.getloadavg()),
    }


def describe() -> str:
    info = machine()
    return (
        f"{info['cores']} cores, {info['ram']} RAM, {info['cpu']}, Python {info['python']}; "
        f"load average {info['load']}"
    )
