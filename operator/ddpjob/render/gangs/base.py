"""What one gang-scheduling integration is: its PodGroup (if any), and how a Pod joins it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ddpjob.api.spec import DDPJob


@dataclass(frozen=True)
class GangOptions:
    """Cluster-side settings (the operator's chart values), not the job's."""
    volcano_scheduler: str = "volcano"
    coscheduling_scheduler: str = "scheduler-plugins-scheduler"


DEFAULT_OPTIONS = GangOptions()


@dataclass(frozen=True)
class Integration:
    name: str  # spec.scheduling.gang
    # The PodGroup's (apiVersion, kind) and its plural; None: the integration has no object of ours.
    pod_group: tuple[str, str] | None
    plural: str | None
    needs: str  # what the cluster must serve, in the operator's messages
    group_name: Callable[[DDPJob, int], str]  # (job, attempt) -> the group every Pod names
    # (job, one rendered Pod of the gang) -> the PodGroup's spec; None without a PodGroup.
    pod_group_spec: Callable[[DDPJob, dict], dict[str, Any]] | None
    join: Callable[[dict, DDPJob, str, GangOptions], None]  # (pod, job, group, options): add its fields
