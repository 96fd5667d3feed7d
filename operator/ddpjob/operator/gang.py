"""Which gang-scheduling integrations this operator serves, and whether their APIs exist.

The chart enables integrations (values `gang.*.enabled`) and grants RBAC for exactly
those PodGroup APIs; it tells the operator through the environment:

    DDPJOB_GANG_INTEGRATIONS=kubernetes,volcano   enabled integrations (unset: all, for
                                                 development clusters; empty: none)
    DDPJOB_COSCHEDULING_SCHEDULER=<name>          scheduler-plugins' scheduler name
    DDPJOB_VOLCANO_SCHEDULER=<name>               Volcano's scheduler name

At startup the operator asks API discovery for each enabled PodGroup API and logs an
error for each that is missing (the Volcano or scheduler-plugins CRD not installed, or
the GenericWorkload gate off); it keeps running. A DDPJob asking for an integration that
is off or missing gets `GangScheduled=False` with reason `GangIntegrationUnavailable` and
a message saying what to do, and waits (re-checked with backoff): installing the CRD
later is enough.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Mapping

from ddpjob.api.scheduling import GANGS
from ddpjob.job.scheduling import UNAVAILABLE
from ddpjob.render import gang as render_gang

logger = logging.getLogger("ddpjob.operator.gang")

ENV_INTEGRATIONS = "DDPJOB_GANG_INTEGRATIONS"
ENV_COSCHEDULING_SCHEDULER = "DDPJOB_COSCHEDULING_SCHEDULER"
ENV_VOLCANO_SCHEDULER = "DDPJOB_VOLCANO_SCHEDULER"
INTEGRATIONS = tuple(g for g in GANGS if g != "none")
__all__ = ["UNAVAILABLE", "GangSupport", "INTEGRATIONS", "api_group_path"]

_WHAT = {
    "kubernetes": "the scheduling.k8s.io/v1beta1 PodGroup API (Kubernetes 1.37 with the GenericWorkload "
                  "feature gate and the scheduling.k8s.io/v1beta1 API turned on)",
    "volcano": "Volcano's scheduling.volcano.sh/v1beta1 PodGroup CRD (install Volcano)",
    "coscheduling": "scheduler-plugins' scheduling.x-k8s.io/v1alpha1 PodGroup CRD (install scheduler-plugins)",
}


def api_group_path(gang: str) -> str | None:
    """The discovery path of an integration's PodGroup API (None: kueue has no object of ours)."""
    kind = render_gang.POD_GROUP_KINDS.get(gang)
    return f"/apis/{kind[0]}" if kind else None


@dataclass
class GangSupport:
    enabled: frozenset[str] = frozenset(INTEGRATIONS)
    options: render_gang.GangOptions = render_gang.DEFAULT_OPTIONS
    missing: dict[str, str] = field(default_factory=dict)  # gang -> why its API is not there
    explicit: bool = False  # enabled by the chart (an error when missing), not by default

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> "GangSupport":
        raw = environ.get(ENV_INTEGRATIONS)
        enabled = frozenset(INTEGRATIONS) if raw is None else frozenset(
            g.strip() for g in raw.split(",") if g.strip())
        unknown = sorted(enabled - set(INTEGRATIONS))
        if unknown:
            logger.error("%s names unknown gang integration(s) %s; known: %s",
                         ENV_INTEGRATIONS, ", ".join(unknown), ", ".join(INTEGRATIONS))
        defaults = render_gang.DEFAULT_OPTIONS
        options = render_gang.GangOptions(
            volcano_scheduler=environ.get(ENV_VOLCANO_SCHEDULER) or defaults.volcano_scheduler,
            coscheduling_scheduler=environ.get(ENV_COSCHEDULING_SCHEDULER) or defaults.coscheduling_scheduler)
        return cls(enabled=enabled & set(INTEGRATIONS), options=options, explicit=raw is not None)

    async def check_apis(self, exists: Callable[[str], Awaitable[bool]]) -> None:
        """Ask discovery for each enabled integration's API; log clearly what is missing."""
        for gang in sorted(self.enabled):
            path = api_group_path(gang)
            if path is None:
                continue
            if await exists(path):
                self.missing.pop(gang, None)
                logger.info("gang integration %s: %s is served", gang, path)
            else:
                self.missing[gang] = f"{_WHAT[gang]} is not served by this cluster ({path} not found)"
                # Enabled by the chart: an error. Unset (development clusters, every
                # integration on by default): a note.
                logger.log(logging.ERROR if self.explicit else logging.INFO,
                           "gang integration %s is enabled but %s; DDPJobs with spec.scheduling.gang=%s "
                           "will wait with GangScheduled=False until it is installed", gang, self.missing[gang], gang)

    def unavailable(self, gang: str) -> str | None:
        """Why a job with this gang cannot be placed now (None: go ahead)."""
        if gang == "none":
            return None
        if gang not in self.enabled:
            return (f"spec.scheduling.gang={gang} is not enabled in this operator "
                    f"(enable it in the chart: gang.{gang}.enabled=true)")
        if gang in self.missing:
            return f"spec.scheduling.gang={gang}: {self.missing[gang]}"
        return None
