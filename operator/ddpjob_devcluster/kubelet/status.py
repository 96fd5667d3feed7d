"""What a process kubelet knows of one container, and the `pods/status` it writes for
it, as a kubelet's status manager does (pkg/kubelet/status/generate.go): the phase, the
trainer container's state (running, or terminated with its exit code and reason), the
Pod's IP, and the Pod conditions in the kubelet's set (a status patch replaces the
list, so it carries PodScheduled too). A write that fails is kept and retried on the next
tick; a gracefully deleted Pod is confirmed gone once its container stopped.
"""

from __future__ import annotations

import contextlib
import pathlib
import time
from dataclasses import dataclass, field
from typing import IO, Any

import kubernetes
import urllib3

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
    ip: str = "127.0.0.1"
    name: str = names.TRAINER_CONTAINER  # the container's name (a TensorBoard Pod's is `tensorboard`)
    image: str = ""  # the container's image, echoed in its status as a runtime does
    times: dict[str, float] = field(default_factory=dict)  # seen, started, running_reported, exited
    # The API server keeps the Pod (graceful deletion) until this kubelet confirms that
    # its containers stopped, with a delete of grace 0 (pkg/kubelet/status/status_manager.go).
    confirm_deletion: bool = False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close_log(self) -> None:
        """Close the log once the output pump has written everything (else: later)."""
        if self.log_file is None:
            return
        if self.proc is not None and not self.proc.output_written(1):
            return  # try again later (stop() calls this once more)
        self.log_file.close()
        self.log_file = None


def pod_status(
    c: Container,
    phase: str,
    *,
    exit_code: int | None = None,
    reason: str | None = None,
    message: str | None = None,
    host_ip: str = "127.0.0.1",
) -> dict[str, Any]:
    started = _iso(c.times.get("started", c.times["seen"]))
    running = phase == "Running"
    if running:
        state: dict[str, Any] = {"running": {"startedAt": started}}
    else:
        state = {
            "terminated": {
                "exitCode": exit_code,
                "reason": reason,
                "startedAt": started,
                "finishedAt": _iso(c.times.get("exited", time.time())),
            }
        }
        if message:
            state["terminated"]["message"] = message
    now = _now_iso()
    ready = "True" if running else "False"
    conditions = [
        {"type": kind, "status": value, "lastTransitionTime": now}
        for kind, value in (
            ("PodReadyToStartContainers", "True"),
            ("Initialized", "True"),
            ("Ready", ready),
            ("ContainersReady", ready),
            ("PodScheduled", "True"),
        )
    ]
    return {
        "phase": phase,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": c.ip,
        "podIPs": [{"ip": c.ip}],
        "startTime": _iso(c.times["seen"]),
        "conditions": conditions,
        "containerStatuses": [
            {
                "name": c.name,
                "ready": running,
                "started": running,
                "restartCount": 0,
                "image": c.image,
                "imageID": "",
                "state": state,
            }
        ],
    }


def report(
    core: kubernetes.client.CoreV1Api,
    c: Container,
    phase: str,
    *,
    exit_code: int | None = None,
    reason: str | None = None,
    message: str | None = None,
) -> None:
    send(core, c, pod_status(c, phase, exit_code=exit_code, reason=reason, message=message))


def send(core: kubernetes.client.CoreV1Api, c: Container, status: dict[str, Any]) -> None:
    try:
        core.patch_namespaced_pod_status(c.pod, c.namespace, {"status": status}, _request_timeout=10)
    except kubernetes.client.ApiException as exc:
        # 404: deleted meanwhile, nothing to report to. Anything else (an injected
        # 500, a slow server): keep it and retry on the next tick, as a kubelet does.
        c.unsent = None if exc.status == 404 else status
    except (urllib3.exceptions.HTTPError, OSError):
        c.unsent = status
    else:
        c.unsent = None
        c.reported = status["phase"]


def confirm_deletion(core: kubernetes.client.CoreV1Api, c: Container) -> None:
    """Tell the API server the Pod's containers stopped (a delete of grace 0), once."""
    if not c.confirm_deletion:
        return
    c.confirm_deletion = False
    with contextlib.suppress(kubernetes.client.ApiException, urllib3.exceptions.HTTPError, OSError):
        # gracePeriodSeconds in the body: with a body, the API server ignores the query.
        core.delete_namespaced_pod(
            c.pod,
            c.namespace,
            body=kubernetes.client.V1DeleteOptions(
                grace_period_seconds=0, preconditions=kubernetes.client.V1Preconditions(uid=c.uid)
            ),
            _request_timeout=10,
        )
