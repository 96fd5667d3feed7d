"""The job logic's input and output: what one step observes (`Observed`) and what it
decides (`Plan`, `Event`). Plain frozen data, so every decision is testable as a function
of one value, and a new policy (a file under job/) adds a field here, not a call-back.

The operator fills every field from its indices and its memory of the job; `ddpjob run`
fills the first five (its processes never meet a quota, a gang scheduler or a write
batch) and leaves the rest at their defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ddpjob.api.spec import DDPJob
from ddpjob.job.observe import PodState
from ddpjob.job.stall import ProgressState

PENDING, RUNNING, RESTARTING = "Pending", "Running", "Restarting"
SUCCEEDED, FAILED, SUSPENDED = "Succeeded", "Failed", "Suspended"
FINISHED = (SUCCEEDED, FAILED)
# Stopped short of success: no member of the gang runs (what still runs is being stopped).
HALTED = (FAILED, SUSPENDED)
LIVE_POD_PHASES = ("Pending", "Running", "Unknown")


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class Refusal:
    """The API server's (or our own) no to one create."""

    kind: str  # Pod | Service
    name: str
    reason: str  # the condition's reason: Forbidden, Invalid, NotOwned, ...
    message: str  # what the user reads: the server's message, or which object holds the name
    status: int = 0  # the HTTP code; 0 for a refusal of ours (NotOwned)
    causes: tuple[str, ...] = ()  # the Status' details.causes[].reason

    @property
    def permanent(self) -> bool:
        # 422 Invalid: the rendered object itself is wrong; only a spec change can help.
        return self.status == 422

    @property
    def event_reason(self) -> str:
        return f"FailedCreate{self.kind}"

    @property
    def event_message(self) -> str:
        return f"Error creating: {self.message}"

    @property
    def silent(self) -> bool:
        # The Job controller posts nothing when the namespace is being deleted: the job
        # is about to go too.
        return "NamespaceTerminating" in self.causes


@dataclass(frozen=True)
class RefusedCreates:
    """The job's last refused create, while its retry backoff runs."""

    refusal: Refusal
    retry_in: float  # seconds until creates may be tried again (0: now)
    fresh: bool = False  # refused by the act just before this step: this step reports it


@dataclass(frozen=True)
class GangSaid:
    """What the gang's scheduler or queue says of the attempt's held Pods that they do not
    carry (a Kueue Workload's reason, a Volcano queue's verdict), read as its description
    (api/gangs/) says by the operator's gang reader."""

    attempt: int
    held: str  # the PodScheduled reason of the Pods it speaks for
    words: str
    reason: str | None = None  # its own GangScheduled reason (Kueue: Queued); None: the Pods' stays
    # Its words replace the Pods' (a gate's say only that it is closed), else they go
    # before them (a scheduler's say what it found).
    replaces: bool = False


@dataclass(frozen=True)
class ForceDelete:
    """A Pod stuck terminating that no kubelet will confirm: deleted with grace 0."""

    pod: str
    uid: str | None  # the precondition: only this very Pod
    message: str  # the ForceDeleted Event, posted once the delete went through


@dataclass(frozen=True)
class Observed:
    """Everything one step of the job logic may look at."""

    job: DDPJob | None  # None: the spec does not parse (see errors)
    pods: tuple[PodState, ...]
    previous: Mapping[str, Any]  # the status this step starts from
    now: datetime
    progress: ProgressState | None = None  # Pod 0's progress, when just read (stall.py)
    errors: tuple[str, ...] = ()  # the spec is refused: parse errors, template policy, immutable fields
    generation: int = 0  # metadata.generation (when job is None)
    refused: RefusedCreates | None = None
    # (reason, message) when the gang's Pods must not be created yet: its integration is
    # off or not installed, or its PodGroup is still going away.
    gang_blocked: tuple[str, str] | None = None
    gang_waits: int = 0  # consecutive steps that found the gang blocked
    gang_said: GangSaid | None = None  # of this attempt's held Pods, when read
    since_last_write: float | None = None  # seconds since this writer's last status write
    jitter: float = 0.0  # in [0, 1): spreads the retries of many jobs (drawn by the caller)
    # The Nodes of the job's Pods, by name: the status of their Ready condition ("True",
    # "False", "Unknown", "" without one), None for a Node that is gone (node_loss.py). A
    # Node not named here is taken as healthy (not read, or not seen yet).
    nodes: Mapping[str, str | None] = field(default_factory=dict)
    # Nodes the operator's node-health settings find unhealthy (a condition or a taint), with
    # why: members there are moved off, new Pods avoid them (node_loss.py).
    unhealthy_nodes: Mapping[str, str] = field(default_factory=dict)
    pod_groups: tuple[str, ...] = ()  # the PodGroups this job's attempts made that still exist
    # Names of the current attempt's Pods whose events this operator has seen. A member gone
    # without a mark that is not here went while no operator watched (failure.gone). None:
    # not tracked (`ddpjob run`, a caller with every Pod in view): every gone member was seen.
    seen: frozenset[str] | None = None


@dataclass(frozen=True)
class Plan:
    status: dict[str, Any]
    create: tuple[int, ...] = ()  # node ranks to create, with restart count status["restarts"]
    delete: tuple[str, ...] = ()  # Pod names to delete
    delete_job: bool = False  # ttlSecondsAfterFinished has passed
    requeue_after: float | None = None  # seconds until a timer (backoff, deadline, TTL) is due
    events: tuple[Event, ...] = field(default_factory=tuple)
    # Pods still terminating whose Node is gone or not Ready (its kubelet can no longer
    # confirm); on a Ready Node the kubelet is waited for (creation.force_deletes).
    force_delete: tuple[ForceDelete, ...] = ()
    # Nodes the Pods this plan creates must not land on (node_loss.avoid).
    avoid_nodes: tuple[str, ...] = ()
    delete_pod_groups: tuple[str, ...] = ()  # PodGroups of attempts that ended
    # False when the plan creates: the status that holds is the next step's, which sees
    # the new Pods. A writer that pays per write (the operator) writes that one instead,
    # with this step's events; `ddpjob run` may keep this one.
    write_status: bool = True
    keep_refusal: bool = False  # a refused create is still being retried: keep its backoff
    gang_blocked: bool = False  # waiting on the gang integration (counts gang_waits up)
    check_gang_apis: bool = False  # ask API discovery again whether the PodGroup API is served
    plan_again: bool = False  # the phase changed: take another step now (before any timer)
    # Pods a running elastic job lost (or whose node stopped reporting): the survivors are
    # told at once (survivor_notices.py), so they re-form without waiting to find out.
    tell_lost: tuple[str, ...] = ()

    @property
    def restart_count(self) -> int:
        return int(self.status.get("restarts", 0))
