"""A Node with no kubelet behind it, for tests that play the kubelet themselves (they
write each Pod's status): the real kube-scheduler places Pods on it as on any Node, the
node lifecycle controller sees it alive (its Lease is renewed as a kubelet renews it),
and a Pod deleted from it goes once its grace period starts, as a kubelet that stopped
its containers at once confirms with a delete of grace 0. Without it, kube-scheduler
marks the Pods Unschedulable (no Node fits) and a graceful delete of a placed Pod
waits for a kubelet for ever.

One per test worker (started with the worker's control plane, stopped with it), open
to new Pods only during a test that asks for it and cordoned between them, so that a
later test's real cluster on the same plane never has its Pods placed here; the tests'
namespaces keep their Pods apart.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes

from ddpjob_devcluster.controlplane.node import LEASE_SECONDS, RENEW_SECONDS, NodeShape, _now, node_object

# No kubelet listens: the Node says port 0 (nothing reads logs from these Pods).
NO_PORT = 0


class StandInNode:
    """`start()` / `stop()`; `name` is the Node's."""

    def __init__(self, admin_kubeconfig: str, shape: NodeShape | None = None):
        self.shape = shape or NodeShape(f"stand-in-{uuid.uuid4().hex[:6]}", cpu="64", memory="256Gi", pods=1000)
        self.api = kubernetes.config.new_client_from_config(admin_kubeconfig)
        self.core = kubernetes.client.CoreV1Api(self.api)
        self._stopping = threading.Event()
        self._threads = [
            threading.Thread(target=self._renew_lease, name="stand-in-lease", daemon=True),
            threading.Thread(target=self._finish_deletions, name="stand-in-deletions", daemon=True),
        ]
        self.errors: list[BaseException] = []

    @property
    def name(self) -> str:
        return self.shape.name

    def start(self, cordoned: bool = False) -> StandInNode:
        """cordoned: made unschedulable, as `kubectl cordon` leaves it, until a test opens it."""
        body = node_object(self.shape, NO_PORT)
        if cordoned:
            body["spec"] = {**body.get("spec", {}), "unschedulable": True}
        self.core.create_node(body)  # type: ignore[arg-type]  # a dict body: the client sends it as it is
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=15)
        with contextlib.suppress(kubernetes.client.ApiException):
            self.core.delete_node(self.name, _request_timeout=10)
        self.api.close()

    def set_schedulable(self, schedulable: bool) -> None:
        self.core.patch_node(self.name, {"spec": {"unschedulable": not schedulable}})

    @contextlib.contextmanager
    def cordoned(self) -> Iterator[None]:
        """No new Pod is placed here for the `with` block (`kubectl cordon`): a test that
        binds Pods itself keeps kube-scheduler from placing them first."""
        self.set_schedulable(False)
        try:
            yield
        finally:
            self.set_schedulable(True)

    def _renew_lease(self) -> None:
        leases = kubernetes.client.CoordinationV1Api(self.api)
        body: dict[str, Any] = {
            "metadata": {"name": self.name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": self.name, "leaseDurationSeconds": LEASE_SECONDS},
        }
        created, delay = False, 0.0
        while not self._stopping.wait(delay):
            body["spec"]["renewTime"] = _now()
            try:
                if not created:
                    leases.create_namespaced_lease("kube-node-lease", body, _request_timeout=10)  # type: ignore[arg-type]  # a dict body: the client sends it as it is
                    created = True
                else:
                    patch = {"spec": {"renewTime": body["spec"]["renewTime"]}}
                    leases.patch_namespaced_lease(self.name, "kube-node-lease", patch, _request_timeout=10)
                delay = RENEW_SECONDS
            except kubernetes.client.ApiException as exc:
                created = created or exc.status == 409
                delay = 1.0  # a busy server: again soon, well within the lease
            except Exception:  # noqa: BLE001 - a heartbeat must not die on one failed call; the next one retries
                delay = 1.0

    def _finish_deletions(self) -> None:
        """Watch this Node's Pods; each one being deleted is deleted at once (grace 0, on
        its uid: a Pod of the same name made since is not touched)."""
        version: str | None = None
        while not self._stopping.is_set():
            try:
                listing = self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={self.name}")
                version = listing.metadata.resource_version if listing.metadata else None
                for pod in listing.items:
                    self._finish(pod)
                for event in kubernetes.watch.Watch().stream(
                    self.core.list_pod_for_all_namespaces,
                    field_selector=f"spec.nodeName={self.name}",
                    resource_version=version,
                    timeout_seconds=2,  # looks at the stop flag this often
                ):
                    if event["type"] != "DELETED":
                        self._finish(event["object"])
            except Exception as exc:  # noqa: BLE001 - the server restarting or busy: list again; kept for the report
                if self._stopping.is_set():
                    return
                self.errors.append(exc)
                self._stopping.wait(0.5)

    def _finish(self, pod: Any) -> None:
        meta = pod.metadata
        if meta.deletion_timestamp is None:
            return
        with contextlib.suppress(kubernetes.client.ApiException):  # gone already, or another uid
            # Grace and precondition in the body, as the kubelet sends them: the API server
            # reads the query's gracePeriodSeconds only when there is no body.
            options = kubernetes.client.V1DeleteOptions(
                grace_period_seconds=0, preconditions=kubernetes.client.V1Preconditions(uid=meta.uid)
            )
            self.core.delete_namespaced_pod(meta.name, meta.namespace, body=options, _request_timeout=10)
