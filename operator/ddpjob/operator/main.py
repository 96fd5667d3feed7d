"""Entry point of the operator process, for `ddpjob operator ...`.

Equivalent to `kopf run -m ddpjob.operator.handlers --standalone [--liveness=URL]
[--namespace=NS | --all-namespaces]`, plus /metrics and, where the settings name a Lease
(`settings.LeaderElection`), leader election among replicas. The settings go to the
handlers as one typed object (`memo.settings`), never through the environment: the
caller's flags are applied to `settings.from_env()` here.

With leader election, the process is first a standby: it tries for the Lease every retry
period (leader_election.py) and answers the liveness endpoint itself (kopf's runs only
inside kopf), as healthy while the API answers, and /metrics, all zero. Once it leads,
kopf runs, standalone (the Lease is what makes it the only one acting). It renews the Lease meanwhile; when it cannot
renew within the renew deadline it exits at once, non-zero (the kubelet restarts it, as a
standby), and every request of the operator's own client checks that first (`Kube.guard`).
On SIGTERM kopf stops, then the Lease is released so a standby leads at its next try.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import signal
import sys
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ddpjob import gc_tuning
from ddpjob.operator import settings as operator_settings

logger = logging.getLogger("ddpjob.operator.main")

# The exit status of a leader that lost the Lease: not 0, so the kubelet restarts it.
EXIT_LOST_LEADERSHIP = 1


def run_operator(
    namespace: str | None,
    standalone: bool,
    liveness: str | None,
    metrics_port: int | None,
    peering: str | None = None,
    settings: operator_settings.Settings | None = None,
) -> None:
    """Run until SIGTERM/SIGINT. `operator_settings.SettingsError` (one line) for a bad
    setting, before anything starts.

    namespace: serve one namespace; None serves the whole cluster.
    standalone: act alone, whatever the settings say of leader election.
    liveness: e.g. http://0.0.0.0:8080/healthz (kopf's probe endpoint; a standby's own).
    metrics_port: serve Prometheus /metrics on this port (None: the settings' own).
    peering: kopf peering is gone (leader election on a Lease replaced it): must be None.
    settings: the operator's settings (None: read from the environment, `settings.from_env`).
    """
    import kopf

    from ddpjob.operator import handlers  # noqa: F401  (registers the handlers with kopf)

    if peering:
        raise SystemExit(
            f"error: --peering={peering[:80]!r}: kopf peering is replaced by leader election on a Lease: "
            f"set {operator_settings.LEASE_ENV} and {operator_settings.LEASE_NAMESPACE_ENV}"
        )
    settings = settings if settings is not None else operator_settings.from_env()
    if metrics_port:
        settings = dataclasses.replace(settings, metrics_port=metrics_port)
    kopf.configure(verbose=False)
    gc_tuning.tune_for_long_running_server()
    run: dict[str, Any] = dict(
        standalone=True,
        liveness_endpoint=liveness,
        clusterwide=namespace is None,
        namespaces=[namespace] if namespace else (),
        memo=kopf.Memo(settings=settings),
    )
    election = settings.leader_election
    if election is not None and standalone:
        logger.warning("--standalone: no leader election (Lease %s/%s ignored)", election.namespace, election.name)
        election = None
    if election is None:
        kopf.run(**run)
    else:
        asyncio.run(elected(election, run, settings.liveness_outage_seconds))


async def elected(config: operator_settings.LeaderElection, run: dict[str, Any], outage_limit: float) -> None:
    """Stand by until this replica leads, then run kopf (`run`: kopf.operator's arguments)
    until it stops, then release the Lease."""
    import kopf

    from ddpjob.operator import handlers
    from ddpjob.operator.kube import Kube
    from ddpjob.operator.leader_election import LeaderElector, identity

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):  # kopf installs its own once it runs
        loop.add_signal_handler(signum, stop.set)
    memo = run["memo"]
    # The handlers' login (kopf's, for the same credentials): it connects the controller's
    # client too, made here so that it checks, before each request, that this replica leads.
    memo.kube = Kube()
    login = functools.partial(handlers.login, memo=memo, logger=logger, settings=kopf.OperatorSettings())
    info = await login()
    if info is None:
        raise SystemExit("error: no credentials for the API server (a kubeconfig or the in-cluster ServiceAccount)")
    kube = Kube(max_in_flight=2, attempts=1)
    kube.connect(info)
    elector = LeaderElector(kube, config, identity(), login=login)
    try:
        async with standby_probe(run.get("liveness_endpoint"), elector, outage_limit):
            with standby_metrics(memo.settings.metrics_port):
                if not await elector.acquire(stop):
                    return
        memo.kube.guard = lambda: None if elector.holds() else lost(elector, "not renewed within the renew deadline")
        renewing = asyncio.create_task(_keep_leading(elector))
        ready = asyncio.Event()
        signals = asyncio.create_task(_signals_stop(ready, stop))
        try:
            await kopf.operator(stop_flag=stop, ready_flag=ready, **run)
        finally:
            renewing.cancel()
            signals.cancel()
            await elector.release()
    finally:
        await kube.aclose()


async def _signals_stop(ready: asyncio.Event, stop: asyncio.Event) -> None:
    """Once kopf is up, SIGINT and SIGTERM set its stop flag again (it installed handlers of
    its own as it started): stopped by a signal, kopf waits 5 s on its own waiter of the
    stop flag, which only the flag ends, and the Lease would be released 5 s later."""
    await ready.wait()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)


async def _keep_leading(elector: Any) -> None:
    lost(elector, await elector.keep_leading())


def lost(elector: Any, reason: str) -> None:
    """Stop acting at once: another replica may lead within (lease - renew deadline)."""
    logger.critical("%s lost by %s: %s; exiting", elector.described, elector.me, reason)
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    sys.stdout.flush()
    os._exit(EXIT_LOST_LEADERSHIP)


@contextlib.contextmanager
def standby_metrics(port: int | None) -> Iterator[None]:
    """/metrics while kopf does not run: the operator's metrics, all zero (this replica
    serves no job), so every replica is a target that answers and their sums are the
    leader's; the controller serves its own once this one leads (handlers.start)."""
    if not port:
        yield
        return
    from ddpjob.operator.metrics import OperatorMetrics

    metrics = OperatorMetrics()
    metrics.serve(port)
    try:
        yield
    finally:
        metrics.stop()


@contextlib.asynccontextmanager
async def standby_probe(endpoint: str | None, elector: Any, outage_limit: float) -> AsyncIterator[None]:
    """The liveness endpoint while kopf does not run: 200 with who leads, 500 once the API
    has given no answer for `outage_limit` seconds (as the leader's own probe, handlers.py)."""
    if not endpoint:
        yield
        return
    from aiohttp import web

    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme != "http":
        raise SystemExit(f"error: --liveness={endpoint[:80]!r}: only http:// endpoints are served")

    async def health(_: web.Request) -> web.Response:
        outage = elector.kube.outage_seconds()
        body = {"standby": {"lease": elector.described, "leader": elector.leader}}
        return web.json_response(body, status=500 if outage > outage_limit else 200)

    app = web.Application()
    app.add_routes([web.get(parts.path or "/", health)])
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, parts.hostname or "localhost", parts.port or 80).start()
        yield
    finally:
        await runner.cleanup()
