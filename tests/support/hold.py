"""A job held running until the test has seen what it must see.

On the process kubelet a Pod is a process of this machine, so a file the test holds can
keep a job running: the Pods run while the file exists and end once the test releases it,
however slowly the machine runs. No guessed duration that a busy machine outlasts; the
RUN bound only ends the Pods of a test that was lost before it released them.

Users: tests/gangs (jobs held while another gang is watched waiting), tests/system (jobs
that must still run while the test looks).
"""

from __future__ import annotations

import pathlib
from typing import Any

from tests.support.deadlines import RUN

# The Pods' command (`python -c SCRIPT`): say which node it is, sleep SLEEP seconds, then
# wait while the HOLD file exists (not at all without one).
SCRIPT = (
    "import os, time; print('node', os.environ['NODE_RANK'], flush=True); "
    "time.sleep(float(os.environ.get('SLEEP', '0'))); hold = os.environ.get('HOLD'); "
    f"end = time.monotonic() + {RUN}\n"
    "while hold and os.path.exists(hold) and time.monotonic() < end: time.sleep(0.2)"
)


class Hold:
    """Keeps the jobs given it running past their SLEEP until `release()`."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        path.touch()

    def release(self) -> None:
        self.path.unlink(missing_ok=True)


def env(sleep: float, hold: Hold | None = None) -> list[dict[str, Any]]:
    """The job's env for SCRIPT."""
    return [{"name": "SLEEP", "value": str(sleep)}] + ([{"name": "HOLD", "value": str(hold.path)}] if hold else [])
