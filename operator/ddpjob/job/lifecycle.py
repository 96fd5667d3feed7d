"""The job logic, pure: from a job, its observed Pods and its last status, decide the
whole new status and what to do next. The operator and the local runner both call
`plan()`; neither decides anything on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping

from ddpjob.job import scheduling, stall
from ddpjob.job.conditions import build_conditions
from ddpjob.job.observe import PodState
from ddpjob.job.refusals import refused_status
from ddpjob.job.restart_policy import backoff_seconds, is_retryable
from ddpjob.api.launchers import world_warning
from ddpjob.api.spec import DDPJob, immutable_record

PENDING, RUNNING, RESTARTING = "Pending", "Running", "Restarting"
SUCCEEDED, FAILED, SUSPENDED = "Succeeded", "Failed", "Suspended"
FINISHED = (SUCCEEDED, FAILED)


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class Plan:
    status: dict[str, Any]
    create: tuple[int, ...] = ()  # node ranks to create, with restart count status["restarts"]
    delete: tuple[str, ...] = ()  # Pod names to delete
    delete_job: bool = False  # ttlSecondsAfterFinished has passed
    requeue_after: float | None = None  # seconds until a timer (backoff, deadline, TTL) is due
    events: tuple[Event, ...] = field(default_factory=tuple)
    # Pods past their grace period plus STUCK_MARGIN, still terminating: (pod, node). The
    # operator force-deletes one only when its node is gone or NotReady (its kubelet can
    # no longer confirm); on a Ready node it waits for the kubelet.
    stuck: tuple[tuple[str, str], ...] = ()

    @property
    def restart_count(self) -> int:
        return int(self.status.get("restarts", 0))


def format_time(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# Status times have whole seconds (format_time drops the fraction), so a time read back
# may be up to a second before the event. Deadlines and TTLs count from the end of that
# second: they fire no earlier than asked (and at most a second later).
ROUNDING = timedelta(seconds=1)
# A kubelet confirms a deletion shortly after the grace period; past this margin it is lost or stuck.
STUCK_MARGIN = timedelta(seconds=30)


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def resolved(job: DDPJob) -> dict[str, Any]:
    """What 'auto' became, for `kubectl get` (the PROCS column) and for people."""
    return {"nprocPerNode": job.nproc_per_node, "backend": job.backend, "worldSize": job.world_size,
            "immutableSpec": immutable_record(job)}


def invalid_status(errors: list[str], generation: int, previous: Mapping[str, Any] | None, now: datetime) -> dict:
    """Status of a job whose spec is rejected: Failed, nothing created."""
    message = "; ".join(errors)
    return {
        **dict(previous or {}),
        "phase": FAILED, "message": message, "readyNodes": 0, "observedGeneration": generation,
        "restarts": int((previous or {}).get("restarts", 0)),
        "conditions": build_conditions((previous or {}).get("conditions"), FAILED, "InvalidSpec", message,
                                       format_time(now)),
    }


def _failure(pod: PodState, policy: str, now: datetime) -> dict[str, Any]:
    reason = pod.reason or pod.disruption or ("PodDeleted" if pod.phase != "Failed" else "Error")
    exit_text = f"exit code {pod.exit_code}" if pod.exit_code is not None else "no exit code"
    out = {
        "pod": pod.name, "nodeRank": pod.node_rank, "reason": reason,
        "message": pod.message or f"Pod {pod.name} failed ({exit_text}, {reason})",
        "time": format_time(now), "retryable": is_retryable(policy, pod.exit_code),
    }
    if pod.exit_code is not None:
        out["exitCode"] = pod.exit_code
    return out


def _root_cause(failed: list[PodState], policy: str) -> PodState:
    # When one member dies its peers fail too (broken rendezvous, exit 1). The first to
    # finish is the cause; on a tie a signal or eviction explains the others better.
    return sorted(failed, key=lambda p: (p.finished_at or "9999", not is_retryable("ExitCode", p.exit_code),
                                         p.node_rank))[0]


def _stuck(pods: list[PodState], now: datetime) -> tuple[tuple[tuple[str, str], ...], float | None]:
    """Terminating Pods past grace + margin on a node, and seconds until the next one is."""
    stuck, wake = [], None
    for p in pods:
        ends = parse_time(p.deletion_time) if p.deleting and p.node_name else None
        if ends is None:
            continue
        due = ends + ROUNDING + STUCK_MARGIN
        if now >= due:
            stuck.append((p.name, str(p.node_name)))
            # Look again later: a node Ready now may be lost by then.
            wait = STUCK_MARGIN.total_seconds()
            wake = wait if wake is None else min(wake, wait)
        else:
            wait = (due - now).total_seconds()
            wake = wait if wake is None else min(wake, wait)
    return tuple(sorted(stuck)), wake


def plan(job: DDPJob, pods: list[PodState], previous: Mapping[str, Any] | None, now: datetime,
         progress: stall.ProgressState | None = None) -> Plan:
    """`progress`: what Pod 0's launcher last reported, when it was just read (stall.py)."""
    prev = dict(previous or {})
    prev_phase = prev.get("phase")
    restarts = int(prev.get("restarts", 0))
    now_s = format_time(now)
    current = {p.node_rank: p for p in pods
               if not p.leftover and p.restart_count == restarts and p.node_rank < job.nodes}
    leftover = [p for p in pods if p.leftover or p.restart_count != restarts or p.node_rank >= job.nodes]
    # Pods of an earlier DDPJob of this name (another uid) are never touched: the garbage
    # collector removes them once their owner is gone; this job only waits for them.
    foreign = [p for p in pods if p.leftover]
    pods = [p for p in pods if not p.leftover]
    live = [p.name for p in pods if p.phase in ("Pending", "Running", "Unknown") and not p.deleting]
    progress = progress if progress is not None and progress.restart_count == restarts else None
    stalled: str | None = None
    gang_wait = scheduling.observe(job, current, prev.get("conditions"), now, now_s)

    def status(phase: str, reason: str, message: str, **changes: Any) -> dict[str, Any]:
        ready = sum(1 for p in current.values() if p.phase in ("Running", "Succeeded") and not p.deleting)
        st = {**prev, "phase": phase, "message": message, "restarts": restarts,
              "readyNodes": ready, "scheduledNodes": gang_wait.scheduled, "observedGeneration": job.generation,
              **resolved(job), **changes}
        st["conditions"] = stall.conditions(
            scheduling.with_condition(build_conditions(prev.get("conditions"), phase, reason, message, now_s),
                                      prev.get("conditions"), gang_wait),
            prev.get("conditions"), stalled,
            phase == RUNNING and progress is not None and progress.record is not None
            and progress.seconds_since_progress < (job.stall_timeout_seconds or 60), now_s)
        if progress is not None:
            st["progress"] = stall.status_progress(progress, now) or prev.get("progress")
        return {k: v for k, v in st.items() if v is not None}

    # The step that finishes a job must also wake it when its TTL is due.
    ttl_in = float(job.ttl_seconds_after_finished) if job.ttl_seconds_after_finished is not None else None

    def events(phase: str, kind: str, reason: str, message: str) -> tuple[Event, ...]:
        return (Event(kind, reason, message),) if phase != prev_phase else ()

    # A finished job stays finished: stop what still runs, keep finished Pods for logs.
    if prev_phase in FINISHED:
        done = parse_time(prev.get("completionTime")) or now
        if job.ttl_seconds_after_finished is not None:
            due = done + ROUNDING + timedelta(seconds=job.ttl_seconds_after_finished)
            if now >= due:
                return Plan(status=prev, delete=tuple(live), delete_job=True)
            return Plan(status=prev, delete=tuple(live), requeue_after=(due - now).total_seconds())
        return Plan(status=prev, delete=tuple(live))

    if job.suspend:
        msg = "suspended: Pods deleted; set spec.suspend to false to resume"
        # Like a Kubernetes Job, the deadline clock restarts on resume.
        return Plan(status=status(SUSPENDED, "Suspended", msg, startTime=None) | {"readyNodes": 0},
                    delete=tuple(p.name for p in pods if not p.deleting),
                    events=events(SUSPENDED, "Normal", "Suspended", msg))

    started = parse_time(prev.get("startTime"))
    if job.active_deadline_seconds and started:
        deadline = started + ROUNDING + timedelta(seconds=job.active_deadline_seconds)
        if now >= deadline:
            msg = f"ran longer than activeDeadlineSeconds={job.active_deadline_seconds}"
            return Plan(status=status(FAILED, "DeadlineExceeded", msg, completionTime=now_s),
                        delete=tuple(live), requeue_after=ttl_in,
                        events=events(FAILED, "Warning", "DeadlineExceeded", msg))
        deadline_in = (deadline - now).total_seconds()
    else:
        deadline_in = None

    failed = [p for p in current.values() if p.phase == "Failed"]
    if prev_phase == RUNNING:
        # Once the whole gang ran, a member that vanishes or is being deleted was
        # removed by someone else (a person, an eviction): the gang is broken.
        failed += [p for p in current.values() if p.deleting and p.phase != "Failed"]
        failed += [PodState(name=f"{job.name}-{r}", node_rank=r, restart_count=restarts, phase="Deleted",
                            reason="PodDeleted", message=f"Pod {job.name}-{r} was deleted")
                   for r in range(job.nodes) if r not in current]
        if not failed and all(p.phase == "Running" and not p.deleting for p in current.values()):
            stalled = stall.check(job.stall_timeout_seconds, progress, restarts, job.world_size)
            if stalled:
                # A hang is a failure of its own: no exit code, so every retrying policy retries it.
                failed = [PodState(name=f"{job.name}-0", node_rank=0, restart_count=restarts, phase="Running",
                                   reason=stall.STALLED, message=stalled)]
    stall_events = (Event("Warning", stall.STALLED, stalled),) if stalled else ()
    if failed:
        # A preempted or evicted member explains its peers' broken rendezvous: the gang
        # restarts without using up maxRestarts (the user's program did nothing wrong).
        disrupted = [p for p in failed if p.disruption]
        cause = _root_cause(disrupted or failed, job.restart_policy)
        failure = _failure(cause, job.restart_policy, now)
        disruptions = int(prev.get("disruptions", 0))
        if cause.disruption:
            failure["retryable"] = job.restart_policy != "Never"
        charged = restarts - disruptions
        if not failure["retryable"] or (not cause.disruption and charged >= job.max_restarts):
            why = ("restartPolicy does not retry it" if not failure["retryable"]
                   else f"maxRestarts={job.max_restarts} reached")
            msg = f"{failure['message']}; {why}"
            return Plan(status=status(FAILED, "BackoffLimitExceeded" if failure["retryable"] else "PodFailed",
                                      msg, completionTime=now_s, lastFailure=failure),
                        delete=tuple(live), requeue_after=ttl_in,
                        events=stall_events + events(FAILED, "Warning", "Failed", msg))
        restarts += 1
        wait = backoff_seconds(job.restart_backoff_seconds, restarts)
        if cause.disruption:
            disruptions += 1
            msg = (f"{failure['message']}; restarting the gang ({cause.disruption}: not counted against "
                   f"maxRestarts={job.max_restarts}) in {wait:g}s")
        else:
            msg = f"{failure['message']}; restarting the gang ({charged + 1}/{job.max_restarts}) in {wait:g}s"
        plan_ = Plan(status=status(RESTARTING, "GangRestart", msg, lastFailure=failure,
                                   **({"disruptions": disruptions} if disruptions else {})),
                     delete=tuple(p.name for p in pods if not p.deleting),
                     requeue_after=wait, events=stall_events + (Event("Warning", "Restarting", msg),))
        return plan_

    if len(current) == job.nodes and all(p.phase == "Succeeded" for p in current.values()):
        msg = f"all {job.nodes} nodes finished successfully"
        return Plan(status=status(SUCCEEDED, "Succeeded", msg, completionTime=now_s), requeue_after=ttl_in,
                    events=events(SUCCEEDED, "Normal", "Succeeded", msg))

    waiting = RESTARTING if restarts and prev_phase == RESTARTING else PENDING
    if foreign:
        held = ", ".join(sorted(p.name for p in foreign))
        msg = (f"Pod(s) {held} belong to an earlier DDPJob named {job.name!r} (another uid) and are "
               f"not this job's to delete; waiting for the garbage collector to remove them")
        st = refused_status(status(waiting, "NotOwned", msg), "NotOwned", msg, len(current), job.nodes, now_s)
        news = (Event("Warning", "FailedCreatePod", msg),) if prev.get("message") != st["message"] else ()
        return Plan(status=st, delete=tuple(p.name for p in leftover if not p.deleting and not p.leftover),
                    requeue_after=deadline_in, events=news)
    if leftover:
        # Pods of an earlier attempt hold the names the next attempt needs.
        msg = f"waiting for {len(leftover)} Pod(s) of an earlier attempt to go away"
        stuck, wake = _stuck(leftover, now)
        if stuck:
            msg += "; stuck terminating: " + ", ".join(f"{p} on node {n}" for p, n in stuck) + \
                   " (force-deleted if the node is gone or NotReady, else waiting for its kubelet)"
        timers = [t for t in (deadline_in, wake) if t is not None]
        return Plan(status=status(waiting, "Terminating", msg), stuck=stuck,
                    delete=tuple(p.name for p in leftover if not p.deleting),
                    requeue_after=min(timers) if timers else None)

    missing = tuple(r for r in range(job.nodes) if r not in current)
    if missing and waiting == RESTARTING:
        failed_at = parse_time((prev.get("lastFailure") or {}).get("time")) or now
        ready_at = failed_at + timedelta(seconds=backoff_seconds(job.restart_backoff_seconds, restarts))
        if now < ready_at:
            counted = restarts - int(prev.get("disruptions", 0))  # disruptions are not counted
            msg = (f"backing off before restart {restarts}/{job.max_restarts}" if counted == restarts
                   else f"backing off before restart {restarts} ({counted}/{job.max_restarts} counted)")
            return Plan(status=status(RESTARTING, "BackOff", msg), requeue_after=(ready_at - now).total_seconds())

    start = prev.get("startTime") or now_s
    running = sum(1 for p in current.values() if p.phase in ("Running", "Succeeded"))
    if not missing and running == job.nodes:
        msg = f"all {job.nodes} nodes running ({job.world_size} processes)"
        return Plan(status=status(RUNNING, "AllNodesRunning", msg, startTime=start),
                    requeue_after=deadline_in, events=events(RUNNING, "Normal", "Running", msg))
    if gang_wait.timed_out and job.scheduling.on_schedule_timeout == "Fail":
        msg = gang_wait.message
        return Plan(status=status(FAILED, scheduling.TIMEOUT_REASON, msg, completionTime=now_s),
                    delete=tuple(live), requeue_after=ttl_in, events=events(FAILED, "Warning", "Failed", msg))
    msg = (f"creating {len(missing)} Pod(s)" if missing
           else gang_wait.message if gang_wait.waiting
           else f"{running}/{job.nodes} nodes running")
    # Waiting is reported, never failed: a Warning once when the timeout passes.
    timeout_event = ((Event("Warning", scheduling.TIMEOUT_REASON, gang_wait.message),)
                     if gang_wait.newly_timed_out else ())
    timers = [t for t in (deadline_in, gang_wait.timeout_in) if t is not None]
    # A world the command cannot fill (nprocPerNode > 1, no launcher) is said once, as an
    # Event, when the job first starts: `kubectl apply` shows no CLI warning.
    world = world_warning(job)
    world_event = events(PENDING, "Warning", "NotALauncher", world) if world else ()
    return Plan(status=status(waiting, "Starting", msg, startTime=start), create=missing,
                requeue_after=min(timers) if timers else None, events=world_event + timeout_event)
