"""The operator's reconcile loop: observe, decide with `lifecycle.plan`, act through `kube`.

One `Controller` serves every DDPJob. Reconciles are keyed by (namespace, name) and run
one at a time per job (a dirty flag coalesces the triggers that arrive meanwhile), so
two reconciles of a job never race to create the same Pods. Triggers come from kopf
handlers (job created/resumed/changed, Pod events) and from per-job timers that
`Plan.requeue_after` asks for (restart backoff, activeDeadlineSeconds, TTL). A reconcile
that fails is retried on the same timer with exponential backoff.

What is observed comes from kopf's in-memory indices (nothing here lists the API). The
indices trail the operator's own writes by one watch event, so the controller keeps
short-lived *expectations* (what it just created or deleted, like client-go's
ControllerExpectations): without them a reconcile that runs before the watch catches
up would create the same Pods again (harmless 409s, but API writes).

All decisions (status, what to create or delete, when to wake up) are `lifecycle.plan`'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping

from ddpjob import render
from ddpjob.api import names, spec
from ddpjob.job import lifecycle
from ddpjob.operator.kube import Kube, job_path, pods_path
from ddpjob.operator.metrics import OperatorMetrics
from ddpjob.job.observe import PodState, pod_state

logger = logging.getLogger("ddpjob.operator.controller")

Key = tuple[str, str]
# (uid of the Pod's DDPJob controller owner or None, the Pod as the job logic sees it)
IndexedPod = tuple[str | None, PodState]
EventPoster = Callable[[Mapping[str, Any], str, str, str], None]

# How long an expectation outlives silence from the watch (the API server or the watch
# lost the event): afterwards the index is trusted again.
EXPECTATION_TTL = 30.0
# Pod events of one gang arrive together (the gang is scheduled and finishes together):
# one reconcile per burst instead of one per Pod saves status writes (N Pods turning
# Running one by one would otherwise be N status writes). Kubernetes' Job controller
# batches Pod updates the same way (its podUpdateBatchPeriod, 1 s).
POD_EVENT_DEBOUNCE = 0.2
# Reconcile retry backoff after an error: 0.2 s, 0.4 s, ... up to a minute.
RETRY_BASE, RETRY_CAP = 0.2, 60.0
# A timer fires at most this late after a due time (datetime rounding to seconds).
TIMER_SLACK = 0.01
# Reconciles running at once across all jobs; the rest wait their turn.
DEFAULT_MAX_CONCURRENT = 64


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def indexed_pod(body: Mapping[str, Any]) -> IndexedPod | None:
    """What the pods index keeps per Pod: its DDPJob owner's uid and its PodState."""
    state = pod_state(body)
    if state is None:
        return None
    owner = None
    for ref in (body.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == names.KIND and ref.get("apiVersion", "").startswith(names.GROUP + "/"):
            owner = ref.get("uid")
    return owner, state


def status_patch(previous: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch that turns `previous` into `new`: keys the plan dropped become null."""
    patch = dict(new)
    for key in previous:
        if key not in new:
            patch[key] = None
    return patch


@dataclass
class _Job:
    key: Key
    uid: str | None = None
    status: dict[str, Any] | None = None  # last status written (None: trust the indexed body)
    service_attempt: int | None = None  # the gang attempt whose Service was last ensured
    created: dict[str, tuple[PodState, float]] = field(default_factory=dict)
    deleted: dict[str, tuple[int, float]] = field(default_factory=dict)
    dirty: bool = False
    task: asyncio.Task | None = None
    timer: asyncio.TimerHandle | None = None
    debounce: asyncio.TimerHandle | None = None
    failures: int = 0
    rejected: tuple[int, list[str]] | None = None  # (generation, errors) of a refused spec update

    def reset(self, uid: str | None) -> None:
        """A job deleted and recreated under the same name starts from nothing."""
        self.uid, self.status, self.service_attempt, self.rejected = uid, None, None, None
        self.created.clear()
        self.deleted.clear()


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
    ):
        self.kube = kube
        self.job_body = job_body
        self.pods_of = pods_of
        self.post_event = post_event
        self.clock = clock
        self._jobs: dict[Key, _Job] = {}
        self._phases: dict[Key, str] = {}
        self.metrics = metrics or OperatorMetrics(self.phases)
        self._slots = asyncio.Semaphore(max_concurrent)
        self._closed = False

    # ---- triggers ---------------------------------------------------------------------

    def phases(self) -> list[str]:
        return list(self._phases.values())

    def trigger(self, namespace: str, name: str, delay: float = 0.0) -> None:
        """Ask for a reconcile of one job, now or after `delay` (coalescing the ones between)."""
        if self._closed:
            return
        job = self._jobs.get((namespace, name)) or self._jobs.setdefault((namespace, name), _Job((namespace, name)))
        if delay <= 0:
            self._kick(job.key)
        elif job.debounce is None:
            job.debounce = asyncio.get_running_loop().call_later(delay, self._kick, job.key)

    def reject_update(self, namespace: str, name: str, generation: int, errors: list[str]) -> None:
        """A spec update the job logic refuses (an immutable field changed): fail the job."""
        job = self._jobs.setdefault((namespace, name), _Job((namespace, name)))
        job.rejected = (generation, list(errors))
        self.trigger(namespace, name)

    def forget(self, namespace: str, name: str) -> None:
        """The DDPJob is gone: drop timers and memory (its children go by owner reference)."""
        job = self._jobs.pop((namespace, name), None)
        self._phases.pop((namespace, name), None)
        if job is not None:
            for handle in (job.timer, job.debounce):
                if handle is not None:
                    handle.cancel()

    async def close(self) -> None:
        self._closed = True
        tasks = [job.task for job in self._jobs.values() if job.task is not None]
        for key in list(self._jobs):
            self.forget(*key)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def busy(self) -> bool:
        return any(job.task is not None or job.dirty for job in self._jobs.values())

    def _kick(self, key: Key) -> None:
        job = self._jobs.get(key)
        if job is None or self._closed:
            return
        if job.debounce is not None:
            job.debounce.cancel()
            job.debounce = None
        job.dirty = True
        if job.task is None:
            job.task = asyncio.get_running_loop().create_task(self._worker(job), name=f"reconcile {key[0]}/{key[1]}")

    def _schedule(self, job: _Job, delay: float | None) -> None:
        if job.timer is not None:
            job.timer.cancel()
            job.timer = None
        if delay is not None and not self._closed and self._jobs.get(job.key) is job:
            job.timer = asyncio.get_running_loop().call_later(max(delay, 0.0) + TIMER_SLACK, self._kick, job.key)

    async def _worker(self, job: _Job) -> None:
        try:
            while job.dirty and not self._closed:
                job.dirty = False
                async with self._slots:
                    started = time.perf_counter()
                    try:
                        requeue = await self.reconcile(job)
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:
                        job.failures += 1
                        self.metrics.reconcile_errors.inc()
                        delay = min(RETRY_CAP, RETRY_BASE * 2 ** (job.failures - 1)) * random.uniform(1.0, 1.25)
                        logger.warning("reconcile of %s/%s failed (attempt %d), retrying in %.1fs: %r",
                                       *job.key, job.failures, delay, exc)
                        self._schedule(job, delay)
                    else:
                        job.failures = 0
                        self._schedule(job, requeue)
                    finally:
                        self.metrics.reconcile_seconds.observe(time.perf_counter() - started)
        finally:
            job.task = None

    # ---- one reconcile ------------------------------------------------------------------

    def _observe(self, job: _Job, uid: str) -> list[PodState]:
        """The job's Pods: the index, corrected by what this operator just did."""
        ns, name = job.key
        seen: dict[str, PodState] = {}
        for owner, pod in self.pods_of(ns, name):
            if owner is None:
                continue  # carries the label but no DDPJob controls it: not ours to judge
            if owner != uid:
                # Left by an earlier DDPJob of the same name, awaiting garbage collection:
                # it holds a name this job needs, so the job logic sees it as a leftover.
                pod = dataclasses.replace(pod, restart_count=-1)
            seen[pod.name] = pod
        now = time.monotonic()
        for pod_name, (pod, at) in list(job.created.items()):
            current = seen.get(pod_name)
            if (current is not None and current.restart_count == pod.restart_count) or now - at > EXPECTATION_TTL:
                del job.created[pod_name]  # the watch caught up (or never will)
            elif current is None:
                seen[pod_name] = pod
        for pod_name, (restart_count, at) in list(job.deleted.items()):
            current = seen.get(pod_name)
            if current is None or current.restart_count != restart_count or now - at > EXPECTATION_TTL:
                del job.deleted[pod_name]
            elif not current.deleting:
                seen[pod_name] = dataclasses.replace(current, deleting=True)
        return sorted(seen.values(), key=lambda p: (p.node_rank, p.restart_count))

    async def reconcile(self, job: _Job) -> float | None:
        """One pass; returns when to look again (seconds) or None to wait for events."""
        ns, name = job.key
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
            errors = None
        except spec.InvalidSpec as exc:
            parsed, errors = None, [str(e) for e in exc.errors]
        if errors is None and job.rejected and job.rejected[0] == generation:
            errors = job.rejected[1]
        if errors is not None:
            return await self._invalid(job, body, previous, errors, generation, uid)

        now = self.clock()
        initial_phase = previous.get("phase")
        events: list[lifecycle.Event] = []
        rounds = 0
        while True:
            plan = lifecycle.plan(parsed, self._observe(job, uid), previous, now)
            events += [e for e in plan.events if e not in events]
            if plan.delete or plan.delete_job:
                # Status first: if this write fails, nothing is deleted and the restart
                # count cannot be lost between the deletes and the write.
                previous = await self._write_status(job, body, previous, plan.status)
                await self._delete_pods(job, ns, plan.delete)
                if plan.delete_job:
                    if await self.kube.delete(job_path(ns, name), uid=uid):
                        logger.info("deleted %s/%s: ttlSecondsAfterFinished passed", ns, name)
                    self._post(body, events, plan.status)
                    self.forget(ns, name)
                    return None
                break
            if plan.create and rounds < 2:
                # Re-plan once with what was just created, so the status written is the
                # one that holds once the Pods are seen (saves a status write per job).
                await self._create_pods(job, parsed, body, plan)
                rounds += 1
                continue
            break
        await self._write_status(job, body, previous, plan.status)
        self._post(body, events, plan.status)
        if plan.create or plan.status.get("phase") != initial_phase:
            # The plan is a function of the previous status: after a phase change, plan
            # again until nothing changes (a job that just finished learns its TTL timer).
            # Also a create the re-plan still wants is done in a fresh pass.
            return 0.0
        return plan.requeue_after

    # ---- acts ---------------------------------------------------------------------------

    async def _write_status(self, job: _Job, body: Mapping[str, Any], previous: dict[str, Any],
                            new: dict[str, Any]) -> dict[str, Any]:
        """Write the whole status once, only when it differs from what is stored."""
        if new == previous:
            return previous
        ns, name = job.key
        try:
            stored = await self.kube.patch_status(ns, name, status_patch(previous, new))
        except BaseException:
            job.status = None  # the write may or may not have landed: re-read from the index
            raise
        job.status = dict((stored or {}).get("status") or new)
        self._phases[job.key] = job.status.get("phase") or lifecycle.PENDING
        if int(new.get("restarts", 0)) > int(previous.get("restarts", 0)):
            self.metrics.gang_restarts.inc(int(new.get("restarts", 0)) - int(previous.get("restarts", 0)))
        return job.status

    async def _delete_pods(self, job: _Job, ns: str, pod_names: Iterable[str]) -> None:
        pod_names = list(pod_names)
        if not pod_names:
            return
        restart_counts = {p.name: p.restart_count for p in self._observe(job, job.uid or "")}
        results = await asyncio.gather(*(self.kube.delete(pods_path(ns, n)) for n in pod_names),
                                       return_exceptions=True)
        now = time.monotonic()
        for pod_name, result in zip(pod_names, results):
            if not isinstance(result, BaseException):
                job.deleted[pod_name] = (restart_counts.get(pod_name, -1), now)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _create_pods(self, job: _Job, parsed: spec.DDPJob, body: Mapping[str, Any],
                           plan: lifecycle.Plan) -> None:
        if job.service_attempt != plan.restart_count:
            # Once per gang attempt (create-if-absent): a new rendezvous needs the DNS
            # names, and a Service someone deleted comes back with the next attempt.
            await self.kube.create(render.render_service(parsed), read_existing=False)
            job.service_attempt = plan.restart_count
        pods = [render.render_pod(parsed, rank, plan.restart_count) for rank in plan.create]
        # All Pods of the gang at once: one slow create must not hold back the others.
        results = await asyncio.gather(*(self.kube.create(p) for p in pods), return_exceptions=True)
        now, created = time.monotonic(), 0
        for rendered, result in zip(pods, results):
            if isinstance(result, BaseException):
                continue
            obj, fresh = result
            created += fresh
            seen = indexed_pod(obj or rendered)
            if seen is not None:
                job.created[rendered["metadata"]["name"]] = (seen[1], now)
        if created:
            self.metrics.pods_created.inc(created)
            self.post_event(body, "Normal", "Created",
                            f"created {created} Pod(s) of attempt {plan.restart_count} "
                            f"({parsed.nodes} nodes x {parsed.nproc_per_node} processes)")
        for result in results:
            if isinstance(result, BaseException):
                raise result  # retried by the worker; what was created is remembered

    async def _invalid(self, job: _Job, body: Mapping[str, Any], previous: dict[str, Any],
                       errors: list[str], generation: int, uid: str) -> None:
        """An invalid spec: Failed/InvalidSpec, a Warning, nothing created (and nothing left running)."""
        if previous.get("phase") == lifecycle.SUCCEEDED:
            return None  # a finished success is not rewritten by a later bad edit
        new = lifecycle.invalid_status(errors, generation, previous, self.clock())
        if new.get("message") == previous.get("message") and previous.get("phase") == lifecycle.FAILED:
            new = previous  # already reported: keep the stored conditions' times
        live = [p.name for p in self._observe(job, uid)
                if p.phase in ("Pending", "Running", "Unknown") and not p.deleting and p.restart_count >= 0]
        changed = new != previous
        await self._write_status(job, body, previous, new)
        await self._delete_pods(job, job.key[0], live)
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
