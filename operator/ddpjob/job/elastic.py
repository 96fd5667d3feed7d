"""Elastic policy (spec.elastic): a job that keeps training when nodes come and go.

Once an elastic job runs, a lost Pod (failed, evicted, deleted, its node gone) is not a
gang failure while at least `minNodes` Pods still run: the survivors' torchrun re-forms
the group without it, their Pods are left alone, `maxRestarts` is not touched, and the
lost index is created again under the same name once the name is free and its backoff
has passed since the loss: `restartBackoffSeconds`, doubled for each loss in a row of
that index (lost_indices.py: a Pod that keeps failing, on a bad node say, is not
re-created in a tight loop). When it runs, torchrun takes it back into
the group: the job grows back to `spec.nodes`. A change
of `spec.nodes` (within the range) works the same way: Pods above the new size are
deleted, missing ones created.

What stays with the other policies:
- fewer than `minNodes` Pods running: the failure policy's gang restart (a disruption is
  not counted), after which the job waits for its Pods as a starting gang does
  (scheduleTimeoutSeconds, onScheduleTimeout);
- a failure that `restartPolicy` does not retry: the failure policy fails the job;
- a member that finished (Succeeded): training is over, the success policy decides;
- nothing lost: the failure policy's stall check, then `creation.running`.

Every change in the number of running Pods of a running elastic job is a resize: counted
in `status.resizes` and said in an Event with its cause (`settle`), which also keeps
`status.lostIndices` (the losses in a row of each index) for every step.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ddpjob.api import names
from ddpjob.job import creation, lost_indices, node_loss
from ddpjob.job.decision import RUNNING, Event, Plan
from ddpjob.job.failure import failure_record, retryable, root_cause
from ddpjob.job.observe import PodState

if TYPE_CHECKING:
    from ddpjob.job.step import Step

RESIZED, NODE_LOST = "Resized", "NodeLost"
RESIZE_EVENTS = (RESIZED, NODE_LOST)


def _lost(step: Step) -> list[PodState]:
    """Members that failed, are going, or are on a lost or unhealthy node (node_loss.py)."""
    lost = [step.troubled.get(p.name, p) for p in step.current.values()]
    return sorted((p for p in lost if p.phase == "Failed" or p.deleting or p.disruption), key=lambda p: p.node_rank)


def _running(step: Step) -> list[PodState]:
    return [p for p in step.current.values() if p.phase == "Running" and not p.deleting and p.name not in step.troubled]


def _above_size(step: Step) -> list[PodState]:
    """This attempt's Pods above spec.nodes (it was lowered): no longer wanted."""
    return [
        p
        for p in step.leftover
        if not p.leftover and p.restart_count == step.restarts and p.node_rank >= step.job.nodes
    ]


def _missing(step: Step) -> tuple[int, ...]:
    taken = {p.name for p in step.observed.pods}
    return tuple(
        r for r in range(step.job.nodes) if r not in step.current and names.pod_name(step.job.name, r) not in taken
    )


def plan(step: Step) -> Plan | None:
    """Keep a running elastic job running through a lost Pod or a new size."""
    job = step.job
    if job.elastic is None or step.prev_phase != RUNNING:
        return None
    if any(p.phase == "Succeeded" for p in step.current.values()):
        return None
    lost = _lost(step)
    if any(not (p.disruption or p.phase != "Failed" or retryable(p, job.restart_policy)) for p in lost):
        return None  # a failure the job's restartPolicy does not retry
    running, above, missing = _running(step), _above_size(step), _missing(step)
    if len(running) < job.min_nodes or not (lost or above or missing):
        return None
    found = lost_indices.entries(step)
    waits = {r: lost_indices.wait(step, found.get(r)) for r in missing}
    gone = sorted([(p.name, p.node_rank) for p in lost] + [(names.pod_name(job.name, r), r) for r in missing])
    msg = f"{len(running)}/{job.nodes} nodes running (elastic, {job.elastic.min_nodes} to {job.elastic.max_nodes})"
    if gone:
        msg += "; replacing " + ", ".join(
            name + (lost_indices.describe(step, found[r]) if r in found else "") for name, r in gone
        )
    if above:
        msg += f"; stopping {', '.join(p.name for p in above)} (spec.nodes is {job.nodes})"
    changes = {}
    root = root_cause(lost) if lost else None
    # Recorded once per loss, not at every step that sees the Pod still terminating.
    if root is not None and (
        (root.phase == "Failed" and not root.deleting) or (step.prev.get("lastFailure") or {}).get("pod") != root.name
    ):
        changes["lastFailure"] = failure_record(root, job.restart_policy, step.now)
    stuck, wake = creation.stuck_pods(step.observed, lost + above)
    create = tuple(r for r in missing if not waits[r])
    later = min((w for w in waits.values() if w), default=None)
    return Plan(
        status=step.status(RUNNING, "ElasticResize", msg, **changes),
        create=create,
        avoid_nodes=node_loss.avoid(step.observed),
        delete=tuple(p.name for p in lost + above if not p.deleting),
        force_delete=creation.force_deletes(step, stuck),
        requeue_after=step.earliest(step.deadline_in, wake, later),
        write_status=not create,
    )


def _requested(step: Step) -> str | None:
    """A change of size the user asked for (spec.nodes changed), in words, else None."""
    job, prev_desired = step.job, step.prev.get("desiredNodes")
    if prev_desired is not None and prev_desired != job.nodes:
        return f"spec.nodes changed from {prev_desired} to {job.nodes}"
    return None


def _cause(step: Step, before: int, after: int) -> str:
    requested = _requested(step)
    if requested and after >= min(before, step.job.nodes):
        return requested
    job = step.job
    if after > before:
        return "Pod(s) joined"
    lost = _lost(step)
    if lost:
        record = failure_record(root_cause(lost), job.restart_policy, step.now)
        return f"lost {', '.join(p.name for p in lost)}: {record['message']}"
    gone = [names.pod_name(job.name, r) for r in range(job.nodes) if r not in step.current]
    if gone:
        return f"lost {', '.join(gone)}: Pod deleted"
    # Gone and already created again (a delete seen only after the fact): the new Pod waits.
    again = sorted(p.name for p in step.current.values() if p.phase not in ("Running", "Succeeded"))
    return f"lost {', '.join(again)}: Pod deleted, created again" if again else "a Pod stopped running"


def settle(step: Step, plan: Plan) -> Plan:
    """Keep `status.lostIndices` and count and announce a resize: the running elastic job
    has another number of Pods running than its last status said. `resizes` is no
    count-only field, so the write happens at once and the Event is said once."""
    job, prev, status = step.job, step.prev, plan.status
    running = job.elastic is not None and step.prev_phase == RUNNING and status.get("phase") == RUNNING
    if not running:  # a gang restart, a finished job: no index backoff goes on
        if lost_indices.FIELD in status:
            plan = replace(plan, status={k: v for k, v in status.items() if k != lost_indices.FIELD})
        return plan
    found = lost_indices.entries(step)
    status = {k: v for k, v in status.items() if k != lost_indices.FIELD}
    if found:
        status[lost_indices.FIELD] = lost_indices.status_value(found)
    plan = replace(
        plan, status=status, requeue_after=step.earliest(plan.requeue_after, lost_indices.healthy_in(step, found))
    )
    before, after = int(prev.get("readyNodes", 0)), int(status.get("readyNodes", 0))
    if before == after and prev.get("desiredNodes", job.nodes) == job.nodes:
        return plan
    size = f"training at {after}/{job.nodes} nodes"
    # A loss is fewer Pods running than before and than wanted: a smaller spec.nodes the
    # user asked for is a resize (Normal), not a lost node (Warning).
    lost = after < min(before, job.nodes)
    cause = _cause(step, before, after)
    if lost:  # when each lost index comes back, if it has to wait
        cause += "".join(
            f"; creating {names.pod_name(job.name, r)} again{lost_indices.describe(step, e)}"
            for r, e in sorted(found.items())
            if lost_indices.wait(step, e)
        )
    event = Event("Warning" if lost else "Normal", NODE_LOST if lost else RESIZED, f"{size}: {cause}")
    status = {**status, "resizes": int(prev.get("resizes", 0)) + 1}
    return replace(plan, status=status, events=(*plan.events, event))
