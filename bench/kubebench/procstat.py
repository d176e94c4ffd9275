"""CPU time and peak memory of a process, read from /proc while it runs."""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of `pid` in seconds; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the parenthesised command name (which may hold spaces): state is field 3,
    # utime and stime are fields 14 and 15.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def status_kib(pid: int, field: str) -> int | None:
    """A kB field of /proc/PID/status (VmRSS, VmHWM); None once `pid` is gone or a zombie."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return None


def peak_rss_bytes(pid: int) -> int | None:
    """VmHWM (the resident set's high-water mark) of `pid`; None once it is gone or a zombie."""
    kib = status_kib(pid, "VmHWM")
    return None if kib is None else kib * 1024


def self_cpu_seconds() -> float:
    """CPU time of this process (the harness)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent not idle since boot (from /proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is already in user/nice)
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / CLOCK_TICKS


@dataclass(slots=True)
class ProcessSampler:
    """Keeps the last CPU reading and the peak RSS of a process, so both survive its exit."""

    pid: int
    cpu: float = 0.0
    peak_rss: int = 0
    start_cpu: float = 0.0

    def sample(self) -> None:
        cpu = cpu_seconds(self.pid)
        if cpu is not None:
            self.cpu = cpu
        rss = peak_rss_bytes(self.pid)
        if rss is not None:
            self.peak_rss = max(self.peak_rss, rss)

    def mark(self) -> None:
        """Start counting CPU from now (for processes that ran before the measured window)."""
        self.sample()
        self.start_cpu = self.cpu

    @property
    def cpu_used(self) -> float:
        return self.cpu - self.start_cpu
