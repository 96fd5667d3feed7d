"""Run a kopf operator in its own thread and event loop against any API server: a
kubeconfig's (its server, CA, client certificate or token), or a bare URL.

The operator's handlers module is imported into a fresh kopf registry on every run, so
tests do not leak handlers into each other; an explicit `@kopf.on.login` handler gives
kopf those credentials instead of its autodetection (kubeconfig / in-cluster / pykube).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import pathlib
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeVar

import kopf
import yaml

T = TypeVar("T")


def _current(path: str | pathlib.Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The cluster and the user of a kubeconfig's current context."""
    config = yaml.safe_load(pathlib.Path(path).read_text())
    context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next((u.get("user") or {} for u in config.get("users") or [] if u["name"] == context.get("user")), {})
    return cluster, user


def connection_of(kubeconfig: str | pathlib.Path, namespace: str) -> kopf.ConnectionInfo:
    """kopf's credentials from a kubeconfig: its current context's server, CA, client
    certificate or token."""
    cluster, user = _current(kubeconfig)
    return kopf.ConnectionInfo(
        server=cluster["server"],
        ca_path=cluster.get("certificate-authority"),
        ca_data=cluster.get("certificate-authority-data"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        certificate_path=user.get("client-certificate"),
        certificate_data=user.get("client-certificate-data"),
        private_key_path=user.get("client-key"),
        private_key_data=user.get("client-key-data"),
        scheme="Bearer" if user.get("token") else None,
        token=user.get("token"),
        default_namespace=namespace,
    )


def load_handlers(handlers: str | pathlib.Path, registry: kopf.OperatorRegistry) -> types.ModuleType:
    """Import a handlers module (dotted name or file path) so its decorators fill `registry`."""
    previous = kopf.get_default_registry()
    kopf.set_default_registry(registry)  # kopf's decorators register into the default registry
    try:
        if isinstance(handlers, pathlib.Path) or str(handlers).endswith(".py"):
            path = pathlib.Path(handlers)
            spec = importlib.util.spec_from_file_location(f"_kopf_handlers_{path.stem}_{id(registry)}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
        if handlers in sys.modules:  # already imported by an earlier run: re-register anew
            return importlib.reload(sys.modules[handlers])
        return importlib.import_module(handlers)
    finally:
        kopf.set_default_registry(previous)


def default_test_settings(settings: kopf.OperatorSettings) -> None:
    """Settings that keep tests quick; every value here is a test-only choice."""
    # Retry failed API calls fast: the defaults back off for up to a minute.
    settings.networking.error_backoffs = [0.1, 0.2, 0.5]
    settings.networking.request_timeout = 10
    # Reconnect watches quickly if a fault drops one; streams end server-side at 60s.
    settings.watching.server_timeout = 60
    settings.watching.connect_timeout = 5
    settings.watching.reconnect_backoff = 0.1


class OperatorRun:
    """A running operator: `stop()` it, or leave the `with` block."""

    def __init__(self, thread: threading.Thread, stop_flag: threading.Event, errors: list[BaseException]):
        self.thread, self.stop_flag, self.errors = thread, stop_flag, errors

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    def stop(self, timeout: float = 60) -> None:
        self.stop_flag.set()
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise RuntimeError(f"the operator did not stop within {timeout}s")
        if self.errors:
            raise RuntimeError("the operator crashed") from self.errors[0]


@contextlib.contextmanager
def run_operator(
    server: Any,
    handlers: str | pathlib.Path,
    *,
    namespace: str | None = None,
    clusterwide: bool = False,
    configure: Callable[[kopf.OperatorSettings], None] | None = None,
    startup_timeout: float = 120,
) -> Iterator[OperatorRun]:
    """Run kopf with `handlers` against `server` (a kubeconfig path, a URL, or an object
    with a `url`: see `connection_of`).

        Exactly one of `namespace` / `clusterwide=True` picks what the operator serves.
        `configure(settings)` runs after `default_test_settings`.
    """
    if (namespace is None) == (not clusterwide):
        raise ValueError("give either namespace=... or clusterwide=True")
    registry = kopf.OperatorRegistry()
    load_handlers(handlers, registry)
    connection = connection_of(server, namespace or "default")

    @kopf.on.login(registry=registry)
    def login_as_given(**_: Any) -> kopf.ConnectionInfo:
        return connection

    settings = kopf.OperatorSettings()
    default_test_settings(settings)
    if configure is not None:
        configure(settings)

    stop_flag, ready_flag = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    # An operator whose own login handler builds an API client (ddpjob's does) takes the
    # same credentials from memo.connection instead of the user's kubeconfig.
    coro = kopf.operator(
        registry=registry,
        settings=settings,
        standalone=True,
        clusterwide=clusterwide,
        memo=kopf.Memo(connection=connection),
        namespaces=[namespace] if namespace else (),
        stop_flag=stop_flag,
        ready_flag=ready_flag,
    )
    thread = threading.Thread(target=_run_loop, args=(coro, errors), name="kopf-operator", daemon=True)
    thread.start()
    run = OperatorRun(thread, stop_flag, errors)
    try:
        wait_for(
            lambda: ready_flag.is_set() or not thread.is_alive(),
            timeout=startup_timeout,
            message="the operator did not become ready",
        )
        if not thread.is_alive():
            raise RuntimeError("the operator exited during startup") from (errors[0] if errors else None)
        yield run
    finally:
        run.stop()


def _run_loop(coro: Any, errors: list[BaseException]) -> None:
    # A fresh loop in this thread: kopf must not share the test's loop.
    try:
        asyncio.run(coro)
    except BaseException as exc:  # noqa: BLE001 - the operator thread's end, kept for the test to raise
        errors.append(exc)


class Abort(AssertionError):
    """Raised by a wait predicate: stop waiting, the awaited state can no longer come."""


def wait_for(
    predicate: Callable[[], T | Literal[False] | None],
    timeout: float = 60,
    interval: float = 0.05,
    message: str = "condition not met",
    describe: Callable[[], Any] | None = None,
) -> T:
    """Poll `predicate` until it returns a truthy value and return it; exceptions count as
    "not yet" (e.g. 404 before an object exists), except `Abort`, and the last one is
    reported on timeout, with `describe()` (the state worth seeing) when given.

    The wait ends when the predicate holds; `timeout` only ends one that would hang, so
    the default is generous for a busy machine (what takes milliseconds alone takes
    seconds beside other work)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            result = predicate()
            if result:
                return result
            last = result
        except Abort:
            raise
        except Exception as exc:  # noqa: BLE001 - a predicate that fails is not yet true; said at the deadline
            last = exc
        if time.monotonic() >= deadline:
            extra = f"; {describe()}" if describe is not None else ""
            raise AssertionError(f"{message} within {timeout}s; last result: {last!r}{extra}")
        time.sleep(interval)
