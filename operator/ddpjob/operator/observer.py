"""What the controller observes of one job, as one `decision.Observed`, and what it
remembers of the job between reconciles (`JobMemory`).

The Pods come from kopf's in-memory index (nothing here lists the API), corrected by the
`Expectations` of this operator's own recent writes; a disrupted member of the running
gang that vanished with its mark is added back (the job logic must learn it was a
preemption, not a deletion by hand). What the acts of earlier passes learned (a refused
create and its backoff, a PodGroup still going away) is part of the observation too.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ddpjob.api import accepted_spec, names, spec, template_policy
from ddpjob.job import scheduling
from ddpjob.job.decision import RUNNING, GangSaid, Observed, RefusedCreates
from ddpjob.job.observe import PodState
from ddpjob.operator import refusals
from ddpjob.operator.expectations import Expectations
from ddpjob.operator.gang import GangSupport

Key = tuple[str, str]
# (uid of the Pod's DDPJob controller owner or None, the Pod as the job logic sees it)
IndexedPod = tuple[str | None, PodState]


@dataclass
class JobMemory:
    """What the controller remembers of one job between reconciles."""

    key: Key
    uid: str | None = None
    status: dict[str, Any] | None = None  # last status written (None: trust the indexed body)
    resource_version: str | None = None  # of the object as `status` was written
    service_attempt: int | None = None  # the gang attempt whose Service was last ensured
    expectations: Expectations = field(default_factory=Expectations)
    # What this operator accepted of the immutable fields before any status says so
    # (accepted_spec.py): the first pass creates Pods, the next writes the status.
    accepted: dict[str, str] | None = None
    backoff: refusals.Backoff = field(default_factory=refusals.Backoff)  # refused creates
    # PodGroups this job controls, by name -> (apiVersion, kind, uid); deleted, with the uid
    # as a precondition, when their attempt ends.
    pod_groups: dict[str, tuple[str, str, str | None]] = field(default_factory=dict)
    # Pods seen marked for a disruption (preemption, eviction), by name, with their owner's
    # uid: the mark and the deletion often arrive in one burst, and a Pod the API removes
    # at once leaves the index with its mark before any reconcile has looked.
    disrupted: dict[str, IndexedPod] = field(default_factory=dict)
    # Pods whose events this operator has seen, by name: (owner uid, attempt). A running
    # member gone that is not here went while no operator watched (failure.gone).
    watched: dict[str, tuple[str | None, int]] = field(default_factory=dict)
    gang_waits: int = 0  # consecutive steps that found the gang blocked
    gang_block: tuple[str, str] | None = None  # the last act's PodGroup answer, for the next step
    # What the gang's scheduler or queue said of its held Pods (gang_reader.py), and how
    # many reconciles in a row read it (the re-read's backoff).
    gang_said: GangSaid | None = None
    gang_reads: int = 0
    status_written_at: float | None = None  # monotonic time of this operator's last status write

    def saw(self, body: Mapping[str, Any]) -> None:
        """A Pod event: remember the Pod as seen (cheap: every event pays it)."""
        meta = body.get("metadata") or {}
        try:
            attempt = int((meta.get("labels") or {})[names.LABEL_RESTART_COUNT])
        except (KeyError, TypeError, ValueError):
            return
        self.watched[str(meta.get("name") or "")] = (owner_uid(meta), attempt)

    def reset(self, uid: str | None) -> None:
        """A job deleted and recreated under the same name starts from nothing."""
        self.uid, self.status, self.service_attempt, self.accepted = uid, None, None, None
        self.resource_version = None
        # (disrupted is kept: it may predate the first reconcile, and entries of another uid
        # are dropped when read)
        self.pod_groups, self.gang_waits, self.gang_block = {}, 0, None
        self.gang_said, self.gang_reads = None, 0
        self.expectations.clear()
        self.backoff.clear()


def owner_uid(meta: Mapping[str, Any]) -> str | None:
    """The uid of a Pod's controlling DDPJob (None: no DDPJob controls it)."""
    owner = None
    for ref in meta.get("ownerReferences") or []:
        if (
            ref.get("controller")
            and ref.get("kind") == names.KIND
            and ref.get("apiVersion", "").startswith(names.GROUP + "/")
        ):
            owner = ref.get("uid")
    return owner


def indexed_pods(job: JobMemory, pods: Iterable[IndexedPod], uid: str) -> list[PodState]:
    """The job's Pods: the index, corrected by what this operator just did."""
    seen: dict[str, PodState] = {}
    for owner, pod in pods:
        if owner is None:
            continue  # carries the label but no DDPJob controls it: not ours to judge
        if owner != uid:
            # Left by an earlier DDPJob of the same name, awaiting garbage collection:
            # it holds a name this job needs.
            pod = dataclasses.replace(pod, leftover=True)
        seen[pod.name] = pod
        job.watched[pod.name] = (owner, pod.restart_count)
    return job.expectations.apply(seen)


def with_disrupted(job: JobMemory, pods: list[PodState], uid: str, previous: Mapping[str, Any]) -> list[PodState]:
    """`pods`, plus a disrupted member of the running gang that vanished with its mark, until
    a status has recorded its loss: an elastic job goes on without it and makes its index
    again under the same name, which the remembered Pod would hold for ever (a drained
    node's evicted Pod kept its replacement from being made until the job ended)."""
    seen = {p.name for p in pods}
    attempt = int(previous.get("restarts", 0))
    running = previous.get("phase") == RUNNING
    job.disrupted = {
        n: (owner, p)
        for n, (owner, p) in job.disrupted.items()
        if owner == uid and p.restart_count == attempt and (n in seen or (running and not _recorded(previous, p)))
    }
    return pods + [dataclasses.replace(p, deleting=True) for n, (_, p) in job.disrupted.items() if n not in seen]


def _recorded(previous: Mapping[str, Any], pod: PodState) -> bool:
    """Whether the status already tells of this member's loss: an elastic job's lost index
    not yet made again (`lostIndices`). (A rigid gang's loss moves the attempt on, which
    drops the memory; its last failure may name the same Pod of an earlier attempt.)"""
    lost = previous.get("lostIndices")
    return isinstance(lost, list) and any(
        isinstance(e, Mapping) and e.get("index") == pod.node_rank and not e.get("replaced") for e in lost
    )


def parse(
    job: JobMemory, body: Mapping[str, Any], template_allow: frozenset[str]
) -> tuple[spec.DDPJob | None, tuple[str, ...]]:
    """The spec, or why it is refused (parse errors, template policy, an immutable change).

    Immutability is judged against what this operator accepted (accepted_spec.py): the
    status it wrote, else its memory of the first pass; never kopf's annotation."""
    try:
        parsed = spec.parse_job(body)
        errors = [str(e) for e in template_policy.check_job(parsed, template_allow)]
    except spec.InvalidSpec as exc:
        return None, tuple(str(e) for e in exc.errors)
    status = job.status if job.status is not None else body.get("status") or {}
    accepted = status.get(accepted_spec.FIELD) if isinstance(status, Mapping) else None
    accepted = accepted if isinstance(accepted, Mapping) and accepted else job.accepted
    errors += [str(e) for e in accepted_spec.changes(accepted or {}, parsed)]
    if not errors and accepted is None:
        job.accepted = accepted_spec.fingerprint(parsed)
    return parsed, tuple(errors)


def observe(
    job: JobMemory,
    body: Mapping[str, Any],
    current: list[PodState],
    spec_: tuple[spec.DDPJob | None, tuple[str, ...]],
    now: datetime,
    gang: GangSupport,
    progress: Any,
    monotonic: float,
    nodes: Mapping[str, str | None] | None = None,
    unhealthy_nodes: Mapping[str, str] | None = None,
) -> Observed:
    """One observation of the job: `current` its Pods (`indexed_pods`), `spec_` its spec as
    `parse` read it, `nodes` the Ready status of its Pods' Nodes and `unhealthy_nodes` the
    cluster's unhealthy ones, as the Node watch last saw them (nodes.py). Consumes what the
    last act learned (it is said once)."""
    uid = job.uid or ""
    previous = job.status if job.status is not None else dict(body.get("status") or {})
    generation = int((body.get("metadata") or {}).get("generation") or 0)
    parsed, errors = spec_
    if errors or parsed is None:
        return Observed(
            job=parsed,
            pods=tuple(current),
            previous=previous,
            now=now,
            errors=errors,
            generation=generation,
            pod_groups=tuple(job.pod_groups),
        )
    refused = None
    if job.backoff.active and job.backoff.last is not None:
        refused = RefusedCreates(job.backoff.last, job.backoff.wait(now), fresh=job.backoff.take_fresh())
    why = gang.unavailable(parsed.scheduling.gang)
    blocked = (scheduling.UNAVAILABLE, why) if why else job.gang_block
    job.gang_block = None
    since = monotonic - job.status_written_at if job.status_written_at is not None else None
    attempt = int(previous.get("restarts", 0))
    said = job.gang_said if job.gang_said is not None and job.gang_said.attempt == attempt else None
    seen = frozenset(n for n, (owner, at) in job.watched.items() if owner == uid and at == attempt)
    return Observed(
        job=parsed,
        pods=tuple(with_disrupted(job, current, uid, previous)),
        previous=previous,
        now=now,
        progress=progress,
        generation=generation,
        refused=refused,
        gang_blocked=blocked,
        gang_waits=job.gang_waits,
        gang_said=said,
        since_last_write=since,
        jitter=random.random(),
        nodes=dict(nodes or {}),
        unhealthy_nodes=dict(unhealthy_nodes or {}),
        pod_groups=tuple(job.pod_groups),
        seen=seen,
    )
