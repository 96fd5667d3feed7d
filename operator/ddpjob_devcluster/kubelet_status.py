"""What a process kubelet knows of one container, and the `pods/status` it writes for
it, as a kubelet's status manager does (pkg/kubelet/status/generate.go): the phase, the
trainer container's state (running, or terminated with its exit code and reason), the
Pod's IP, and the Pod conditions in the kubelet's set (a status patch replaces the
list, so it carries PodScheduled too).
"""
from __future__ import annotations

import pathlib
import time
from dataclasses import dataclass, field
from typing import IO, Any

from ddpjob.api import names
from ddpjob.local.container import ContainerProcess
from ddpjob.times import format_timestamp as _iso, now as _now_iso



@dataclass
class Container:
    """One Pod's trainer container on this kubelet."""
    namespace: str
    pod: str
    uid: str
    job: str
    attempt: int
    tag: str
    log_path: pathlib.Path
    proc: ContainerProcess | None = None
    log_file: IO[str] | None = None
    deleted: bool = False  # the Pod is gone (or going): stop, report nothing more
    reported: str | None = None  # the last phase written to pods/status
    unsent: dict[str, Any] | None = None  # a status write that failed; retried every tick
    exit_code: int | None = None
    ip: str = '127.0.0.1'
    image: str = ''  # the container's image, echoed in its status as a runtime does
    times: dict[str, float] = field(default_factory=dict)  # seen, started, running_reported, exited
    # The API server keeps the Pod (graceful deletion) until this kubelet confirms that
    # its containers stopped, with a delete of grace 0 (pkg/kubelet/status/status_manager.go).
    confirm_deletion: bool = False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def pod_status(c: Container, phase: str, *, exit_code: int | None = None, reason: str | None = None,
               message: str | None = None, host_ip: str = '127.0.0.1') -> dict[str, Any]:
    started = _iso(c.times.get('started', c.times['seen']))
    running = phase == 'Running'
    if running:
        state: dict[str, Any] = {'running': {'startedAt': started}}
    else:
        state = {'terminated': {'exitCode': exit_code, 'reason': reason, 'startedAt': started,
                                'finishedAt': _iso(c.times.get('exited', time.time()))}}
        if message:
            state['terminated']['message'] = message
    now = _now_iso()
    ready = 'True' if running else 'False'
    conditions = [{'type': kind, 'status': value, 'lastTransitionTime': now} for kind, value in (
        ('PodReadyToStartContainers', 'True'), ('Initialized', 'True'), ('Ready', ready),
        ('ContainersReady', ready), ('PodScheduled', 'True'))]
    return {
        'phase': phase, 'hostIP': host_ip, 'hostIPs': [{'ip': host_ip}], 'podIP': c.ip, 'podIPs': [{'ip': c.ip}],
        'startTime': _iso(c.times['seen']), 'conditions': conditions,
        'containerStatuses': [{'name': names.TRAINER_CONTAINER, 'ready': running, 'started': running,
                               'restartCount': 0, 'image': c.image, 'imageID': '', 'state': state}],
    }
