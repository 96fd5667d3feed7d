"""`ddpjob describe`: one DDPJob as text (pure: objects in, text out)."""
from __future__ import annotations

from typing import Any

from ddpjob.api import names


def _line(label: str, value: Any, indent: int = 0) -> str:
    return f"{' ' * indent}{label + ':':<20}{'<none>' if value in (None, '', []) else value}"


def pod_state(pod: dict[str, Any]) -> str:
    """Phase, then the trainer container's state (Running / Terminated: exit code, reason / Waiting: reason)."""
    status = pod.get("status") or {}
    text = status.get("phase") or "Pending"
    for cs in status.get("containerStatuses") or []:
        if cs.get("name") != names.TRAINER_CONTAINER:
            continue
        state = cs.get("state") or {}
        if "terminated" in state:
            t = state["terminated"]
            text += f", exit code {t.get('exitCode')}" + (f" ({t['reason']})" if t.get("reason") else "")
        elif "waiting" in state:
            text += f", waiting: {(state['waiting'] or {}).get('reason') or '?'}"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        text += ", terminating"
    if status.get("reason"):
        text += f" [{status['reason']}]"
    return text


def describe(job: dict[str, Any], pods: list[dict[str, Any]], events: list[dict[str, Any]]) -> str:
    meta, spec, status = job.get("metadata") or {}, job.get("spec") or {}, job.get("status") or {}
    out = [_line("Name", meta.get("name")), _line("Namespace", meta.get("namespace")),
           _line("Created", meta.get("creationTimestamp")), "Spec:"]
    for key in ("nodes", "nprocPerNode", "backend", "image", "gpusPerNode", "restartPolicy", "maxRestarts",
                "activeDeadlineSeconds", "ttlSecondsAfterFinished", "suspend"):
        if key in spec:
            out.append(_line(key, spec[key], 2))
    if spec.get("command") or spec.get("args"):
        out.append(_line("command", " ".join(map(str, (spec.get("command") or []) + (spec.get("args") or []))), 2))
    out.append("Status:")
    for key in ("phase", "message", "readyNodes", "restarts", "startTime", "completionTime"):
        out.append(_line(key, status.get(key), 2))
    conditions = status.get("conditions") or []
    out.append("Conditions:" + ("" if conditions else " <none>"))
    for c in conditions:
        out.append(f"  {c.get('type', ''):<12}{c.get('status', ''):<8}{c.get('reason', ''):<22}{c.get('message', '')}")
    failure = status.get("lastFailure")
    out.append("Last failure:" + ("" if failure else " <none>"))
    if failure:
        for key in ("pod", "nodeRank", "exitCode", "reason", "message", "time", "retryable"):
            if key in failure:
                out.append(_line(key, failure[key], 2))
    out.append("Pods:" + ("" if pods else " <none>"))
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        out.append(f"  {pod['metadata']['name']:<24}node {labels.get(names.LABEL_NODE_RANK, '?'):<5}"
                   f"attempt {labels.get(names.LABEL_RESTART_COUNT, '?'):<4}{pod_state(pod)}")
    ordered = sorted(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime")
                     or (e.get("metadata") or {}).get("creationTimestamp") or "")
    out.append("Events:" + ("" if ordered else " <none>"))
    for e in ordered[-20:]:
        when = e.get("lastTimestamp") or e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp") or ""
        out.append(f"  {when:<22}{e.get('type', ''):<9}{e.get('reason', ''):<14}{e.get('message', '')}")
    return "\n".join(out)
