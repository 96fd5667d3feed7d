"""What the Python client says of a job: a typed, read-only view of a DDPJob object.

`Job.from_object` reads the object the API server returned (its `spec`, and the `status`
the operator writes: docs/reference.md lists every field); the object itself stays in
`Job.raw` for anything not lifted out here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ddpjob.client.status_names import TERMINAL, as_trainer
from ddpjob.cluster.jobs import phase_of


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class Progress:
    """`status.progress`: the training program's own record, read from Pod 0 by the
    operator about every 30 s (`kubectl get ddpj`'s PROGRESS and ETA)."""

    step: int | None = None
    total_steps: int | None = None
    epoch: int | None = None
    total_epochs: int | None = None
    loss: float | None = None
    samples_per_second: float | None = None
    eta_seconds: float | None = None
    summary: str | None = None  # the PROGRESS column's words
    final: bool = False  # the job stopped; this is its last record

    @classmethod
    def from_status(cls, progress: Mapping[str, Any]) -> Progress:
        return cls(
            step=_int(progress.get("step")),
            total_steps=_int(progress.get("totalSteps")),
            epoch=_int(progress.get("epoch")),
            total_epochs=_int(progress.get("totalEpochs")),
            loss=_float(progress.get("loss")),
            samples_per_second=_float(progress.get("samplesPerSecond")),
            eta_seconds=_float(progress.get("etaSeconds")),
            summary=_str(progress.get("summary")),
            final=progress.get("final") is True,
        )


@dataclass(frozen=True)
class Failure:
    """`status.lastFailure`: the Pod whose failure ended the last attempt, and why."""

    pod: str | None
    node_rank: int | None
    exit_code: int | None
    reason: str | None
    message: str | None
    retryable: bool | None
    error_line: str | None  # the first error line of the container's log

    @classmethod
    def from_status(cls, failure: Mapping[str, Any]) -> Failure:
        retryable = failure.get("retryable")
        return cls(
            pod=_str(failure.get("pod")),
            node_rank=_int(failure.get("nodeRank")),
            exit_code=_int(failure.get("exitCode")),
            reason=_str(failure.get("reason")),
            message=_str(failure.get("message")),
            retryable=retryable if isinstance(retryable, bool) else None,
            error_line=_str(failure.get("errorLine")),
        )


@dataclass(frozen=True)
class Job:
    """A DDPJob as the cluster has it now. `phase` is `Pending` until the operator has
    written a status, then `Running`, `Restarting`, `Succeeded`, `Failed` or `Suspended`."""

    name: str
    namespace: str
    phase: str
    message: str
    nodes: int
    nproc_per_node: int | None  # what `auto` resolved to (None before the operator read it)
    world_size: int | None
    ready_nodes: int
    restarts: int
    creation_timestamp: str | None
    completion_time: str | None
    progress: Progress | None
    last_failure: Failure | None
    conditions: tuple[Mapping[str, Any], ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def finished(self) -> bool:
        return self.phase in TERMINAL

    @property
    def status(self) -> str:
        """The phase as Kubeflow Trainer's TrainJob says it: `Complete` for `Succeeded`,
        `Created` for `Pending`; the others as they are."""
        return as_trainer(self.phase)

    @property
    def num_nodes(self) -> int:
        """`nodes`, as TrainJob names it."""
        return self.nodes

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Job:
        meta, spec, status = (_mapping(obj.get(k)) for k in ("metadata", "spec", "status"))
        progress, failure = _mapping(status.get("progress")), _mapping(status.get("lastFailure"))
        conditions = status.get("conditions")
        return cls(
            name=str(meta.get("name", "")),
            namespace=str(meta.get("namespace", "")),
            phase=phase_of(dict(obj)),
            message=_str(status.get("message")) or "",
            nodes=_int(spec.get("nodes")) or 1,
            nproc_per_node=_int(status.get("nprocPerNode")),
            world_size=_int(status.get("worldSize")),
            ready_nodes=_int(status.get("readyNodes")) or 0,
            restarts=_int(status.get("restarts")) or 0,
            creation_timestamp=_str(meta.get("creationTimestamp")),
            completion_time=_str(status.get("completionTime")),
            progress=Progress.from_status(progress) if progress else None,
            last_failure=Failure.from_status(failure) if failure else None,
            conditions=tuple(c for c in conditions if isinstance(c, Mapping)) if isinstance(conditions, list) else (),
            raw=obj,
        )

    def describe(self) -> str:
        """One line: `name: Phase (restarts N): step 120/600 ...: message`."""
        words = [f"{self.name}: {self.phase}"]
        if self.restarts:
            words[0] += f" (restarts {self.restarts})"
        if self.progress is not None and self.progress.summary and not self.finished:
            words.append(self.progress.summary)
        if self.message:
            words.append(self.message)
        return ": ".join(words)
