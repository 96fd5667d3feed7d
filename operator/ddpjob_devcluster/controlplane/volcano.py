"""Volcano's scheduler and controllers beside a `ControlPlane` (`gang: volcano`).

What its own install does (installer/helm/chart/volcano in the pinned module, rendered
with `helm template` at run time, nothing copied): the `volcano-system` namespace, the
CRDs, the chart's ServiceAccounts, ClusterRoles and ClusterRoleBindings unchanged, and
the scheduler's configuration from the chart's ConfigMap. Each process authenticates with
a token the TokenRequest API issued for its chart ServiceAccount, as its Pod would, so
the chart's RBAC is the one exercised.

- vc-scheduler (`build.VOLCANO`), scheduler name `volcano`: PodGroups (minMember,
  minResources, queue, priorityClassName) are enqueued and placed all or none. It creates
  the `default` Queue itself (pkg/scheduler/cache newDefaultQueue).
- vc-controller-manager with the queue controller (Queue state Open, PodGroup counts in
  the Queue's status) and the PodGroup controller. Not the batch Job, gc or flow
  controllers: the operator renders PodGroups itself, and no vcjob exists.

No admission webhook: its defaulting (a PodGroup's queue, a Queue's weight) is not needed
for PodGroups that name their queue, and the scheduler makes the default Queue.

Built against Kubernetes 1.30 libraries, v1.10.0 finds every API it uses on
kube-apiserver 1.37.2: its logs show no missing resource, only optimistic-concurrency
conflicts on the default Queue's status (the scheduler and the queue controller both
write it, and retry), as upstream does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import subprocess
import urllib.request
from collections.abc import Iterator
from typing import Any

import yaml

from ddpjob.local.ports import free_port
from ddpjob_devcluster.clusters.client import json_object
from ddpjob_devcluster.controlplane import build
from ddpjob_devcluster.controlplane.process import Component, StartFailure

SCHEDULER_NAME = "volcano"
NAMESPACE = "volcano-system"
RELEASE = "volcano"
DEFAULT_QUEUE = "default"
READY_SECONDS = 90
# What the processes run here watch: PodGroups and Queues (all), Commands (the queue
# controller: open/close a Queue), Numatopologies (the scheduler's ResourceTopology
# gate is on by default). batch Jobs and flow.volcano.sh belong to controllers not run.
CRDS = (
    "podgroups.scheduling.volcano.sh",
    "queues.scheduling.volcano.sh",
    "commands.bus.volcano.sh",
    "numatopologies.nodeinfo.volcano.sh",
)
CONTROLLERS = ("queue-controller", "pg-controller")
# The actions of upstream's own CI configuration (the chart's volcano-scheduler-ci.conf):
# the chart's default ("enqueue, allocate, backfill") plus reclaim and preempt, which
# docs/user-guide/how_to_configure_scheduler.md lists for a higher-priority job to evict a
# lower one. The chart's default tiers are kept as they are (gang and drf with
# enablePreemptable false, so priority alone decides the victims).
ACTIONS = "enqueue, allocate, backfill, reclaim, preempt"
# A gang whose minResources exceed the idle resources (times the overcommit factor) stays
# Pending at enqueue, and preempt skips Pending PodGroups: upstream's preemption e2e
# (test/e2e/schedulingaction/preempt.go) takes enqueue out for it, "because it conflicts
# with preempt". `Volcano.actions(PREEMPTING)` does the same for a test's duration.
PREEMPTING = "allocate, backfill, reclaim, preempt"
RELOAD_SECONDS = 30


def chart() -> list[dict[str, Any]]:
    """Upstream's chart rendered with its default values into `volcano-system`."""
    from ddpjob_devcluster.controlplane.install import helm

    folder = build.module_dir(build.VOLCANO) / "installer" / "helm" / "chart" / "volcano"
    done = subprocess.run(
        [helm(), "template", RELEASE, str(folder), "--namespace", NAMESPACE], capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        raise StartFailure(f"volcano: helm template of {folder} failed: {done.stderr.strip()[:300]}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def _named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    if not found:
        raise StartFailure(f"volcano: the chart renders no {kind} {name!r}")
    return found[0]


def objects(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The namespace, the CRDs and the scheduler's and controllers' RBAC, as the chart has them."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    crds = [_named(docs, "CustomResourceDefinition", name) for name in CRDS]
    rbac = [
        _named(docs, kind, f"{RELEASE}-{who}{suffix}")
        for who in ("scheduler", "controllers")
        for kind, suffix in (("ServiceAccount", ""), ("ClusterRole", ""), ("ClusterRoleBinding", "-role"))
    ]
    return [namespace, *crds, *rbac]


def scheduler_conf(docs: list[dict[str, Any]], actions: str = ACTIONS) -> dict[str, Any]:
    """The chart's volcano-scheduler.conf with `actions`."""
    data = _named(docs, "ConfigMap", f"{RELEASE}-scheduler-configmap")["data"]
    return {**yaml.safe_load(data["volcano-scheduler.conf"]), "actions": actions}


@dataclasses.dataclass
class Volcano:
    scheduler: Component
    controllers: Component
    conf_path: pathlib.Path
    conf: dict[str, Any]

    @contextlib.contextmanager
    def actions(self, actions: str) -> Iterator[None]:
        """The scheduler runs `actions` inside the block (it reloads its conf file when it
        changes, as it does a ConfigMap's), then its own again."""
        before = self.conf["actions"]
        self._write(actions)
        try:
            yield
        finally:
            self._write(before)

    def _write(self, actions: str) -> None:
        self.conf = {**self.conf, "actions": actions}
        loaded = f"Successfully loaded Scheduler conf, actions: [{' '.join(a.strip() for a in actions.split(','))}]"
        seen = self._log().count(loaded)
        # Renamed into place: the watcher sees one whole file (a Create), never a half-written one.
        staging = self.conf_path.with_name(".staging")
        staging.write_text(yaml.safe_dump(self.conf, sort_keys=False))
        os.replace(staging, self.conf_path)
        self.scheduler.wait_ready(
            lambda: self._log().count(loaded) > seen, RELOAD_SECONDS, f"reloaded with {actions!r}"
        )

    def _log(self) -> str:
        return self.scheduler.log_path.read_text(errors="replace")


def start(plane: Any, apply: Any) -> Volcano:
    """Install the chart's objects (`apply(objects)`, as the cluster's admin), start the
    scheduler and the controllers as `plane`'s components, ready (healthy, the default
    Queue made by the scheduler and opened by the queue controller)."""
    import kubernetes

    folder = build.build(build.VOLCANO)
    docs = chart()
    apply(objects(docs))
    # A folder of its own: the scheduler watches the conf's whole folder for changes.
    conf = plane.workdir / "volcano" / "volcano-scheduler.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(yaml.safe_dump(scheduler_conf(docs), sort_keys=False))
    api = kubernetes.config.new_client_from_config(str(plane.admin_kubeconfig))
    health = free_port()
    kubeconfig = _kubeconfig(plane, api, "scheduler")
    scheduler = Component(
        "vc-scheduler",
        [
            str(folder / "vc-scheduler"),
            f"--kubeconfig={kubeconfig}",
            f"--scheduler-conf={conf}",
            f"--scheduler-name={SCHEDULER_NAME}",
            "--leader-elect=false",
            "--enable-healthz=true",
            f"--healthz-address=127.0.0.1:{health}",
            "--enable-metrics=false",
            f"--cache-dump-dir={plane.workdir}",
            "--logtostderr",
            "-v=3",
        ],
        plane.logs / "vc-scheduler.log",
        ports=(health,),
        env=_env(plane, kubeconfig),
    )
    plane.components.append(scheduler)
    scheduler.wait_ready(
        lambda: _get(f"http://127.0.0.1:{health}/healthz") == "ok" and _queue(api) is not None,
        READY_SECONDS,
        f"healthy with its {DEFAULT_QUEUE!r} Queue made",
    )
    health = free_port()
    kubeconfig = _kubeconfig(plane, api, "controllers")
    controllers = Component(
        "vc-controller-manager",
        [
            str(folder / "vc-controller-manager"),
            f"--kubeconfig={kubeconfig}",
            f"--controllers={','.join(CONTROLLERS)}",
            f"--scheduler-name={SCHEDULER_NAME}",
            "--leader-elect=false",
            "--enable-healthz=true",
            f"--healthz-address=127.0.0.1:{health}",
            "--logtostderr",
            "-v=2",
        ],
        plane.logs / "vc-controller-manager.log",
        ports=(health,),
        env=_env(plane, kubeconfig),
    )
    plane.components.append(controllers)
    controllers.wait_ready(
        lambda: (
            _get(f"http://127.0.0.1:{health}/healthz") == "ok"
            and ((_queue(api) or {}).get("status") or {}).get("state") == "Open"
        ),
        READY_SECONDS,
        f"healthy with the {DEFAULT_QUEUE!r} Queue Open",
    )
    return Volcano(scheduler, controllers, conf, scheduler_conf(docs))


def _env(plane: Any, kubeconfig: pathlib.Path) -> dict[str, str]:
    # Its klog level socket goes into the plane's folder, not a shared /tmp/klog-socks;
    # KUBECONFIG for the device plugins' own clients (HAMi vGPU reads it, not the flag).
    return dict(os.environ, DEBUG_SOCKET_DIR=str(plane.workdir / "volcano-klog"), KUBECONFIG=str(kubeconfig))


def _kubeconfig(plane: Any, api: Any, who: str) -> pathlib.Path:
    """The chart ServiceAccount's identity, as its Pod's projected token would give it."""
    from ddpjob_devcluster.controlplane.install import service_account_token

    account = f"{RELEASE}-{who}"
    token = service_account_token(api, account, NAMESPACE)
    return plane.token_kubeconfig(
        plane.workdir / f"{account}.kubeconfig",
        token,
        f"system:serviceaccount:{NAMESPACE}:{account}",
        namespace=NAMESPACE,
    )


def _queue(api: Any, name: str = DEFAULT_QUEUE) -> dict[str, Any] | None:
    import kubernetes

    try:
        return json_object(
            kubernetes.client.CustomObjectsApi(api).get_cluster_custom_object(
                "scheduling.volcano.sh", "v1beta1", "queues", name
            )
        )
    except kubernetes.client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode().strip()
