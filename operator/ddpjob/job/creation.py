"""Creation and refusals policy: which of the gang's Pods to create, what holds them back,
and how a refused create shows in the status.

Pods are created only when no Pod of an earlier attempt (or of an earlier DDPJob of the
same name) holds a name the gang needs; a terminating Pod whose Node is gone or not Ready
is force-deleted at once (no kubelet will confirm it: node_loss.py), one on a Ready Node
is waited for, and named as stuck once past its grace period and a margin.

The `PodsCreated` condition says whether the operator could create what was asked for:
`False` with the API server's reason (`Forbidden` for a quota or Pod Security denial,
`NotOwned` for a name held by an object this job does not control, ...) and its message
while it cannot, `True` again once it could. The status message, which `kubectl get ddpj`
shows, says the same, so a waiting job always says why it waits. A refused create is
retried with backoff; a 422 Invalid is permanent (only a spec change can fix the rendered
object) and fails the job with the server's message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ddpjob import text
from ddpjob.api import backend
from ddpjob.api.launchers import misspelt_launcher, world_warning
from ddpjob.job import node_loss, scheduling
from ddpjob.job.conditions import build_conditions, set_condition
from ddpjob.job.decision import (
    FAILED,
    PENDING,
    RESTARTING,
    RUNNING,
    Event,
    ForceDelete,
    Observed,
    Plan,
    RefusedCreates,
)
from ddpjob.job.observe import PodState
from ddpjob.job.step import stopped_counts
from ddpjob.times import parse_time

if TYPE_CHECKING:
    from ddpjob.job.step import Step

PODS_CREATED = "PodsCreated"
# A kubelet confirms a deletion shortly after the grace period; past this margin it is lost or stuck.
STUCK_MARGIN = timedelta(seconds=30)
ROUNDING = timedelta(seconds=1)  # status times have whole seconds (step.ROUNDING)


def refused_status(
    status: Mapping[str, Any], reason: str, message: str, created: int, wanted: int, now: str
) -> dict[str, Any]:
    """The status of a job whose creates are refused: it waits, and says why."""
    waiting = f"{created}/{wanted} Pods created; waiting: {message}"
    return {
        **status,
        "message": waiting,
        "conditions": set_condition(status.get("conditions"), PODS_CREATED, "False", reason, message, now),
    }


def created_status(status: Mapping[str, Any], now: str) -> dict[str, Any]:
    """After a refusal, the creates went through: the condition flips back (never added otherwise)."""
    conditions = status.get("conditions") or []
    # A refusal that this very status still reports (the job logic's own, e.g. Pods of an
    # earlier incarnation) is current, not past.
    if not any(
        c.get("type") == PODS_CREATED
        and c.get("status") == "False"
        and str(c.get("message")) not in str(status.get("message"))
        for c in conditions
    ):
        return dict(status)
    return {**status, "conditions": set_condition(conditions, PODS_CREATED, "True", "Created", "all Pods created", now)}


def failed_status(previous: Mapping[str, Any], reason: str, message: str, generation: int, now: str) -> dict[str, Any]:
    """A permanent refusal (the API server finds the rendered Pod invalid): the job fails,
    because no retry can change the answer; the user fixes the spec."""
    st = {
        **stopped_counts(previous, None),
        "phase": FAILED,
        "message": message,
        "observedGeneration": generation,
        "restarts": int(previous.get("restarts", 0)),
        "completionTime": now,
    }
    conditions = build_conditions(previous.get("conditions"), FAILED, "PodInvalid", message, now)
    st["conditions"] = set_condition(conditions, PODS_CREATED, "False", reason, message, now)
    return st


def _waiting_phase(step: Step) -> str:
    return RESTARTING if step.restarts and step.prev_phase == RESTARTING else PENDING


def stuck_pods(observed: Observed, pods: list[PodState]) -> tuple[tuple[tuple[str, str], ...], float | None]:
    """Terminating Pods on a lost node (at once), or past grace + margin on another, and
    seconds until the next one is."""
    stuck, wake, now = [], None, observed.now
    for p in pods:
        ends = parse_time(p.deletion_time) if p.deleting and p.node_name else None
        if ends is None:
            continue
        if node_loss.lost_node(observed, p.node_name):
            stuck.append((p.name, str(p.node_name)))
            continue  # force-deleted now: nothing to wake for
        due = ends + ROUNDING + STUCK_MARGIN
        if now >= due:
            stuck.append((p.name, str(p.node_name)))
            # Look again later: a node Ready now may be lost by then.
            wait = STUCK_MARGIN.total_seconds()
        else:
            wait = (due - now).total_seconds()
        wake = wait if wake is None else min(wake, wait)
    return tuple(sorted(stuck)), wake


def force_deletes(step: Step, stuck: tuple[tuple[str, str], ...]) -> tuple[ForceDelete, ...]:
    """Of the stuck Pods (`stuck_pods`), those whose Node is gone or not Ready: no kubelet
    will ever confirm them (what PodGC does for a deleted Node, and what an admin does with
    `kubectl delete --force` for an unreachable one). On a Ready Node the kubelet is alive
    and is waited for: a force delete there could run two gangs at once; so is a Node the
    observation did not read."""
    uids, nodes = {p.name: p.uid for p in step.observed.pods}, step.observed.nodes
    out = []
    for pod, node in stuck:
        if node not in nodes or nodes[node] == "True":
            continue
        ready = nodes[node]
        why = "is gone" if ready is None else f"is not Ready (Ready={ready or 'unknown'})"
        out.append(
            ForceDelete(
                pod, uids.get(pod), f"force-deleted Pod {pod}: its node {node} {why}, and no kubelet will confirm it"
            )
        )
    return tuple(out)


def held(step: Step) -> Plan | None:
    """Names the gang needs are held: by an earlier DDPJob's Pods (never touched, the
    garbage collector's), or by an earlier attempt's (deleted, and waited for)."""
    job, waiting = step.job, _waiting_phase(step)
    if step.foreign:
        names = ", ".join(sorted(p.name for p in step.foreign))
        msg = (
            f"Pod(s) {names} belong to an earlier DDPJob named {job.name!r} (another uid) and are "
            f"not this job's to delete; waiting for the garbage collector to remove them"
        )
        st = refused_status(
            step.status(waiting, "NotOwned", msg), "NotOwned", msg, len(step.current), job.nodes, step.now_s
        )
        news = (Event("Warning", "FailedCreatePod", msg),) if step.prev.get("message") != st["message"] else ()
        return Plan(
            status=st,
            delete=tuple(p.name for p in step.leftover if not p.deleting and not p.leftover),
            requeue_after=step.deadline_in,
            events=news,
        )
    if not step.leftover:
        return None
    msg = f"waiting for {len(step.leftover)} Pod(s) of an earlier attempt to go away"
    stuck, wake = stuck_pods(step.observed, step.leftover)
    if stuck:
        msg += (
            "; stuck terminating: "
            + ", ".join(f"{p} on node {n}" for p, n in stuck)
            + " (force-deleted if the node is gone or NotReady, else waiting for its kubelet)"
        )
    return Plan(
        status=step.status(waiting, "Terminating", msg),
        force_delete=force_deletes(step, stuck),
        delete=tuple(p.name for p in step.leftover if not p.deleting),
        requeue_after=step.earliest(step.deadline_in, wake),
    )


def _processes(job: Any) -> str:
    """What runs: "4 processes" when a launcher starts them; a command that is no launcher
    is started once per node, and how many processes it makes is its own business."""
    if world_warning(job) is None:
        return text.plural(job.world_size, "process")
    return f"{job.command[0]} once per node, world size {job.world_size}"


def running(step: Step) -> Plan | None:
    """Every node runs (or has finished): the job is Running. An elastic job runs with
    `minNodes` (its other Pods may still be starting; elastic.py creates missing ones)."""
    job, current = step.job, step.current
    up = sum(
        1
        for p in current.values()
        if p.phase in ("Running", "Succeeded") and not p.deleting and p.name not in step.troubled
    )
    if job.elastic is not None:
        if up < job.min_nodes or any(p.phase == "Failed" for p in current.values()):
            return None
    elif len(current) != job.nodes or any(p.phase not in ("Running", "Succeeded") for p in current.values()):
        return None
    most = job.elastic.max_nodes if job.elastic else job.nodes
    msg = (
        f"{text.all_of(job.nodes, 'node')} running ({_processes(job)})"
        if up == job.nodes
        else f"{up}/{job.nodes} nodes running (elastic, {job.min_nodes} to {most})"
    )
    return Plan(
        status=step.status(RUNNING, "AllNodesRunning", msg, startTime=step.prev.get("startTime") or step.now_s),
        requeue_after=step.deadline_in,
        events=step.on_entry(RUNNING, "Normal", "Running", msg),
    )


def first_notices(step: Step) -> tuple[Event, ...]:
    """What the job's first written status says once, whichever policy decided that step (a
    gang whose Pods failed before the operator looked again goes straight to Failed): a
    world the command cannot fill (nprocPerNode > 1, no launcher), said as the typo it is
    when the launcher is misspelt, and `backend: auto` falling back to gloo. `kubectl
    apply` shows no CLI warning, so these are Events; a gang restart does not say them again."""
    if step.prev_phase is not None:
        return ()
    job = step.job
    world = world_warning(job)
    reason = "MisspeltCommand" if job.command and misspelt_launcher(job.command[0]) else "NotALauncher"
    events = (Event("Warning", reason, world),) if world else ()
    gloo = backend.notice(job)  # `backend: auto` on a GPU job with more processes than GPUs
    return events + ((Event("Normal", backend.NOTICE_REASON, gloo),) if gloo else ())


def start(step: Step) -> Plan:
    """The gang is starting: create its missing Pods, unless creates must wait (the gang
    integration, a refused create's backoff)."""
    job, gang_wait, observed = step.job, step.gang_wait, step.observed
    missing = tuple(r for r in range(job.nodes) if r not in step.current)
    running_ = sum(1 for p in step.current.values() if p.phase in ("Running", "Succeeded"))
    msg = (
        f"creating {len(missing)} Pod(s)"
        if missing
        else gang_wait.message
        if gang_wait.waiting
        else f"{running_}/{job.nodes} nodes running"
    )
    # Waiting is reported, never failed: a Warning once when the timeout passes.
    timeout_event = (
        (Event("Warning", scheduling.TIMEOUT_REASON, gang_wait.message),) if gang_wait.newly_timed_out else ()
    )
    plan = Plan(
        status=step.status(_waiting_phase(step), "Starting", msg, startTime=step.prev.get("startTime") or step.now_s),
        create=missing,
        avoid_nodes=node_loss.avoid(observed) if missing else (),
        requeue_after=step.earliest(step.deadline_in, gang_wait.timeout_in),
        events=timeout_event,
        write_status=not missing,
    )
    if not missing:
        return plan
    if observed.gang_blocked is not None:
        return scheduling.blocked(step, plan)
    if observed.refused is not None:
        return refused(step, plan, observed.refused)
    return plan


def refused(step: Step, plan: Plan, refused: RefusedCreates) -> Plan:
    """Creates the API server refused: fail for good (422), or wait out the backoff."""
    refusal, events = refused.refusal, tuple[Event, ...]()
    if refused.fresh and not refusal.silent:
        events = (Event("Warning", refusal.event_reason, refusal.event_message),)
    if refusal.permanent:
        message = f"the API server refused {refusal.kind} {refusal.name!r}: {refusal.message}"
        # Its live Pods are stopped by the next step (a finished job's).
        return Plan(
            status=failed_status(step.prev, refusal.reason, message, step.job.generation, step.now_s),
            events=(*events, Event("Warning", "Failed", message)),
        )
    if refused.retry_in <= 0:
        return replace(plan, keep_refusal=True)  # due: try again
    status = refused_status(
        plan.status, refusal.reason, refusal.message, step.job.nodes - len(plan.create), step.job.nodes, step.now_s
    )
    return Plan(
        status=status,
        requeue_after=step.earliest(refused.retry_in, plan.requeue_after),
        events=events + plan.events,
        keep_refusal=True,
    )
