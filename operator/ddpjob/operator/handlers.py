"""kopf handlers of the DDPJob operator: thin triggers into `controller.Controller`.

    kopf run -m ddpjob.operator.handlers --standalone --liveness=http://0.0.0.0:8080/healthz
    ddpjob operator ...   (operator.main.run_operator, which hands its settings in as memo.settings)

Nothing here decides anything: a DDPJob being created, resumed (operator restart) or
changed, and any event of a Pod carrying the job label, ask the controller to reconcile
that job; the controller observes through the two indices below (no handler lists the
API), decides with `lifecycle.decide` and writes through `kube`.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
import os
import sys
from typing import Any

import kopf

from ddpjob import text
from ddpjob.api import names
from ddpjob.backoff import Backoff
from ddpjob.operator import bookkeeping, connection, controller as ctl, settings as operator_settings
from ddpjob.operator.gang import GangSupport
from ddpjob.operator.kube import Kube
from ddpjob.operator.nodes import Nodes
from ddpjob.operator.notices import Notifier
from ddpjob.operator.progress import ProgressPoller
from ddpjob.operator.settings import Settings

JOBS = (names.GROUP, names.VERSION, names.PLURAL)
PODS = ("", "v1", "pods")
NODES = ("", "v1", "nodes")
# kopf filters on labels client-side; only the operator's own Pods reach the handlers.
POD_LABELS = {names.LABEL_JOB_NAME: kopf.PRESENT}

# The operator's settings (/metrics, progress polling, liveness, gang integrations,
# template allowances) are one typed object made once, at start: the one `run_operator`
# hands in (memo.settings), else `settings.from_env` (`kopf run -m ...`).
# A write that hangs longer than this fails into kopf's retries instead of stalling a
# reconcile for kopf's default of 5 minutes.
MAX_REQUEST_TIMEOUT = 60.0
# kopf retries its API calls, watches and resource discovery with these delays, forever:
# with its default (a fixed list) it gives up and the operator exits. The cap bounds how
# long after the server's recovery the operator notices (and one request per 5 s per
# retrying caller is no burden to a struggling server).
API_BACKOFF = Backoff(base=0.5, cap=5.0)
REPORTING_COMPONENT = "ddpjob-operator"
# The API server stores objects nested up to 10,000 levels (apimachinery's JSON decoder),
# and kopf decodes, copies and diffs every watched object recursively, in this process's
# main thread: at Python's default limit of 1,000 one deep DDPJob ended the watch, and
# with it the operator, for every job. Three frames a level, with room; the C stack of the
# main thread holds it (tests/operator/test_hostile_objects.py decodes and diffs 10,000
# levels). The job itself is then refused by `spec.parse_job` (api/bounds.py).
RECURSION_LIMIT = 40_000


def configure(settings: kopf.OperatorSettings) -> None:
    """The kopf settings the operator relies on (docs/design.md, "The API client")."""
    # Log lines stay log lines. Only the explicit Events (Created, Running, Restarting,
    # Succeeded, Failed, InvalidSpec) are posted: posting every log line is one API write
    # per line.
    settings.posting.enabled = True
    settings.posting.loggers = False
    # `kubectl describe` shows this in its From column: the operator, not its framework.
    settings.posting.reporting_component = REPORTING_COMPONENT
    # kopf's bookkeeping (the last handled spec, handler progress) goes into annotations
    # under our group, never into .status: the status is computed in full by the job
    # logic and is ours alone.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=names.GROUP)
    settings.persistence.diffbase_storage = bookkeeping.DiffBaseStorage(
        prefix=names.GROUP, key="last-handled-configuration"
    )
    # No handler needs a finalizer (children go by owner reference), so kopf adds none
    # and deleting a DDPJob never waits for the operator. The name is ours in case.
    settings.persistence.finalizer = f"{names.GROUP}/operator"
    settings.networking.error_backoffs = API_BACKOFF
    objects_log = logging.getLogger("kopf.objects")
    if not any(getattr(f, "quiets_pod_events", False) for f in objects_log.filters):  # once a process
        objects_log.addFilter(_QuietPodEvents())
    timeout = settings.networking.request_timeout
    if timeout is None or timeout > MAX_REQUEST_TIMEOUT:
        settings.networking.request_timeout = MAX_REQUEST_TIMEOUT


class _QuietPodEvents(logging.Filter):
    """kopf logs "Handler 'pod_event' succeeded." at INFO for every event of every Pod:
    1,024 lines per phase of a 1,024-node gang, saying nothing the job's own log lines
    and status do not, at about 0.1 ms each; and so for every Node's update. Their
    failures are still logged."""

    quiets_pod_events = True
    _SUCCEEDED = ("Handler 'pod_event' succeeded.", "Handler 'node_event' succeeded.")

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.INFO and record.msg in self._SUCCEEDED)


def _post_event(body: Any, type_: str, reason: str, message: str) -> None:
    # kopf queues it and posts it in the background (with its own retries), so a
    # reconcile never waits on an Event.
    kopf.event(body, type=type_, reason=reason, message=text.clean(message, 1024))


# ---- operator lifecycle ---------------------------------------------------------------


def _kube(memo: kopf.Memo) -> Kube:
    if getattr(memo, "kube", None) is None:
        memo.kube = Kube()
    return memo.kube


def _service_account(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """kopf's reader of the mounted service account token, pointed at the API server's
    address from the Pod's environment (as client-go's in-cluster config: no DNS lookup)."""
    info = kopf.login_with_service_account(**kwargs)
    server = connection.in_cluster_server(os.environ)
    return dataclasses.replace(info, server=server) if info is not None and server else info


@kopf.on.login()
async def login(memo: kopf.Memo, logger: logging.Logger, **kwargs: Any) -> kopf.ConnectionInfo | None:
    """One source of credentials for kopf's watches and the operator's writes:
    `memo.connection` when whoever runs the operator gave one (the development cluster and
    tests do); else the kubeconfig or the in-cluster service account as the official client
    finds them, where it is installed (the `cli` extra: a kubeconfig's exec plugins too);
    else, as in the operator's image (which ships no official client), kopf's own readers
    of the mounted service account token and of a plain kubeconfig."""
    info = (
        getattr(memo, "connection", None)
        or kopf.login_via_client(logger=logger, **kwargs)  # None where the client is not installed
        or _service_account(logger=logger, **kwargs)
        or kopf.login_with_kubeconfig(logger=logger, **kwargs)
    )
    if info is not None:
        _kube(memo).connect(info)
    return info


@kopf.on.startup()
async def start(
    settings: kopf.OperatorSettings,
    memo: kopf.Memo,
    ddpjob_jobs: kopf.Index,
    ddpjob_pods: kopf.Index,
    logger: logging.Logger,
    **_: Any,
) -> None:
    configure(settings)
    if sys.getrecursionlimit() < RECURSION_LIMIT:  # only a raise: a change races other threads' ast.parse
        sys.setrecursionlimit(RECURSION_LIMIT)
    config = getattr(memo, "settings", None)
    if config is None:
        try:
            config = operator_settings.from_env()
        except operator_settings.SettingsError as e:
            raise kopf.PermanentError(str(e)) from None
    memo.settings = config

    def job_body(namespace: str, name: str) -> Any:
        for body in ddpjob_jobs.get((namespace, name), ()):
            return body
        return None

    def pods_of(namespace: str, name: str) -> Any:
        return list(ddpjob_pods.get((namespace, name), ()))

    kube = _kube(memo)
    gang = GangSupport.from_settings(config)
    # Logs an error per enabled integration whose PodGroup API is missing; never fails the
    # start. In the background: API calls wait for the login, which follows the startup.
    memo.gang_check = asyncio.get_running_loop().create_task(gang.check_apis_in_background(kube.served))
    poller = _progress_poller(config, lambda key: memo.controller.trigger(*key), logger)
    allow = config.template_allow
    controller = ctl.Controller(
        kube,
        job_body=job_body,
        pods_of=pods_of,
        post_event=_post_event,
        gang=gang,
        poller=poller,
        template_allow=allow,
        notifier=Notifier(config.notice_key),
        tensorboard=config.tensorboard,
        nodes=Nodes(config.node_rules),
    )
    if allow:
        logger.info("job templates may ask for: %s", ", ".join(sorted(allow)))
    if config.metrics_port:
        controller.metrics.serve(config.metrics_port)
        logger.info("serving Prometheus metrics on :%s/metrics", config.metrics_port)
    memo.controller = controller


def _progress_poller(config: Settings, on_progress: Any, logger: logging.Logger) -> ProgressPoller | None:
    if not config.progress_polling:
        logger.info("progress polling is off")
        return None
    return ProgressPoller(
        on_progress,
        interval=config.progress_interval,
        max_per_second=config.progress_max_per_second,
        max_writes_per_second=config.progress_max_writes_per_second,
    )


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    check = getattr(memo, "gang_check", None)
    if check is not None:  # a stop right after the start: its API check still waits on the client closed below
        check.cancel()
    controller = getattr(memo, "controller", None)
    if controller is not None:
        if controller.poller is not None:
            await controller.poller.close()
        await controller.close()
        controller.metrics.stop()
    if getattr(memo, "kube", None) is not None:
        await memo.kube.aclose()


@kopf.on.probe(id="jobs")
def probe(memo: kopf.Memo, **_: Any) -> int:
    """kopf's /healthz answers 500 when this raises: only after a long API outage."""
    # Liveness turns unhealthy only after the API has given no answer for this long (a
    # struggling API server is no reason to restart the operator; a wedged one may be).
    limit = (getattr(memo, "settings", None) or operator_settings.DEFAULTS).liveness_outage_seconds
    kube = getattr(memo, "kube", None)
    if kube is not None and kube.outage_seconds() > limit:
        raise RuntimeError(f"the API server has not answered for {kube.outage_seconds():.0f}s (limit {limit:.0f}s)")
    controller = getattr(memo, "controller", None)
    return len(controller.phases()) if controller is not None else 0


# ---- indices: what the controller observes ---------------------------------------------


# The index functions are async (they do no I/O): kopf runs a sync handler in a thread
# pool, one hop per watch event, which a 1,024-Pod gang pays 1,024 times per phase.
@kopf.index(*JOBS)
async def ddpjob_jobs(namespace: str, name: str, body: kopf.Body, **_: Any) -> dict:
    """(namespace, name) -> the DDPJob as last seen by the watch."""
    return {(namespace, name): copy.deepcopy(dict(body))}


@kopf.index(*PODS, labels=POD_LABELS)
async def ddpjob_pods(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict | None:
    """(namespace, job name) -> (owner uid, PodState) of each of the job's Pods."""
    item = ctl.indexed_pod(body)
    return {(namespace, labels[names.LABEL_JOB_NAME]): item} if item is not None else None


# ---- triggers ---------------------------------------------------------------------------


@kopf.on.resume(*JOBS)
@kopf.on.create(*JOBS)
async def job_created(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    memo.controller.trigger(namespace, name)


@kopf.on.update(*JOBS, field="spec")
async def job_spec_changed(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    # Only a trigger: kopf's `old` comes from an annotation anyone who may patch the job
    # can rewrite, so nothing is decided from it. Each reconcile checks the new spec, its
    # immutable fields against what the operator accepted (api/accepted_spec.py).
    memo.controller.trigger(namespace, name)


def _deleted(type: str | None, **_: Any) -> bool:
    return type == "DELETED"


# Filtered before kopf runs (and logs) a handler: a Running job's status.progress write
# comes back as a MODIFIED event, and would otherwise cost a handler call each time.
@kopf.on.event(*JOBS, when=_deleted)
async def job_event(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    memo.controller.forget(namespace, name)


@kopf.on.event(*NODES)
async def node_event(
    name: str, type: str | None, body: kopf.Body, memo: kopf.Memo, ddpjob_pods: kopf.Index, **_: Any
) -> None:
    """A Node turned NotReady, came back, was found unhealthy or was deleted: the jobs with a
    Pod on it are reconciled (operator/nodes.py)."""
    pods = ((key, item) for key, items in ddpjob_pods.items() for item in items)
    for key in memo.controller.nodes.to_reconcile(name, None if type == "DELETED" else body, pods):
        memo.controller.trigger(*key)


@kopf.on.event(*PODS, labels=POD_LABELS)
async def pod_event(namespace: str, labels: kopf.Labels, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    memo.controller.pod_changed(namespace, labels[names.LABEL_JOB_NAME], body)
    memo.controller.trigger(namespace, labels[names.LABEL_JOB_NAME], delay=ctl.POD_EVENT_DEBOUNCE)
