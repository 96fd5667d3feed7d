"""What the controller does to one job's children, as the plan says: the attempt's
PodGroup, its Service and Pods, their deletion, the PodGroups of ended attempts, and
force deletion of Pods stuck on a lost node. Nothing here decides which.

Creates are idempotent and never adopt: an object of a child's name that this job does not
control is reported as a refusal, not touched. Pods go out in slow-start batches (1, 2, 4,
...), as the Job controller creates them, so a namespace that refuses Pods sees one refused
create per try; the first refusal is returned for the controller to report and back off.
Every create and delete is recorded in the job's expectations until the watch shows it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ddpjob import render, text
from ddpjob.api import spec
from ddpjob.job import lifecycle
from ddpjob.job.decision import ForceDelete
from ddpjob.job.observe import PodState, pod_state
from ddpjob.operator import refusals
from ddpjob.operator.api_paths import object_path, pods_path
from ddpjob.operator.gang import UNAVAILABLE, GangSupport
from ddpjob.operator.kube import APIError, Conflict, Kube, NotFound
from ddpjob.operator.metrics import OperatorMetrics
from ddpjob.operator.observer import JobMemory, owner_uid
from ddpjob.render import placement

EventPoster = Callable[[Mapping[str, Any], str, str, str], None]


def indexed_pod(body: Mapping[str, Any]) -> tuple[str | None, PodState] | None:
    """What the pods index keeps per Pod: its DDPJob owner's uid and its PodState."""
    state = pod_state(body)
    if state is None:
        return None
    return owner_uid(body.get("metadata") or {}), state


class Children:
    """Acts on one job's children with the API, gang settings, metrics and Event poster it
    is given (the controller hands its own in, and again when one is replaced)."""

    def __init__(
        self,
        kube: Kube,
        gang: GangSupport,
        metrics: OperatorMetrics,
        post_event: EventPoster,
        notice_token: Callable[[str, str, str], str] | None = None,
    ):
        self.kube, self.gang, self.metrics, self.post_event = kube, gang, metrics, post_event
        self.notice_token = notice_token  # (namespace, name, uid) -> the token an elastic job's Pods get

    async def ensure_pod_group(self, job: JobMemory, parsed: spec.DDPJob, attempt: int) -> tuple[str, str] | None:
        """Create the attempt's PodGroup before its Pods (create-if-absent). Returns
        (reason, message) when the Pods must not be created yet."""
        gang = parsed.scheduling.gang
        group = render.render_pod_group(parsed, attempt)
        if group is None:
            return None
        name = group["metadata"]["name"]
        try:
            obj, _ = await self.kube.create(group)
        except NotFound:
            # The API went away after startup (a CRD deleted): report it, re-check later.
            self.gang.missing[gang] = f"{group['apiVersion']} PodGroup is not served by this cluster"
            return UNAVAILABLE, f"spec.scheduling.gang={gang}: {self.gang.missing[gang]}"
        meta = (obj or {}).get("metadata") or {}
        if obj is not None and refusals.controller_uid(obj) != job.uid:
            # A PodGroup of this name that another (or no) controller holds: never adopted,
            # never deleted; the gang waits and says why, as for a Pod or Service.
            return "NotOwned", refusals.not_owned("PodGroup", obj, job.key[1]).message
        job.pod_groups[name] = (group["apiVersion"], group["kind"], meta.get("uid"))
        if meta.get("deletionTimestamp"):
            # The same attempt's PodGroup (suspend, then resume) still waits on its
            # protection finalizer for the old Pods to end: Pods made now would point at
            # an object about to vanish and never be placed.
            return "PodGroupTerminating", f"waiting for PodGroup {name} of the previous run to be deleted"
        return None

    async def delete_pod_groups(self, job: JobMemory, ns: str, pod_groups: Iterable[str]) -> None:
        """Delete the PodGroups the plan names (of attempts that ended), each with its uid
        as the precondition."""
        for name in [n for n in pod_groups if n in job.pod_groups]:
            api_version, kind, uid = job.pod_groups[name]
            with contextlib.suppress(Conflict):
                await self.kube.delete(object_path(api_version, kind, ns, name), uid=uid)
            job.pod_groups.pop(name, None)

    async def delete_pods(
        self, job: JobMemory, ns: str, pod_names: Iterable[str], observed: Iterable[PodState]
    ) -> None:
        """Delete Pods (`observed`: the job's Pods as this pass saw them), each with the uid
        it was seen with as a precondition: a Pod made again under that name since (by this
        job's next pass, or by anyone) is not the one the plan meant, and is left alone.
        Every delete carries one: a Pod the pass saw without a uid (just created, not yet
        watched) is read first and deleted only if this job controls it."""
        pod_names = list(pod_names)
        if not pod_names:
            return
        observed = list(observed)
        restart_counts = {p.name: p.restart_count for p in observed}
        uids = {p.name: p.uid for p in observed}
        results = await asyncio.gather(
            *(self._delete_pod(job, ns, n, uids.get(n)) for n in pod_names), return_exceptions=True
        )
        for pod_name, result in zip(pod_names, results, strict=True):
            if not isinstance(result, BaseException):
                job.expectations.deleted(pod_name, restart_counts.get(pod_name))
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _delete_pod(self, job: JobMemory, ns: str, name: str, uid: str | None) -> bool:
        if not uid:
            try:
                pod = await self.kube.get(pods_path(ns, name))
            except NotFound:
                return False
            if not job.uid or refusals.controller_uid(pod) != job.uid:
                return False  # not this job's: never deleted by name alone
            uid = (pod.get("metadata") or {}).get("uid")
            if not uid:
                return False
        return await self.kube.delete(pods_path(ns, name), uid=uid)

    async def create_pods(
        self, job: JobMemory, parsed: spec.DDPJob, body: Mapping[str, Any], plan: lifecycle.Plan
    ) -> refusals.Refusal | None:
        """Create the Service and the Pods the plan asks for; the first refusal stops it
        (and is returned). Errors other than the API server's answer are raised."""
        uid = job.uid or ""
        if job.service_attempt != plan.restart_count:
            # Once per gang attempt (create-if-absent): a new rendezvous needs the DNS
            # names, and a Service someone deleted comes back with the next attempt.
            service = render.render_service(parsed)
            try:
                obj, _ = await self.kube.create(service)
            except APIError as exc:
                if refusals.transient(exc):
                    raise  # a server in trouble, not a refusal: the work queue retries soon
                return refusals.from_api_error("Service", service["metadata"]["name"], exc)
            if obj is not None and refusals.controller_uid(obj) != uid:
                return refusals.not_owned("Service", obj, parsed.name)
            job.service_attempt = plan.restart_count
        ranks = list(plan.create)
        # Slow start, like the Job controller: batches of 1, 2, 4, ... Pods at once, so a
        # namespace that refuses Pods (quota, policy) sees one refused create per try,
        # not one per gang member, and a gang of 1,000 still starts in ~10 round trips.
        # Each batch is rendered when it goes out: the first Pod is not held up by
        # rendering the whole gang.
        created, batch, refused = 0, 1, None
        errors: list[BaseException] = []
        while ranks and refused is None and not errors:
            chunk = [
                placement.avoiding(
                    render.render_pod(parsed, r, plan.restart_count, self.gang.options), plan.avoid_nodes
                )
                for r in ranks[:batch]
            ]
            if self.notice_token is not None and parsed.elastic is not None:
                token = self.notice_token(parsed.namespace, parsed.name, uid)
                chunk = [render.with_notice_token(p, parsed, token) for p in chunk]
            ranks = ranks[batch:]
            batch *= 2
            results = await asyncio.gather(*(self.kube.create(p) for p in chunk), return_exceptions=True)
            for rendered, result in zip(chunk, results, strict=True):
                if isinstance(result, APIError) and not refusals.transient(result):
                    refused = refused or refusals.from_api_error("Pod", rendered["metadata"]["name"], result)
                    continue
                if isinstance(result, BaseException):
                    errors.append(result)
                    continue
                obj, fresh = result
                if obj is not None and not fresh and refusals.controller_uid(obj) != uid:
                    # A Pod of that name that this job does not control: never adopted.
                    refused = refused or refusals.not_owned("Pod", obj, parsed.name)
                    continue
                created += fresh
                seen = indexed_pod(obj or rendered)
                if seen is not None:
                    job.expectations.created(seen[1])
        if created:
            self.metrics.pods_created.inc(created)
            self.post_event(
                body,
                "Normal",
                "Created",
                f"created {text.plural(created, 'Pod')} of attempt {plan.restart_count} "
                f"({text.plural(parsed.nodes, 'node')} x {text.plural(parsed.nproc_per_node, 'process')})",
            )
        if refused is None and errors:
            raise errors[0]  # retried by the worker; what was created is remembered
        return refused

    async def force_delete(self, job: JobMemory, body: Mapping[str, Any], pods: Iterable[ForceDelete]) -> None:
        """Force-delete (grace 0, its uid as the precondition) each Pod the plan found stuck
        on a lost Node; its Event once the delete went through."""
        for pod in pods:
            if await self.kube.delete(pods_path(job.key[0], pod.pod), uid=pod.uid, grace_period=0):
                self.post_event(body, "Warning", "ForceDeleted", pod.message)
