"""Play the kubelet: report a Pod's phase and container states through `pods/status`.

No kubelet runs these Pods' containers, so tests move Pods through their lifecycle by
hand, with the same status-subresource write a kubelet makes (the operator sees MODIFIED).
"""

from __future__ import annotations

import datetime
from typing import Any

import kubernetes

_DEFAULT_REASONS = {"Pending": "ContainerCreating", "Succeeded": "Completed", "Failed": "Error"}


def container_state(phase: str, exit_code: int | None, reason: str | None) -> dict[str, Any]:
    now = datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    reason = reason or _DEFAULT_REASONS.get(phase)
    if phase == "Pending":
        return {"waiting": {"reason": reason}}
    if phase == "Running":
        return {"running": {"startedAt": now}}
    code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
    return {"terminated": {"exitCode": code, "reason": reason, "startedAt": now, "finishedAt": now}}


def set_pod_status(
    core: kubernetes.client.CoreV1Api,
    namespace: str,
    name: str,
    phase: str,
    *,
    exit_code: int | None = None,
    reason: str | None = None,
    containers: list[str] | None = None,
) -> dict[str, Any]:
    """Set `status.phase` and every container's state (exitCode/reason when terminated).

    `containers` defaults to all containers in the Pod's spec. Returns the patched Pod.
    """
    if containers is None:
        pod = core.read_namespaced_pod(name, namespace)
        assert pod.spec is not None
        containers = [c.name for c in pod.spec.containers]
    state = container_state(phase, exit_code, reason)
    running = phase == "Running"
    status = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if running else "False"}],
        "containerStatuses": [
            {"name": c, "ready": running, "restartCount": 0, "image": "", "imageID": "", "state": state}
            for c in containers
        ],
    }
    if phase == "Failed" and reason:
        status["reason"] = reason  # pod-level reasons such as Evicted / DeadlineExceeded
    return core.api_client.sanitize_for_serialization(
        core.patch_namespaced_pod_status(name, namespace, {"status": status})
    )
