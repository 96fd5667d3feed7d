"""`ddpjob describe`: one DDPJob as text, laid out as `kubectl describe` lays out an
object (pure: objects and the time in, text out).

Fields are aligned per section, times are given with their age, tables (conditions, Pods,
Events) have headers and underlines, values are written as YAML writes them (`false`,
not Python's `False`), and a table cell is one line: a multi-line message would break the
columns (`ddpjob get -o yaml` has it whole).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ddpjob import times
from ddpjob.api import names

NONE = "<none>"
SPEC_FIELDS = (
    "nodes",
    "elastic",
    "nprocPerNode",
    "backend",
    "image",
    "gpusPerNode",
    "restartPolicy",
    "maxRestarts",
    "restartBackoffSeconds",
    "activeDeadlineSeconds",
    "ttlSecondsAfterFinished",
    "stallTimeoutSeconds",
    "suspend",
    "checkpoint",
    "tensorboard",
    "scheduling",
)
# desiredNodes only tells something in an elastic job (a rigid one's is spec.nodes).
STATUS_FIELDS = (
    "phase",
    "message",
    "nodes",
    "desiredNodes",
    "readyNodes",
    "scheduledNodes",
    "restarts",
    "resizes",
    "disruptions",
    "worldSize",
    "startTime",
    "completionTime",
)
PROGRESS_FIELDS = ("summary", "attempt", "samplesPerSecond", "loss", "eta", "updateTime")
FAILURE_FIELDS = (
    "pod",
    "nodeRank",
    "exitCode",
    "reason",
    "errorLine",
    "sameOnAttempts",
    "message",
    "retryable",
    "time",
)
MAX_EVENTS = 20


def value(v: Any) -> str:
    """As YAML (and kubectl) write a scalar: true/false, <none> for nothing."""
    if v is None or v == "" or v == [] or v == {}:
        return NONE
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def cell(v: Any) -> str:
    return " ".join(value(v).split()) or NONE


def fields(rows: Sequence[tuple[str, str]], indent: int) -> list[str]:
    """`label:` then the value, every value of the section starting in the same column.
    A value of several lines continues under its first line."""
    if not rows:
        return []
    width = max(len(label) for label, _ in rows) + 3  # the colon, then two spaces
    out = []
    for label, text in rows:
        first, *rest = text.split("\n")
        out.append(f"{' ' * indent}{label + ':':<{width}}{first}".rstrip())
        out += [f"{' ' * (indent + width)}{line}".rstrip() for line in rest]
    return out


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], indent: int = 2) -> list[str]:
    """kubectl describe's tables: a header, an underline, columns two spaces apart."""
    body = [list(headers), ["-" * len(h) for h in headers], *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in body) for i in range(len(headers) - 1)]
    return [
        (" " * indent + "  ".join([c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)] + [r[-1]])).rstrip()
        for r in body
    ]


def timed(v: Any, now: datetime) -> str:
    ago = times.since(v, now) if isinstance(v, str) else None
    return f"{v} ({ago} ago)" if ago else value(v)


def section(
    title: str, source: Mapping[str, Any], keys: Iterable[str], now: datetime, time_keys: tuple[str, ...] = ()
) -> list[str]:
    rows = [(k, timed(source[k], now) if k in time_keys else value(source[k])) for k in keys if k in source]
    return [f"{title}:" + ("" if rows else f"  {NONE}"), *fields(rows, 2)]


def pod_state(pod: Mapping[str, Any]) -> str:
    """Phase, then the trainer container's state (Running / Terminated: exit code, reason / Waiting: reason)."""
    status = pod.get("status") or {}
    text = status.get("phase") or "Pending"
    for cs in status.get("containerStatuses") or []:
        if cs.get("name") != names.TRAINER_CONTAINER:
            continue
        state = cs.get("state") or {}
        if "terminated" in state:
            t = state["terminated"] or {}
            text += f", exit code {t.get('exitCode')}" + (f" ({t['reason']})" if t.get("reason") else "")
        elif "waiting" in state:
            text += f", waiting: {(state['waiting'] or {}).get('reason') or '?'}"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        text += ", terminating"
    if status.get("reason"):
        text += f" [{status['reason']}]"
    return text


def _event_time(e: Mapping[str, Any]) -> str:
    return e.get("lastTimestamp") or e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp") or ""


def event_age(e: Mapping[str, Any], now: datetime) -> str:
    """`5m`, or kubectl's `5m (x3 over 20m)` for an Event seen several times."""
    last = times.since(_event_time(e), now) or "<unknown>"
    count = e.get("count") or (e.get("series") or {}).get("count") or 1
    first = times.since(e.get("firstTimestamp"), now)
    return f"{last} (x{count} over {first})" if isinstance(count, int) and count > 1 and first else last


def elastic_range(elastic: Any) -> Any:
    """`2 to 4 nodes`: the range an elastic job trains in."""
    if not isinstance(elastic, Mapping):
        return elastic
    return f"{value(elastic.get('minNodes'))} to {value(elastic.get('maxNodes'))} nodes"


def checkpoint_source(ckpt: Any) -> Any:
    """`claimName ckpt at /checkpoints`, or `volume nfs at /ckpt` (the volume's kind)."""
    if not isinstance(ckpt, Mapping):
        return ckpt
    volume = ckpt.get("volume")
    source = (
        f"claimName {value(ckpt.get('claimName'))}"
        if ckpt.get("claimName") is not None
        else f"volume {', '.join(map(str, volume)) if isinstance(volume, Mapping) else value(volume)}"
    )
    return f"{source} at {value(ckpt.get('mountPath') or names.DEFAULT_CHECKPOINT_MOUNT)}"


def scheduling_view(sched: Any) -> Any:
    """`gang volcano, queue team-a, ...`: the fields set, in the order the API lists them."""
    if not isinstance(sched, Mapping):
        return sched
    return ", ".join(f"{k} {value(v)}" for k, v in sched.items()) or NONE


SPEC_VIEWS = {"elastic": elastic_range, "checkpoint": checkpoint_source, "scheduling": scheduling_view}


def lost_indices(status: Mapping[str, Any], now: datetime) -> list[str]:
    """An elastic job's indices lost lately (status.lostIndices): each one's losses in a row,
    when the last was seen, and whether its Pod has been created again."""
    lost = [e for e in status.get("lostIndices") or [] if isinstance(e, Mapping)]
    if not lost:
        return []
    return [
        "Lost Indices:",
        *table(
            ("Index", "Losses", "Lost", "Replaced"),
            (
                (
                    cell(e.get("index")),
                    cell(e.get("losses")),
                    times.since(e.get("lostAt"), now) or NONE,
                    cell(bool(e.get("replaced"))),
                )
                for e in lost
            ),
        ),
    ]


def describe(
    job: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    now: datetime,
    loss_curve: str | None = None,
) -> str:
    """`loss_curve`: the logged losses as one line (ddpjob.curves.sparkline), shown under Progress."""
    meta, spec, status = job.get("metadata") or {}, job.get("spec") or {}, job.get("status") or {}
    command = " ".join(map(str, (spec.get("command") or []) + (spec.get("args") or [])))
    spec_view = {
        **{k: SPEC_VIEWS.get(k, lambda v: v)(spec[k]) for k in SPEC_FIELDS if k in spec},
        **({"command": command} if command else {}),
    }
    if not spec.get("elastic"):
        status = {k: v for k, v in status.items() if k != "desiredNodes"}
    out = fields(
        [
            ("Name", value(meta.get("name"))),
            ("Namespace", value(meta.get("namespace"))),
            ("Created", timed(meta.get("creationTimestamp"), now)),
        ],
        0,
    )
    out += section("Spec", spec_view, (*SPEC_FIELDS, "command"), now)
    out += section("Status", status, STATUS_FIELDS, now, ("startTime", "completionTime"))
    # The progress record of the attempt that wrote it; a job that is not running has no ETA.
    progress = {**(status.get("progress") or {}), **({"curve": loss_curve} if loss_curve else {})}
    out += section("Progress", progress, (*PROGRESS_FIELDS, "curve"), now, ("updateTime",))
    out += section("Last Failure", status.get("lastFailure") or {}, FAILURE_FIELDS, now, ("time",))
    if status.get("tensorboard"):  # spec.tensorboard: where it answers (`ddpjob tensorboard NAME` opens it)
        out += section("TensorBoard", status["tensorboard"], ("url", "service", "message"), now)
    out += lost_indices(status, now)
    conditions = status.get("conditions") or []
    out.append("Conditions:" + ("" if conditions else f"  {NONE}"))
    if conditions:
        out += table(
            ("Type", "Status", "Reason", "Age", "Message"),
            (
                (
                    cell(c.get("type")),
                    cell(c.get("status")),
                    cell(c.get("reason")),
                    times.since(c.get("lastTransitionTime"), now) or NONE,
                    cell(c.get("message")),
                )
                for c in conditions
            ),
        )
    out.append("Pods:" + ("" if pods else f"  {NONE}"))
    if pods:
        out += table(
            ("Name", "Node", "Attempt", "Age", "State"),
            (
                (
                    cell(p["metadata"].get("name")),
                    cell(labels.get(names.LABEL_NODE_RANK)),
                    cell(labels.get(names.LABEL_RESTART_COUNT)),
                    times.since(p["metadata"].get("creationTimestamp"), now) or NONE,
                    pod_state(p),
                )
                for p in pods
                for labels in [(p.get("metadata") or {}).get("labels") or {}]
            ),
        )
    # The job's own Events, as kubectl describe picks them (by uid): its Service has the same name.
    own = [e for e in events if (e.get("involvedObject") or {}).get("uid") in (None, meta.get("uid"))]
    recent = sorted(own, key=times.event_order)[-MAX_EVENTS:]
    out.append("Events:" + ("" if recent else f"  {NONE}"))
    if recent:
        out += table(
            ("Type", "Reason", "Age", "From", "Message"),
            (
                (
                    cell(e.get("type")),
                    cell(e.get("reason")),
                    event_age(e, now),
                    cell((e.get("source") or {}).get("component") or e.get("reportingComponent")),
                    cell(e.get("message")),
                )
                for e in recent
            ),
        )
    return "\n".join(out)
