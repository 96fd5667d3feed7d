"""When the API server says no to a create: what it means, what the user is told, when to retry.

Modelled on Kubernetes' Job controller (pkg/controller/job/job_controller.go manageJob,
pkg/controller/controller_utils.go createPods): a refused create is recorded as a
Warning Event `FailedCreate<Kind>` with the server's own message ("Error creating: pods
"x" is forbidden: exceeded quota: ..."), the rest of the slow-start batch is skipped,
and the job is retried with exponential backoff. Unlike the Job controller, a 422
Invalid on a rendered Pod is permanent here: only a spec change can fix it, so the job
fails with the server's message instead of retrying forever.

A name held by an object this job does not control (no controller ownerReference with
the job's uid) is refused by us, not by the server: it is never adopted, modified or
deleted; the job says which object holds the name and retries with the same backoff.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ddpjob import backoff
from ddpjob.api import names
from ddpjob.job.decision import Refusal
from ddpjob.operator.kube import APIError

__all__ = ["Backoff", "Refusal", "controller_uid", "from_api_error", "not_owned", "transient"]

# Retries of a refused create: 0.5 s, 1 s, 2 s, ... capped at 30 s, so a namespace whose
# quota is raised gets its Pods within ~30 s without anyone touching the job, and a
# refusing namespace sees at most a handful of creates per job in the first 10 s.
BACKOFF_BASE, BACKOFF_CAP = 0.5, 30.0
NAMESPACE_TERMINATING = "NamespaceTerminating"


def transient(exc: APIError) -> bool:
    """A server in trouble (5xx, 429 throttling), not an answer about the object: retried
    by the work queue's quick backoff, without an Event."""
    if "admission webhook" in exc.message:
        # A webhook's denial (kopf webhooks answer 500 by default): an answer, to report.
        return False
    return exc.status >= 500 or exc.status == 429


def from_api_error(kind: str, name: str, exc: APIError) -> Refusal:
    reason = (
        exc.reason
        or ("WebhookDenied" if "admission webhook" in exc.message else None)
        or {403: "Forbidden", 422: "Invalid", 400: "BadRequest"}.get(exc.status, f"HTTP{exc.status}")
    )
    causes = tuple(str(c.get("reason") or "") for c in (exc.details.get("causes") or []) if isinstance(c, Mapping))
    return Refusal(kind, name, reason, exc.message or f"{kind} {name!r}: HTTP {exc.status}", exc.status, causes)


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    """The uid of the DDPJob that controls `obj`, or None."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if (
            ref.get("controller")
            and ref.get("kind") == names.KIND
            and str(ref.get("apiVersion", "")).startswith(names.GROUP + "/")
        ):
            return ref.get("uid")
    return None


def not_owned(kind: str, obj: Mapping[str, Any], job_name: str) -> Refusal:
    """`obj` has a child's name but another controller (or none)."""
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    holder = "no controller"
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            holder = f"controller {ref.get('kind')} {ref.get('name')!s} (uid {ref.get('uid')})"
    message = (
        f"{kind} {name!r} already exists and is not controlled by DDPJob {job_name!r} ({holder}); "
        f"delete it or rename the job"
    )
    return Refusal(kind, name, "NotOwned", message)


@dataclass
class Backoff:
    """One job's refused creates: how many in a row, and when the next try is due."""

    failures: int = 0
    retry_at: datetime | None = None
    last: Refusal | None = None
    fresh: bool = False  # not yet seen by a step of the job logic (which reports it once)

    def refused(self, refusal: Refusal, now: datetime) -> float:
        """Record a refusal; returns the seconds until the next try."""
        self.failures += 1
        self.last, self.fresh = refusal, True
        delay = backoff.Backoff(BACKOFF_BASE, BACKOFF_CAP, jitter=0.1).delay(self.failures)
        self.retry_at = now + timedelta(seconds=delay)
        return delay

    def wait(self, now: datetime) -> float:
        """Seconds until creates may be tried again (0: now)."""
        if self.retry_at is None:
            return 0.0
        return max(0.0, (self.retry_at - now).total_seconds())

    @property
    def active(self) -> bool:
        return self.last is not None

    def take_fresh(self) -> bool:
        fresh, self.fresh = self.fresh, False
        return fresh

    def clear(self) -> None:
        self.failures, self.retry_at, self.last, self.fresh = 0, None, None, False
