"""What one gang-scheduling integration is: a pure description, one module per
integration (`api/gangs/<name>.py`) behind the registry (`api/gangs/__init__.py`), as
Kueue keeps each of its integrations in a folder of its own behind one registry
(pkg/controller/jobs/<integration>/, jobframework.RegisterIntegration).

A description says everything the rest of ddpjob needs to know and nothing it does:
- its name (`spec.scheduling.gang`), what the cluster must serve, whether it has queues;
- the group every Pod of an attempt names, and the PodGroup of ours, if any (rendered
  purely: `render/gang.py`), with how a Pod joins it and its scheduler's setting;
- which waiting Pods it holds, the API paths of its own objects that say why, how to
  read its verdict from them, and how often to read again (`Reads`: the operator's one
  reader, `operator/gang_reader.py`, performs the reads; `job/gang_wait.py` puts the
  verdict in the status).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ddpjob.api import names
from ddpjob.backoff import Backoff

# What was read of an integration's own objects, in the order its `Reads.next` named them.
Objects = tuple[Mapping[str, Any], ...]


class GangScheduling(Protocol):
    """What an integration reads of `spec.scheduling` (api.scheduling.Scheduling)."""

    @property
    def queue(self) -> str | None: ...
    @property
    def priority_class_name(self) -> str | None: ...
    @property
    def schedule_timeout_seconds(self) -> int | None: ...


class GangJob(Protocol):
    """What an integration reads of a job (api.spec.DDPJob)."""

    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def nodes(self) -> int: ...
    @property
    def min_nodes(self) -> int: ...  # every node of a rigid gang, elastic.minNodes otherwise
    @property
    def scheduling(self) -> GangScheduling: ...


@dataclass(frozen=True)
class PodGroupKind:
    """The PodGroup object of ours an integration places the gang with."""

    api_version: str
    kind: str
    plural: str  # for the API client's paths

    @property
    def group_version_path(self) -> str:
        return f"/apis/{self.api_version}"  # what API discovery is asked for


@dataclass(frozen=True)
class SchedulerSetting:
    """The scheduler an integration's Pods name: an operator setting (the chart's value)."""

    env: str  # the environment variable the operator reads it from (operator/settings.py)
    default: str


@dataclass(frozen=True)
class Reads:
    """What the integration says of Pods it holds that the Pods do not carry."""

    held: str  # the PodScheduled reason of a Pod it holds (and whose words it can add to)
    # (namespace, the attempt's group, what was read so far) -> the API path to GET next;
    # None: nothing more to read.
    next: Callable[[str, str, Objects], str | None]
    # What was read -> (its own GangScheduled reason or None, its words), or None while it
    # has nothing to add to the Pods' words.
    verdict: Callable[[Objects], tuple[str | None, str] | None]
    # Read again while the gang stays held: what it says changes without an event the
    # operator sees (it watches none of these objects).
    recheck: Backoff
    # Its words replace the Pods' (a gate's say only that it is closed); else they go first.
    replaces: bool = False


def attempt_group(job: GangJob, attempt: int) -> str:
    """`<job>-attempt-<n>`: a group per gang attempt (every built-in integration's naming)."""
    return names.pod_group_name(job.name, attempt)


@dataclass(frozen=True)
class Integration:
    name: str  # spec.scheduling.gang
    needs: str  # what the cluster must serve, in the operator's messages
    # (pod, job, the attempt's group, the scheduler's name or None): add its fields to a rendered Pod.
    join: Callable[[dict[str, Any], GangJob, str, str | None], None]
    group_name: Callable[[GangJob, int], str] = attempt_group  # (job, attempt) -> the group every Pod names
    pod_group: PodGroupKind | None = None  # None: no object of ours (the Pods' labels are the group)
    # (job, one rendered Pod of the gang) -> the PodGroup's spec; with `pod_group` only.
    pod_group_spec: Callable[[GangJob, dict[str, Any]], dict[str, Any]] | None = None
    # What spec.scheduling.queue names (Volcano's Queue, Kueue's LocalQueue); None: it has no queues.
    queue: str | None = None
    queue_required: bool = False
    scheduler: SchedulerSetting | None = None  # None: the Pods keep the scheduler they have
    reads: Reads | None = None  # None: the Pods' own words say it all
