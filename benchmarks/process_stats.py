"""What a benchmark reads of another process from /proc: its CPU time, its peak RSS, and
when it has gone idle. A helper of the benchmark scripts beside it (no measurement of
its own: `make bench` running it does nothing)."""

from __future__ import annotations

import os
import pathlib
import time


def rss_peak_mb(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_idle(pid: int, timeout: float = 60.0) -> float:
    """Until the process has used under 5% of a core for a second (the operator digests
    the previous run's 2,048 Pod deletion events for seconds after the Pods are gone);
    returns the seconds waited."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        before = cpu_seconds(pid)
        time.sleep(1.0)
        if cpu_seconds(pid) - before < 0.05:
            break
    return time.perf_counter() - start
