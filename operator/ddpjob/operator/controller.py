"""The operator's reconcile of one DDPJob: observe, decide with `lifecycle.plan`, act through `kube`.

One `Controller` serves every DDPJob. Reconciles are keyed by (namespace, name) and run
through a `WorkQueue` (one at a time per job, triggers coalesced, errors retried with
backoff). Triggers come from kopf handlers (job created/resumed/changed, Pod events) and
from the timers that `Plan.requeue_after` asks for (restart backoff, activeDeadlineSeconds,
TTL).

What is observed comes from kopf's in-memory indices (nothing here lists the API),
corrected by the `Expectations` of this operator's own recent writes.

All decisions (status, what to create or delete, when to wake up) are `lifecycle.plan`'s.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping

from ddpjob import render
from ddpjob.api import spec, template_policy
from ddpjob.job import count_writes, lifecycle, observe, refusals as job_refusals, scheduling
from ddpjob.job.observe import PodState
from ddpjob.operator import refusals
from ddpjob.operator.children import Children, indexed_pod
from ddpjob.operator.expectations import Expectations
from ddpjob.operator.gang import UNAVAILABLE, GangSupport
from ddpjob.operator.kube import Kube, job_path
from ddpjob.operator.metrics import OperatorMetrics
from ddpjob.operator.progress import ProgressPoller, Target
from ddpjob.operator.status_writes import StatusChanged, StatusWriter
from ddpjob.operator.workqueue import WorkQueue

logger = logging.getLogger("ddpjob.operator.controller")

Key = tuple[str, str]
# (uid of the Pod's DDPJob controller owner or None, the Pod as the job logic sees it)
IndexedPod = tuple[str | None, PodState]
EventPoster = Callable[[Mapping[str, Any], str, str, str], None]

# Pod events of one gang arrive together (the gang is scheduled and finishes together):
# one reconcile per burst instead of one per Pod saves status writes (N Pods turning
# Running one by one would otherwise be N status writes). Kubernetes' Job controller
# batches Pod updates the same way (pkg/controller/job: syncJobBatchPeriod, 1 s).
POD_EVENT_DEBOUNCE = 0.2
# Reconciles running at once across all jobs; the rest wait their turn.
DEFAULT_MAX_CONCURRENT = 64


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class _Job:
    """What the controller remembers of one job between reconciles."""
    key: Key
    uid: str | None = None
    status: dict[str, Any] | None = None  # last status written (None: trust the indexed body)
    resource_version: str | None = None  # of the object as `status` was written
    service_attempt: int | None = None  # the gang attempt whose Service was last ensured
    expectations: Expectations = field(default_factory=Expectations)
    backoff: refusals.Backoff = field(default_factory=refusals.Backoff)  # refused creates
    # PodGroups this job controls, by name -> (apiVersion, kind, uid); deleted when their attempt ends.
    pod_groups: dict[str, tuple[str, str, str | None]] = field(default_factory=dict)
    # Pods seen marked for a disruption (preemption, eviction), by name, with their owner's
    # uid: the mark and the deletion often arrive in one burst, and a Pod the API removes
    # at once leaves the index with its mark before any reconcile has looked.
    disrupted: dict[str, IndexedPod] = field(default_factory=dict)
    gang_waits: int = 0  # consecutive reconciles that found the gang's PodGroup unavailable
    status_written_at: float | None = None  # monotonic time of this operator's last status write

    def reset(self, uid: str | None) -> None:
        """A job deleted and recreated under the same name starts from nothing."""
        self.uid, self.status, self.service_attempt = uid, None, None
        self.resource_version = None
        # (disrupted is kept: it may predate the first reconcile, and entries of another uid
        # are dropped when read)
        self.pod_groups, self.gang_waits = {}, 0
        self.expectations.clear()
        self.backoff.clear()


class Controller:
    def __init__(
        self,
        kube: Kube,
        job_body: Callable[[str, str], Mapping[str, Any] | None],
        pods_of: Callable[[str, str], Iterable[IndexedPod]],
        post_event: EventPoster,
        metrics: OperatorMetrics | None = None,
        max_concurrent: int = DEFAULT_MAX_CONCURRENT,
        clock: Callable[[], datetime] = utcnow,
        poller: ProgressPoller | None = None,
        gang: GangSupport | None = None,
        template_allow: frozenset[str] = frozenset(),
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self.kube = kube
        self.gang = gang or GangSupport()
        self.template_allow = template_allow  # what job templates may ask for (template_policy)
        self.job_body = job_body
        self.pods_of = pods_of
        self.post_event = post_event
        self.clock = clock
        self.monotonic = monotonic  # for the batching of count-only status writes
        self.poller = poller  # reads Pod 0's /progress of Running jobs (None: no progress)
        self._jobs: dict[Key, _Job] = {}
        self._phases: dict[Key, str] = {}
        self.metrics = metrics or OperatorMetrics(self.phases)
        self.children = Children(self)
        self.status_writer = StatusWriter(self)
        self.queue = WorkQueue(lambda key: self.reconcile(key), max_concurrent, on_error=self._reconcile_failed,
                               on_done=self.metrics.reconcile_seconds.observe)

    # ---- triggers ---------------------------------------------------------------------

    def phases(self) -> list[str]:
        return list(self._phases.values())

    def trigger(self, namespace: str, name: str, delay: float = 0.0) -> None:
        """Ask for a reconcile of one job, now or after `delay` (coalescing the ones between)."""
        self.queue.trigger((namespace, name), delay)

    def forget(self, namespace: str, name: str) -> None:
        """The DDPJob is gone: drop timers and memory (its children go by owner reference)."""
        self._jobs.pop((namespace, name), None)
        self._phases.pop((namespace, name), None)
        self.queue.forget((namespace, name))
        if self.poller is not None:
            self.poller.unwatch((namespace, name))

    async def close(self) -> None:
        await self.queue.close()
        self._jobs.clear()

    @property
    def busy(self) -> bool:
        return self.queue.busy

    def _job(self, key: Key) -> _Job:
        return self._jobs.get(key) or self._jobs.setdefault(key, _Job(key))

    def _reconcile_failed(self, key: Key, failures: int, delay: float, exc: BaseException) -> None:
        if isinstance(exc, StatusChanged):
            logger.info("%s/%s: %s; planning again in %.1fs", *key, exc, delay)
            return
        self.metrics.reconcile_errors.inc()
        logger.warning("reconcile of %s/%s failed (attempt %d), retrying in %.1fs: %r", *key, failures, delay, exc)

    # ---- one reconcile ------------------------------------------------------------------

    def observe_job(self, job: _Job) -> list[PodState]:
        return self._observe(job, job.uid or "")

    def _observe(self, job: _Job, uid: str) -> list[PodState]:
        """The job's Pods: the index, corrected by what this operator just did."""
        ns, name = job.key
        seen: dict[str, PodState] = {}
        for owner, pod in self.pods_of(ns, name):
            if owner is None:
                continue  # carries the label but no DDPJob controls it: not ours to judge
            if owner != uid:
                # Left by an earlier DDPJob of the same name, awaiting garbage collection:
                # it holds a name this job needs.
                pod = dataclasses.replace(pod, leftover=True)
            seen[pod.name] = pod
        return job.expectations.apply(seen)

    def _observe_pods(self, job: _Job, uid: str, previous: Mapping[str, Any]) -> list[PodState]:
        """The Pods, plus a disrupted member of the running gang that vanished with its mark
        (the job logic must learn it was a preemption, not a deletion by hand)."""
        pods = self._observe(job, uid)
        seen = {p.name for p in pods}
        attempt = int(previous.get("restarts", 0))
        running = previous.get("phase") == lifecycle.RUNNING
        job.disrupted = {n: (owner, p) for n, (owner, p) in job.disrupted.items()
                         if owner == uid and p.restart_count == attempt and (n in seen or running)}
        return pods + [dataclasses.replace(p, deleting=True) for n, (_, p) in job.disrupted.items() if n not in seen]

    def pod_changed(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        """Every event of a job's Pod: remember one marked for a disruption."""
        if not observe.is_disrupted(body.get("status") or {}):
            return  # nearly every event: no second pod_state (the index made one)
        item = indexed_pod(body)
        if item is not None and item[1].disruption:
            self._job((namespace, name)).disrupted[item[1].name] = item

    async def reconcile(self, key: Key) -> float | None:
        """One pass; returns when to look again (seconds) or None to wait for events."""
        ns, name = key
        job = self._job(key)
        body = self.job_body(ns, name)
        if body is None:
            self.forget(ns, name)
            return None
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if job.uid != uid:
            job.reset(uid)
        previous = job.status if job.status is not None else dict(body.get("status") or {})
        self._phases[job.key] = previous.get("phase") or lifecycle.PENDING
        generation = int(meta.get("generation") or 0)

        try:
            parsed = spec.parse_job(body)
            pod = render.render_pod(parsed, 0)  # the policy reads the whole Pod the job would get
            errors = [str(e) for e in spec.immutable_changes(previous.get("immutableSpec"), parsed)
                      + template_policy.check(parsed, pod, self.template_allow)] or None
        except spec.InvalidSpec as exc:
            parsed, errors = None, [str(e) for e in exc.errors]
        if errors is not None:
            return await self._invalid(job, body, previous, errors, generation, uid)

        now = self.clock()
        initial_phase = previous.get("phase")
        events: list[lifecycle.Event] = []
        progress = self.poller.take(key) if self.poller is not None else None
        plan = lifecycle.plan(parsed, self._observe_pods(job, uid, previous), previous, now, progress)
        refused: refusals.Refusal | None = None
        retry_in = 0.0
        if plan.create and not (plan.delete or plan.delete_job):
            blocked = await self.children.ensure_pod_group(job, parsed, plan.restart_count)
            if blocked:
                return await self._wait_for_gang(job, body, previous, plan, blocked)
            job.gang_waits = 0
            retry_in = job.backoff.wait(now)
            if retry_in > 0:
                refused = job.backoff.last  # still backing off after a refused create
            else:
                # Re-plan once with what was just created, so the status written is the one
                # that holds once the Pods are seen (saves a status write per job). A create
                # the re-plan still wants is left to the next pass.
                refused = await self.children.create_pods(job, parsed, body, plan)
                if refused is not None:
                    retry_in = job.backoff.refused(refused, now)
                    if not refused.silent:
                        self.post_event(body, "Warning", refused.event_reason, refused.event_message)
                events += plan.events
                plan = lifecycle.plan(parsed, self._observe_pods(job, uid, previous), previous, now)
        elif not plan.create:
            job.backoff.clear()
        if refused is not None and refused.permanent:
            return await self._refused_for_good(job, body, previous, refused, generation)
        now_s = lifecycle.format_time(now)
        if refused is not None and plan.create:
            plan = dataclasses.replace(
                plan, requeue_after=min(retry_in, plan.requeue_after if plan.requeue_after is not None else retry_in),
                status=job_refusals.refused_status(plan.status, refused.reason, refused.message,
                                                   parsed.nodes - len(plan.create), parsed.nodes, now_s))
        else:
            job.backoff.clear()
            plan = dataclasses.replace(plan, status=job_refusals.created_status(plan.status, now_s))
        events += [e for e in plan.events if e not in events]
        if plan.stuck:
            await self.children.force_delete_lost(job, body, plan.stuck)
        if plan.delete or plan.delete_job:
            # Status first: if this write fails, nothing is deleted and the restart
            # count cannot be lost between the deletes and the write.
            previous = await self._write_status(job, body, previous, plan.status)
            await self.children.delete_pods(job, ns, plan.delete)
            if plan.delete_job:
                if await self.kube.delete(job_path(ns, name), uid=uid):
                    logger.info("deleted %s/%s: ttlSecondsAfterFinished passed", ns, name)
                self._post(body, events, plan.status)
                self.forget(ns, name)
                return None
        held = count_writes.wait(previous, plan.status, parsed.nodes, job.status_written_at, self.monotonic())
        if held:  # only counts moved, and the last write was just now: batch them
            plan = dataclasses.replace(plan, status=previous, requeue_after=held if plan.requeue_after is None
                                       else min(held, plan.requeue_after))
        await self._write_status(job, body, previous, plan.status)
        await self.children.delete_pod_groups(job, ns, plan.status)
        self._post(body, events, plan.status)
        self._watch_progress(job, parsed, plan)
        if refused is not None and plan.create:
            return plan.requeue_after  # the backoff (or an earlier timer such as the deadline)
        if plan.create or plan.status.get("phase") != initial_phase:
            # The plan is a function of the previous status: after a phase change, plan
            # again until nothing changes (a job that just finished learns its TTL timer).
            # Also a create the re-plan still wants is done in a fresh pass.
            return 0.0
        return plan.requeue_after

    def _watch_progress(self, job: _Job, parsed: spec.DDPJob, plan: lifecycle.Plan) -> None:
        if self.poller is None:
            return
        if plan.status.get("phase") != lifecycle.RUNNING:
            self.poller.unwatch(job.key)
            return
        ips = {p.node_rank: p.ip for p in self._observe(job, job.uid or "")
               if p.restart_count == plan.restart_count and not p.leftover}
        self.poller.watch(job.key, Target(plan.restart_count, tuple(ips.get(r) for r in range(parsed.nodes)),
                                          parsed.stall_timeout_seconds))

    # ---- acts ---------------------------------------------------------------------------

    async def _write_status(self, job: _Job, body: Mapping[str, Any], previous: dict[str, Any],
                            new: dict[str, Any]) -> dict[str, Any]:
        stored = await self.status_writer.write(job, body, previous, new)
        if stored is not previous:
            self._phases[job.key] = stored.get("phase") or lifecycle.PENDING
            if int(new.get("restarts", 0)) > int(previous.get("restarts", 0)):
                self.metrics.gang_restarts.inc(int(new.get("restarts", 0)) - int(previous.get("restarts", 0)))
        return stored

    async def _wait_for_gang(self, job: _Job, body: Mapping[str, Any], previous: dict[str, Any],
                             plan: lifecycle.Plan, blocked: tuple[str, str]) -> float:
        """No Pods yet: say why in the status (and once as an Event), look again with backoff."""
        reason, message = blocked
        status = scheduling.blocked(plan.status, reason, message, lifecycle.format_time(self.clock()))
        if (previous.get("message") != status["message"]):
            self.post_event(body, "Warning", reason, message)
        await self._write_status(job, body, previous, status)
        job.gang_waits += 1
        if reason == UNAVAILABLE and job.gang_waits % 4 == 1:
            await self.gang.check_apis(self.kube.served)
        return float(min(2 ** job.gang_waits, 300))

    async def _refused_for_good(self, job: _Job, body: Mapping[str, Any], previous: dict[str, Any],
                                refused: refusals.Refusal, generation: int) -> float:
        """The API server finds a rendered object invalid: no retry can help, the job fails
        with the server's message (its live Pods are stopped by the next pass)."""
        message = f"the API server refused {refused.kind} {refused.name!r}: {refused.message}"
        new = job_refusals.failed_status(previous, refused.reason, message, generation,
                                         lifecycle.format_time(self.clock()))
        await self._write_status(job, body, previous, new)
        self.post_event(body, "Warning", "Failed", message)
        job.backoff.clear()
        return 0.0

    async def _invalid(self, job: _Job, body: Mapping[str, Any], previous: dict[str, Any],
                       errors: list[str], generation: int, uid: str) -> None:
        """An invalid spec: Failed/InvalidSpec, a Warning, nothing created (and nothing left running)."""
        if previous.get("phase") == lifecycle.SUCCEEDED:
            return None  # a finished success is not rewritten by a later bad edit
        new = lifecycle.invalid_status(errors, generation, previous, self.clock())
        if new.get("message") == previous.get("message") and previous.get("phase") == lifecycle.FAILED:
            new = previous  # already reported: keep the stored conditions' times
        live = [p.name for p in self._observe(job, uid)
                if p.phase in ("Pending", "Running", "Unknown") and not p.deleting and not p.leftover]
        changed = new != previous
        await self._write_status(job, body, previous, new)
        await self.children.delete_pods(job, job.key[0], live)
        if changed:
            self.post_event(body, "Warning", "InvalidSpec", new["message"])
        return None

    def _post(self, body: Mapping[str, Any], events: Iterable[lifecycle.Event], status: Mapping[str, Any]) -> None:
        failure = status.get("lastFailure") or {}
        for event in events:
            message = event.message
            if event.reason in ("Restarting", "Failed") and failure.get("pod"):
                # The failed Pod and its exit code, always, even when the Pod's own
                # message (an eviction notice, say) replaced the default wording.
                code = failure.get("exitCode", "none")
                if failure["pod"] not in message or f"exit code {code}" not in message:
                    message = f"{message} (pod {failure['pod']}, exit code {code})"
            self.post_event(body, event.type, event.reason, message)
