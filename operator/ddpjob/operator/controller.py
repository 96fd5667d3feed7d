"""The operator's reconcile of one DDPJob: observe, plan, act.

One `Controller` serves every DDPJob. Reconciles are keyed by (namespace, name) and run
through a `WorkQueue` (one at a time per job, triggers coalesced, errors retried with
backoff). Triggers come from kopf handlers (job created/resumed/changed, Pod events) and
from the timers that `Plan.requeue_after` asks for (restart backoff, activeDeadlineSeconds,
TTL).

A reconcile is one step, or two: `observer.observe` gathers everything the job logic may
look at into one `Observed` (from kopf's in-memory indices, corrected by this operator's
own recent writes, and its memory of the job); `lifecycle.decide` returns the whole next
status, the Events and the actions; `_act` carries them out and nothing else. What an act
learns (Pods created, a refused create, a PodGroup still going away) is observed by a
second step at once, which writes the status that then holds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ddpjob.api import spec
from ddpjob.job import lifecycle, observe
from ddpjob.job.decision import Observed, Plan
from ddpjob.job.observe import PodState
from ddpjob.operator import observer
from ddpjob.operator.api_paths import job_path
from ddpjob.operator.children import Children, indexed_pod
from ddpjob.operator.gang import GangSupport
from ddpjob.operator.gang_reader import GangReader
from ddpjob.operator.kube import Kube
from ddpjob.operator.metrics import OperatorMetrics
from ddpjob.operator.nodes import Nodes
from ddpjob.operator.notices import Notifier
from ddpjob.operator.observer import IndexedPod, JobMemory, Key, indexed_pods
from ddpjob.operator.progress import ProgressPoller, Target
from ddpjob.operator.status_writes import StatusChanged, StatusWriter
from ddpjob.operator.tensorboard import KEEP, TensorBoardConfig, TensorBoards, with_status
from ddpjob.operator.workqueue import WorkQueue

__all__ = ["Controller", "IndexedPod", "StatusChanged", "indexed_pod"]

logger = logging.getLogger("ddpjob.operator.controller")

EventPoster = Callable[[Mapping[str, Any], str, str, str], None]

# Pod events of one gang arrive together (the gang is scheduled and finishes together):
# one reconcile per burst instead of one per Pod saves status writes (N Pods turning
# Running one by one would otherwise be N status writes). Kubernetes' Job controller
# batches Pod updates the same way (pkg/controller/job: syncJobBatchPeriod, 1 s).
POD_EVENT_DEBOUNCE = 0.2
# Reconciles running at once across all jobs; the rest wait their turn.
DEFAULT_MAX_CONCURRENT = 64


def utcnow() -> datetime:
    return datetime.now(UTC)


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
        notifier: Notifier | None = None,
        tensorboard: TensorBoardConfig | None = None,
        nodes: Nodes | None = None,
    ):
        self.template_allow = template_allow  # what job templates may ask for (template_policy)
        self.job_body = job_body
        self.pods_of = pods_of
        self.post_event = post_event
        self.clock = clock
        self.monotonic = monotonic  # for the batching of count-only status writes
        self.poller = poller  # reads Pod 0's /progress of Running jobs (None: no progress)
        self._jobs: dict[Key, JobMemory] = {}
        self._phases: dict[Key, str] = {}
        self.metrics = metrics or OperatorMetrics(self.phases)
        self.notifier = notifier or Notifier()  # tells an elastic job's survivors whom it lost
        self.nodes = nodes or Nodes()  # the Nodes as the watch last saw them (nodes.py)
        self.children = Children(kube, gang or GangSupport(), self.metrics, post_event, self.notifier.token)
        self.status_writer = StatusWriter(kube, job_body)
        self.gang_reader = GangReader(kube)
        self.tensorboards = TensorBoards(kube, tensorboard or TensorBoardConfig(), self.trigger)
        self.queue = WorkQueue(
            lambda key: self.reconcile(key),
            max_concurrent,
            on_error=self._reconcile_failed,
            on_done=self.metrics.reconcile_seconds.observe,
            group=lambda key: key[0],  # slots round-robin by namespace (fair_slots.py)
        )

    # The API client and the gang settings are the children's and the status writer's too:
    # one replaced here (a test's fake, say) is replaced there.
    @property
    def kube(self) -> Kube:
        return self.children.kube

    @kube.setter
    def kube(self, kube: Kube) -> None:
        self.children.kube = self.status_writer.kube = self.gang_reader.kube = self.tensorboards.kube = kube

    @property
    def gang(self) -> GangSupport:
        return self.children.gang

    @gang.setter
    def gang(self, gang: GangSupport) -> None:
        self.children.gang = gang

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
        self.notifier.forget((namespace, name))
        self.tensorboards.forget((namespace, name))
        if self.poller is not None:
            self.poller.unwatch((namespace, name))

    async def close(self) -> None:
        await self.queue.close()
        self.notifier.close()
        self._jobs.clear()

    @property
    def busy(self) -> bool:
        return self.queue.busy

    def _job(self, key: Key) -> JobMemory:
        return self._jobs.get(key) or self._jobs.setdefault(key, JobMemory(key))

    def _reconcile_failed(self, key: Key, failures: int, delay: float, exc: BaseException) -> None:
        if isinstance(exc, StatusChanged):
            logger.info("%s/%s: %s; planning again in %.1fs", *key, exc, delay)
            return
        self.metrics.reconcile_errors.inc()
        logger.warning("reconcile of %s/%s failed (attempt %d), retrying in %.1fs: %r", *key, failures, delay, exc)

    # ---- one reconcile ------------------------------------------------------------------

    def pod_changed(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        """Every event of a job's Pod: remember that it was seen, and one marked for a
        disruption."""
        memory = self._jobs.get((namespace, name))
        if memory is not None:  # (none yet: its first reconcile sees the Pod in the index)
            memory.saw(body)
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
        uid = str((body.get("metadata") or {}).get("uid") or "")
        if job.uid != uid:
            job.reset(uid)
        # The Pods as this pass sees them: the index corrected by the expectations, once.
        pods = indexed_pods(job, self.pods_of(*key), uid)
        parsed, errors = observer.parse(job, body, self.template_allow)
        # What a gang's scheduler or queue says of Pods it holds, and the Nodes of Pods
        # stuck terminating, are part of the observation.
        read_in = await self.gang_reader.read(job, None if errors else parsed, pods)
        now = self.clock()
        nodes = self.nodes.ready_of(p.node_name for p in pods)
        # One observe -> plan -> act. A pass that created Pods asks to run again at once
        # (`_act` returns 0): the next pass observes what its creates did.
        observed = self._observe(job, body, pods, parsed, errors, nodes, now)
        after = await self._act(job, body, observed, lifecycle.decide(observed))
        if key not in self._jobs or read_in is None:
            return after
        return read_in if after is None else min(after, read_in)

    def _observe(
        self,
        job: JobMemory,
        body: Mapping[str, Any],
        pods: list[PodState],
        parsed: spec.DDPJob | None,
        errors: tuple[str, ...],
        nodes: dict[str, str | None],
        now: datetime,
    ) -> Observed:
        progress = self.poller.take(job.key) if self.poller is not None else None
        observed = observer.observe(
            job, body, pods, (parsed, errors), now, self.gang, progress, self.monotonic(), nodes, self.nodes.unhealthy()
        )
        self._phases[job.key] = observed.previous.get("phase") or lifecycle.PENDING
        return observed

    async def _act(self, job: JobMemory, body: Mapping[str, Any], observed: Observed, plan: Plan) -> float | None:
        """Carry out the plan, deciding nothing: force deletes, the status (first: if it
        fails, nothing is deleted and no restart is lost), deletes, PodGroups, Events, creates."""
        ns, name = job.key
        await self.children.force_delete(job, body, plan.force_delete)
        if not plan.keep_refusal:
            job.backoff.clear()
        if plan.gang_blocked:
            job.gang_waits += 1
        # status.tensorboard: the job's TensorBoard, made or removed as its spec says.
        board = (
            KEEP if plan.delete_job else await self.tensorboards.sync(job.key, job.uid, observed.job, observed.previous)
        )
        if plan.write_status:
            await self._write_status(job, body, observed.previous, with_status(plan.status, board))
        if plan.tell_lost and job.uid:  # before the deletes: the survivors hear of it first
            self.notifier.tell(job.key, job.uid, plan.tell_lost, observed.pods)
        await self.children.delete_pods(job, ns, plan.delete, observed.pods)
        if plan.delete_job:
            if await self.kube.delete(job_path(ns, name), uid=job.uid):
                logger.info("deleted %s/%s: ttlSecondsAfterFinished passed", ns, name)
            self._post(body, plan.events)
            self.forget(ns, name)
            return None
        if plan.write_status:  # else the next step, which sees the creates, says it
            await self.children.delete_pod_groups(job, ns, plan.delete_pod_groups)
            self._post(body, plan.events)
        if plan.check_gang_apis:
            await self.gang.check_apis(self.kube.served)
        self._watch_progress(job, observed, plan)
        if plan.create and observed.job is not None:
            await self._create(job, observed.job, body, plan)
        return 0.0 if plan.create or plan.plan_again else plan.requeue_after

    async def _create(self, job: JobMemory, parsed: spec.DDPJob, body: Mapping[str, Any], plan: Plan) -> None:
        """The attempt's PodGroup, then its Service and Pods; what the API answered is
        remembered for the next step to observe."""
        blocked = await self.children.ensure_pod_group(job, parsed, plan.restart_count)
        if blocked:
            job.gang_block = blocked
            return
        job.gang_waits = 0
        refused = await self.children.create_pods(job, parsed, body, plan)
        if refused is not None:
            job.backoff.refused(refused, self.clock())
        else:
            job.backoff.clear()

    def _watch_progress(self, job: JobMemory, observed: Observed, plan: Plan) -> None:
        if self.poller is None:
            return
        parsed = observed.job
        if plan.status.get("phase") != lifecycle.RUNNING or parsed is None:
            self.poller.unwatch(job.key)
            return
        ips = {p.node_rank: p.ip for p in observed.pods if p.restart_count == plan.restart_count and not p.leftover}
        self.poller.watch(
            job.key,
            Target(
                plan.restart_count,
                tuple(ips.get(r) for r in range(parsed.nodes)),
                parsed.stall_timeout_seconds,
                world_size=parsed.world_size,
            ),
        )

    # ---- acts ---------------------------------------------------------------------------

    async def _write_status(
        self, job: JobMemory, body: Mapping[str, Any], previous: Mapping[str, Any], new: dict[str, Any]
    ) -> Mapping[str, Any]:
        stored = await self.status_writer.write(job, body, previous, new)
        if stored is not previous:
            job.status_written_at = self.monotonic()
            self._phases[job.key] = stored.get("phase") or lifecycle.PENDING
            if int(new.get("restarts", 0)) > int(previous.get("restarts", 0)):
                self.metrics.gang_restarts.inc(int(new.get("restarts", 0)) - int(previous.get("restarts", 0)))
        return stored

    def _post(self, body: Mapping[str, Any], events: Iterable[lifecycle.Event]) -> None:
        for event in events:
            self.post_event(body, event.type, event.reason, event.message)
