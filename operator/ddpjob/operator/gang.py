"""Which gang-scheduling integrations this operator serves, and whether their APIs exist.

The chart enables integrations (values `gang.*.enabled`) and grants RBAC for exactly
those PodGroup APIs; it tells the operator through the environment (`settings.py`:
DDPJOB_GANG_INTEGRATIONS, unset: all, for development clusters; the schedulers' names).

At startup the operator asks API discovery for each enabled PodGroup API and logs an
error for each that is missing (the Volcano or scheduler-plugins CRD not installed, or
the GenericWorkload gate off); it keeps running. A DDPJob asking for an integration that
is off or missing gets `GangScheduled=False` with reason `GangIntegrationUnavailable` and
a message saying what to do, and waits (re-checked with backoff): installing the CRD
later is enough.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from ddpjob.api import gangs
from ddpjob.job.scheduling import UNAVAILABLE
from ddpjob.operator import settings as operator_settings
from ddpjob.operator.kube import APIError
from ddpjob.render.gang import DEFAULT_OPTIONS, GangOptions

logger = logging.getLogger("ddpjob.operator.gang")

__all__ = ["UNAVAILABLE", "GangSupport", "api_group_path"]


def api_group_path(gang: str) -> str | None:
    """The discovery path of an integration's PodGroup API (None: no object of ours, as kueue)."""
    integration = gangs.get(gang)
    return integration.pod_group.group_version_path if integration and integration.pod_group else None


@dataclass
class GangSupport:
    # Unset: every integration registered when it is made.
    enabled: frozenset[str] = field(default_factory=lambda: frozenset(gangs.names()))
    options: GangOptions = DEFAULT_OPTIONS
    missing: dict[str, str] = field(default_factory=dict)  # gang -> why its API is not there
    explicit: bool = False  # enabled by the chart (an error when missing), not by default

    @classmethod
    def from_settings(cls, config: operator_settings.Settings) -> GangSupport:
        return cls(enabled=config.gang_integrations, options=config.gang_options, explicit=config.gang_explicit)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> GangSupport:
        """From an environment alone (tests, the dev cluster); SettingsError for a bad value."""
        return cls.from_settings(operator_settings.from_env(environ))

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
                needs = integration.needs if (integration := gangs.get(gang)) else gang
                self.missing[gang] = f"{needs} is not served by this cluster ({path} not found)"
                # Enabled by the chart: an error. Unset (development clusters, every
                # integration on by default): a note.
                logger.log(
                    logging.ERROR if self.explicit else logging.INFO,
                    "gang integration %s is enabled but %s; DDPJobs with spec.scheduling.gang=%s "
                    "will wait with GangScheduled=False until it is installed",
                    gang,
                    self.missing[gang],
                    gang,
                )

    async def check_apis_in_background(self, exists: Callable[[str], Awaitable[bool]]) -> None:
        """check_apis for the startup task nobody awaits: an API server that keeps failing
        (after the client's own retries) is logged here. An exception left in a task is
        logged with its traceback whenever the garbage collector finds it, inside whatever
        code runs then (Python 3.11 parses source to draw the traceback's carets, and that
        nested parse breaks an `ast.parse` it interrupts)."""
        try:
            await self.check_apis(exists)
        except APIError as e:
            logger.warning(
                "could not ask API discovery which gang APIs are served (%s); a DDPJob whose gang "
                "API turns out missing waits with GangScheduled=False and is checked again",
                e,
            )

    def unavailable(self, gang: str) -> str | None:
        """Why a job with this gang cannot be placed now (None: go ahead)."""
        if gang == "none":
            return None
        if gang not in self.enabled:
            return (
                f"spec.scheduling.gang={gang} is not enabled in this operator "
                f"(enable it in the chart: gang.{gang}.enabled=true)"
            )
        if gang in self.missing:
            return f"spec.scheduling.gang={gang}: {self.missing[gang]}"
        return None
