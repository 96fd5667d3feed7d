"""The container's termination message: what it leaves at its terminationMessagePath,
which the kubelet reads when it ends (`ddpjob run` and the process kubelet likewise, at
contract.TERMINATION_LOG). The Pod's terminationMessagePolicy is FallbackToLogsOnError:
a failed container that left nothing there is said by its last log lines instead.

Users: launch.py (a finished run's last progress record) and root_cause.py (why the
workers failed, in one line).
"""

from __future__ import annotations

import os
import sys

from ddpjob import contract


def leave(text: str, env=None) -> bool:
    """Write `text` as the termination message; False when there is nowhere to. Only into
    a file that is there (the kubelet, or a local runner, made it): outside a container
    nothing is created."""
    env = os.environ if env is None else env
    path = env.get(contract.TERMINATION_LOG) or contract.DEFAULT_TERMINATION_LOG
    if not os.path.isfile(path):
        return False
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)  # never O_CREAT
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        print(f"ddpjob-launch: warning: cannot leave a termination message in {path}: {e}", file=sys.stderr)
        return False
    return True
