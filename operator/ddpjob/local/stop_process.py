"""Stopping one child process we started, in bounded time: SIGTERM, then SIGKILL.

Users: `ddpjob run --tensorboard`'s TensorBoard (tensorboard_server.py) and `ddpjob
tensorboard`'s kubectl port-forward (cli/tensorboard.py, which loads it lazily so that
the cluster commands import nothing else of local).
"""

from __future__ import annotations

import subprocess
from typing import Any


def stop_process(proc: subprocess.Popen[Any], grace: float) -> None:
    """SIGTERM, then SIGKILL if it is still there after `grace` seconds; reaped either way."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
