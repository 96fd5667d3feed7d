"""Failure and restart policy: a failed member fails the gang; the gang restarts (after
`restartBackoffSeconds`, doubling) until `maxRestarts`, or fails when `restartPolicy`
does not retry the failure. A preempted or evicted member is a disruption: the gang
restarts without using up `maxRestarts`. A gang that hangs (stall.py) is a failure too.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ddpjob import error_lines, exit_codes
from ddpjob.api import names
from ddpjob.job import stall
from ddpjob.job.decision import FAILED, RESTARTING, RUNNING, Event, Plan
from ddpjob.job.observe import PodState
from ddpjob.job.restart_policy import backoff_seconds, is_retryable
from ddpjob.times import format_time, parse_time

if TYPE_CHECKING:
    from ddpjob.job.step import Step


def error_line(message: str | None) -> str | None:
    """The line of a failed container's termination message (the line ddpjob-launch left,
    or its log tail: FallbackToLogsOnError) that says why it failed (error_lines.py)."""
    return error_lines.error_line(message)


def retryable(pod: PodState, policy: str) -> bool:
    """Whether `policy` retries this Pod's failure (its end, reason and error line)."""
    return is_retryable(policy, pod.exit_code, pod.reason, error_line(pod.message))


def failure_record(pod: PodState, policy: str, now: datetime) -> dict[str, Any]:
    """`status.lastFailure` for the Pod that caused the failure. A container that exited
    says so with the first error line of its log; other ends (deleted, evicted, a hang)
    with their own message."""
    reason = pod.reason or pod.disruption or ("PodDeleted" if pod.phase != "Failed" else "Error")
    exit_text = f"exit code {pod.exit_code}" if pod.exit_code is not None else "no exit code"
    # A container ended by a signal (a kill, the OOM killer) wrote no verdict of its own:
    # the last line of its log is whatever it was doing, not why it ended.
    # A container that could not start has the runtime's reason as its message (a missing
    # executable): that is its error line. So has the trainer's own 142: it says which
    # wait for its peers ran out before it exits (a group that never formed, a lost one).
    exited = pod.exit_code is not None and not pod.disruption
    signalled = (
        pod.exit_code is not None
        and exit_codes.is_signal(pod.exit_code)
        and not exit_codes.is_start_error(pod.exit_code, pod.reason)
        and pod.exit_code != exit_codes.RENDEZVOUS_TIMEOUT
    )
    line = error_line(pod.message) if exited else None
    if signalled and line is not None and not error_lines.is_crash(line):
        line = None  # but a crash's own dump (faulthandler's) says where it crashed
    default = f"Pod {pod.name} failed ({exit_text}, {reason})"
    out = {
        "pod": pod.name,
        "nodeRank": pod.node_rank,
        "reason": reason,
        # An exited container's own message is its log tail: only its error line is said.
        "message": f"{default}: {line}" if line else default if exited else pod.message or default,
        "time": format_time(now),
        "retryable": is_retryable(policy, pod.exit_code, reason, line),
    }
    if pod.exit_code is not None:
        out["exitCode"] = pod.exit_code
    if line:
        out["errorLine"] = line
    return out


def same_every_attempt(step: Step, failure: dict[str, Any]) -> int:
    """How many attempts in a row, every one so far, ended with this very failure (the
    same exit code and error line, but for its times, pids and addresses:
    `error_lines.same_failure_key`) before the trainer wrote any progress; 0 when not."""
    if failure.get("exitCode") is None or not failure.get("errorLine"):
        return 0
    progress = step.prev.get("progress")
    if isinstance(progress, dict) and progress.get("attempt", step.restarts) == step.restarts:
        return 0  # it trained a while: a later failure, not a job that cannot start
    last = step.prev.get("lastFailure") or {}
    last_line = last.get("errorLine")
    same = (
        last.get("exitCode") == failure["exitCode"]
        and isinstance(last_line, str)
        and error_lines.same_failure_key(last_line) == error_lines.same_failure_key(failure["errorLine"])
    )
    count = int(last.get("sameOnAttempts") or 1) + 1 if same and step.restarts else 1
    return count if count == step.restarts + 1 else 0


def stops_repeating(count: int, failure: dict[str, Any], policy: str) -> bool:
    """Whether a failure the second attempt repeated ends the job under OnFailure: the
    program's own verdict (exit 1-127) on the same input, before any progress, is what a
    third attempt would meet too. A line that blames the network or a peer
    (`error_lines.transient`) is retried as the policy says."""
    return (
        count >= 2
        and policy == "OnFailure"
        and 1 <= failure["exitCode"] <= 127
        and not error_lines.transient(failure["errorLine"])
    )


def repeated(count: int, failure: dict[str, Any], policy: str) -> str:
    """What a repeated failure costs, and how to stop paying for it."""
    said = f"the same failure on all {count} attempts, before any training progress"
    if stops_repeating(count, failure, policy):
        return f"{said}: not retried again (restartPolicy: ExitCode fails at once on exit codes 1-127)"
    advice = (
        "; set restartPolicy: ExitCode to fail at once on exit codes 1-127"
        if policy == "OnFailure" and 1 <= failure["exitCode"] <= 127
        else ""
    )
    return f"{said}{advice}"


def root_cause(failed: list[PodState]) -> PodState:
    # When one member dies its peers fail too (broken rendezvous, exit 1). The first to
    # finish is the cause; on a tie (finishedAt is in whole seconds) a signal or eviction
    # explains the others better, and so does a program's own error over a broken connection.
    def blames_a_peer(p: PodState) -> bool:
        line = error_line(p.message)
        return bool(line and error_lines.transient(line))

    return sorted(
        failed,
        key=lambda p: (
            p.finished_at or "9999",
            not is_retryable("ExitCode", p.exit_code),
            blames_a_peer(p),
            p.node_rank,
        ),
    )[0]


def failed_members(step: Step) -> list[PodState]:
    """The current attempt's failed members (and, while Running, its vanished ones and a
    hang); sets `step.stalled` when the gang has stalled."""
    job, current, restarts = step.job, step.current, step.restarts
    failed = [p for p in current.values() if p.phase == "Failed"]
    # A member on a lost or unhealthy node is lost in any phase (node_loss.py): no kubelet
    # will ever write its end, or it is being moved off.
    failed += list(step.troubled.values())
    if step.prev_phase != RUNNING:
        return failed
    # Once the whole gang ran, a member that vanishes or is being deleted was removed by
    # someone else (a person, an eviction): the gang is broken.
    failed += [p for p in current.values() if p.deleting and p.phase != "Failed"]
    failed += [gone(step, r) for r in range(job.nodes) if r not in current]
    if not failed and all(p.phase == "Running" and not p.deleting for p in current.values()):
        step.stalled = stall.check(job.stall_timeout_seconds, step.progress, restarts, job.world_size)
        if step.stalled:
            # A hang is a failure of its own: no exit code, so every retrying policy retries it.
            failed = [
                PodState(
                    name=f"{job.name}-0",
                    node_rank=0,
                    restart_count=restarts,
                    phase="Running",
                    reason=stall.STALLED,
                    message=step.stalled,
                )
            ]
    return failed


# A running member gone without a mark that this operator never saw: it went while no
# operator watched (a failover to a standby, a restart), so nothing tells why. Nearly
# everything that removes a Pod is a disruption (an eviction, a drain, preemption, the
# node's loss); a person's delete is the exception, so the loss is not charged.
GONE_UNWATCHED = "GoneWhileUnwatched"


def gone(step: Step, rank: int) -> PodState:
    """The member of `rank` that vanished from the running gang."""
    name, seen = names.pod_name(step.job.name, rank), step.observed.seen
    watched = seen is None or name in seen
    return PodState(
        name=name,
        node_rank=rank,
        restart_count=step.restarts,
        phase="Deleted",
        reason="PodDeleted" if watched else "PodGone",
        message=f"Pod {name} was deleted"
        if watched
        else f"Pod {name} went while no operator was watching (a failover or restart of the operator)",
        disruption=None if watched else GONE_UNWATCHED,
    )


def plan(step: Step) -> Plan | None:
    """Restart the gang or fail the job, when a member failed."""
    failed = failed_members(step)
    if not failed:
        return None
    job, prev = step.job, step.prev
    stall_events = (Event("Warning", stall.STALLED, step.stalled),) if step.stalled else ()
    disrupted = [p for p in failed if p.disruption]
    cause = root_cause(disrupted or failed)
    failure = failure_record(cause, job.restart_policy, step.now)
    disruptions = int(prev.get("disruptions", 0))
    if cause.disruption:
        failure["retryable"] = job.restart_policy != "Never"
    charged = step.restarts - disruptions
    same = 0 if cause.disruption else same_every_attempt(step, failure)
    if same:
        failure["sameOnAttempts"] = same
    said = repeated(same, failure, job.restart_policy) if same > 1 else ""
    stop = stops_repeating(same, failure, job.restart_policy)
    if stop:
        failure["retryable"] = False
    # Said once, when the second attempt fails as the first did.
    repeat_events = (
        (Event("Warning", "RepeatedFailure", f"{failure['errorLine']} (exit code {failure['exitCode']}): {said}"),)
        if same == 2
        else ()
    )
    if not failure["retryable"] or (not cause.disruption and charged >= job.max_restarts):
        permanent = exit_codes.never_retried(failure.get("exitCode"), failure["reason"], failure.get("errorLine"))
        why = (
            f"{permanent}: not retried under any restartPolicy"
            if permanent
            else ""  # said by `said`
            if stop
            else "restartPolicy does not retry it"
            if not failure["retryable"]
            else f"maxRestarts={job.max_restarts} reached"
        )
        msg = "; ".join(part for part in (failure["message"], said, why) if part)
        return Plan(
            status=step.status(
                FAILED,
                "BackoffLimitExceeded" if failure["retryable"] else "PodFailed",
                msg,
                completionTime=step.now_s,
                lastFailure=failure,
            ),
            delete=step.live,
            requeue_after=step.ttl_in,
            events=stall_events + repeat_events + step.on_entry(FAILED, "Warning", "Failed", msg),
        )
    restarts = step.restarts + 1
    wait = backoff_seconds(job.restart_backoff_seconds, restarts)
    if cause.disruption:
        disruptions += 1
        msg = (
            f"{failure['message']}; restarting the gang ({cause.disruption}: not counted against "
            f"maxRestarts={job.max_restarts}) in {wait:g}s"
        )
    else:
        msg = (
            f"{failure['message']}; {said + '; ' if said else ''}"
            f"restarting the gang ({charged + 1}/{job.max_restarts}) in {wait:g}s"
        )
    return Plan(
        status=step.status(
            RESTARTING,
            "GangRestart",
            msg,
            lastFailure=failure,
            restarts=restarts,
            **({"disruptions": disruptions} if disruptions else {}),
        ),
        delete=tuple(p.name for p in step.pods if not p.deleting),
        requeue_after=wait,
        events=stall_events + repeat_events + (Event("Warning", "Restarting", msg),),
    )


def backing_off(step: Step) -> Plan | None:
    """Between a failure and the next attempt's Pods: wait out the restart backoff."""
    job, prev, restarts = step.job, step.prev, step.restarts
    missing = any(r not in step.current for r in range(job.nodes))
    if not (missing and restarts and step.prev_phase == RESTARTING):
        return None
    failed_at = parse_time((prev.get("lastFailure") or {}).get("time")) or step.now
    ready_at = failed_at + timedelta(seconds=backoff_seconds(job.restart_backoff_seconds, restarts))
    if step.now >= ready_at:
        return None
    counted = restarts - int(prev.get("disruptions", 0))  # disruptions are not counted
    msg = (
        f"backing off before restart {restarts}/{job.max_restarts}"
        if counted == restarts
        else f"backing off before restart {restarts} ({counted}/{job.max_restarts} counted)"
    )
    # The reason stays in the message `--wait` and `kubectl get ddpj -w` show through the
    # backoff: the failure that caused the restart (lastFailure.message, already bounded).
    why = (prev.get("lastFailure") or {}).get("message")
    if isinstance(why, str) and why:
        msg = f"{why}; {msg}"
    return Plan(status=step.status(RESTARTING, "BackOff", msg), requeue_after=(ready_at - step.now).total_seconds())
