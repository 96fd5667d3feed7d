"""What a valid job should still hear before it runs, said once per job on stderr (stdout
stays the command's result: `render`'s YAML, `validate`'s verdict) by `ddpjob validate`,
`render`, `run` and `submit` and the Python client's `train()`: a command that cannot fill its world
(api/launchers.py, a warning) and `backend: auto` falling back to gloo on a GPU job
(api/backend.py, a notice). The operator says the same as Events."""

from __future__ import annotations

import sys
from typing import IO

from ddpjob.api import backend
from ddpjob.api.launchers import world_warning
from ddpjob.api.spec import DDPJob


def lines(job: DDPJob) -> list[str]:
    said = [("warning", world_warning(job)), ("notice", backend.notice(job))]
    return [f"{kind}: {message}" for kind, message in said if message]


def say(path: str, job: DDPJob, stream: IO[str] | None = None) -> None:
    for line in lines(job):
        print(f"{path}: {line}", file=stream or sys.stderr)
