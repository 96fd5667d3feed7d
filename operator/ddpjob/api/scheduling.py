"""spec.scheduling: how the gang is placed on a shared cluster.

    gang: none, or an integration of the registry (api/gangs/: kubernetes, volcano, coscheduling, kueue)
    queue: a queue of the integration, where it has them (a Volcano Queue, a Kueue LocalQueue;
      Kueue needs one)
    priorityClassName: set on every Pod (and on the PodGroup where the integration has the field)
    minAvailable: must equal spec.nodes (a rigid gang needs every node), or spec.elastic.minNodes
    scheduleTimeoutSeconds: how long the gang may wait to be placed before the job reports it
    onScheduleTimeout: Report (a condition and an Event; the job keeps waiting) | Fail

The CRD carries the same rules as CEL (manifests/crd); tests/api/test_crd_parity.py keeps them in step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddpjob.api import gangs, names
from ddpjob.api.checker import Checker

TIMEOUT_ACTIONS = ("Report", "Fail")
FIELDS = frozenset(
    {"gang", "queue", "priorityClassName", "minAvailable", "scheduleTimeoutSeconds", "onScheduleTimeout"}
)
# A day: a gang that has waited that long is reported long before; an upper bound as every duration has.
MAX_SCHEDULE_TIMEOUT_SECONDS = 86400
# Queue and PriorityClass names are object names: DNS subdomains (Kueue LocalQueue, Volcano Queue,
# scheduling.k8s.io PriorityClass). Kueue puts the queue in a label value, so 63 at most.
MAX_QUEUE_NAME = 63


@dataclass(frozen=True)
class Scheduling:
    gang: str = "none"
    queue: str | None = None
    priority_class_name: str | None = None
    min_available: int | None = None
    schedule_timeout_seconds: int | None = None
    on_schedule_timeout: str = "Report"


def gang_names() -> tuple[str, ...]:
    """Every value `spec.scheduling.gang` may take."""
    return ("none", *gangs.names())


def _either(words: list[str]) -> str:
    return " and ".join(words) if len(words) <= 2 else ", ".join(words[:-1]) + " and " + words[-1]


def _name(c: Checker, sched: Mapping[str, Any], key: str, limit: int) -> str | None:
    value = sched.get(key)
    path = f"spec.scheduling.{key}"
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        c.err(path, f"must be a non-empty string (got {value!r})")
        return None
    if not names.is_dns1123_subdomain(value, limit):
        c.err(path, f"{value!r} must be a DNS-1123 subdomain of at most {limit} characters")
    return value


def check_scheduling(
    c: Checker, sched: Mapping[str, Any] | None, nodes: int | None, elastic: bool = False
) -> Scheduling:
    """Read spec.scheduling, reporting every bad field through the checker `c` (api.checker.Checker).
    `nodes`: the gang's minimum (spec.nodes, or spec.elastic.minNodes when `elastic`)."""
    if not sched:
        return Scheduling()
    c.unknown("spec.scheduling", sched, FIELDS)
    gang = sched.get("gang", "none")
    if gang not in gang_names():
        c.err("spec.scheduling.gang", f"must be one of {', '.join(gang_names())} (got {gang!r})")
        gang = "none"
    integration = gangs.get(gang)
    queue = _name(c, sched, "queue", MAX_QUEUE_NAME)
    if queue is not None and not (integration and integration.queue):
        queued = [name for name in gangs.names() if (i := gangs.get(name)) is not None and i.queue]
        c.err("spec.scheduling.queue", f"only {_either(queued)} have queues (set gang to one of them)")
    if queue is None and integration is not None and integration.queue_required:
        c.err("spec.scheduling.queue", f"{gang} needs the {integration.queue} to submit the gang to")
    priority = _name(c, sched, "priorityClassName", 253)
    min_available = sched.get("minAvailable")
    if min_available is not None:
        if isinstance(min_available, bool) or not isinstance(min_available, int):
            c.err("spec.scheduling.minAvailable", f"must be an integer (got {min_available!r})")
            min_available = None
        elif not 1 <= min_available <= 1024:
            c.err("spec.scheduling.minAvailable", f"must be from 1 to 1024 (got {min_available})")
        elif nodes is not None and min_available != nodes and elastic:
            c.err(
                "spec.scheduling.minAvailable",
                f"must equal spec.elastic.minNodes ({nodes}): the job trains with that many (got {min_available})",
            )
        elif nodes is not None and min_available != nodes:
            c.err(
                "spec.scheduling.minAvailable",
                f"must equal spec.nodes ({nodes}): every node of a DDP gang is needed (got {min_available})",
            )
    timeout = sched.get("scheduleTimeoutSeconds")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int):
            c.err("spec.scheduling.scheduleTimeoutSeconds", f"must be an integer (got {timeout!r})")
            timeout = None
        elif not 1 <= timeout <= MAX_SCHEDULE_TIMEOUT_SECONDS:
            c.err(
                "spec.scheduling.scheduleTimeoutSeconds",
                f"must be from 1 to {MAX_SCHEDULE_TIMEOUT_SECONDS} (got {timeout})",
            )
    action = sched.get("onScheduleTimeout", "Report")
    if action not in TIMEOUT_ACTIONS:
        c.err("spec.scheduling.onScheduleTimeout", f"must be one of {', '.join(TIMEOUT_ACTIONS)} (got {action!r})")
        action = "Report"
    elif action == "Fail" and timeout is None:
        c.err("spec.scheduling.onScheduleTimeout", "Fail needs scheduleTimeoutSeconds")
    return Scheduling(
        gang=gang,
        queue=queue,
        priority_class_name=priority,
        min_available=min_available,
        schedule_timeout_seconds=timeout,
        on_schedule_timeout=action,
    )
