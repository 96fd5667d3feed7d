"""scheduler-plugins' coscheduling as a second scheduler beside a `ControlPlane`.

What its own install docs do (doc/install.md, "as a second scheduler"; the
as-a-second-scheduler chart): the `scheduling.x-k8s.io` CRDs from the module's manifests
(PodGroup, and ElasticQuota, which its controller also reconciles), the chart's RBAC, its
controller (PodGroup status: phase, running, succeeded, failed), and a kube-scheduler
built from the module (`build.SCHEDULER_PLUGINS`) with one profile,
`scheduler-plugins-scheduler`, whose queue sort and multi-point plugin is Coscheduling
(the module's `manifests/coscheduling/scheduler-config.yaml`). Pods that name that
scheduler and carry the `scheduling.x-k8s.io/pod-group` label are placed all or none.

The controller matters for more than status: Coscheduling (v0.33.5) asks to be woken
only by Pod adds and PodGroup changes, so a gang it rejected is retried when a
PodGroup's status changes (another gang's Pods ending) rather than only at the
scheduler's 5-minute flush. Both processes are the plane's components and stop with it.
"""

from __future__ import annotations

import json
import pathlib
import ssl
import urllib.request
from typing import Any

import yaml

from ddpjob.local.ports import free_port
from ddpjob_devcluster.controlplane import build
from ddpjob_devcluster.controlplane.process import Component

SCHEDULER_NAME = "scheduler-plugins-scheduler"
USER = "system:scheduler-plugins-scheduler"
READY_SECONDS = 60
# Waiting for the rest of a gang at Permit before the placed members are released.
PERMIT_WAIT_SECONDS = 10


def crds() -> list[dict[str, Any]]:
    manifests = build.module_dir(build.SCHEDULER_PLUGINS) / "manifests"
    return [
        yaml.safe_load((manifests / folder / "crd.yaml").read_text())
        for folder in ("coscheduling", "capacityscheduling")
    ]


def rbac() -> list[dict[str, Any]]:
    """kube-scheduler's own role plus what the chart's scheduler and controller roles add."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "ddpjob-dev:scheduler-plugins"},
        "rules": [
            {
                "apiGroups": ["scheduling.x-k8s.io"],
                "resources": ["podgroups", "podgroups/status", "elasticquotas", "elasticquotas/status"],
                "verbs": ["get", "list", "watch", "create", "delete", "update", "patch"],
            },
            {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update"]},
        ],
    }
    bindings = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"ddpjob-dev:scheduler-plugins:{suffix}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
        }
        for suffix, name in (
            ("own", "ddpjob-dev:scheduler-plugins"),
            ("kube", "system:kube-scheduler"),
            ("volumes", "system:volume-scheduler"),
        )
    ]
    # Its serving endpoint reads the client CA from kube-system, as kube-scheduler's does.
    reader = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "ddpjob-dev:scheduler-plugins:authentication-reader", "namespace": "kube-system"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "extension-apiserver-authentication-reader",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
    }
    return [role, *bindings, reader]


def scheduler_config(kubeconfig: pathlib.Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "profiles": [
            {
                "schedulerName": SCHEDULER_NAME,
                "plugins": {
                    "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                    "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
                },
                "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": PERMIT_WAIT_SECONDS}}],
            }
        ],
    }


def start(plane: Any, apply: Any) -> Component:
    """Install the CRDs and RBAC (`apply(objects)`, as the cluster's admin), start the
    controller and the scheduler as `plane`'s components; returns the scheduler, ready."""
    folder = build.build(build.SCHEDULER_PLUGINS)
    apply([*crds(), *rbac()])
    kubeconfig = plane.client_kubeconfig("scheduler-plugins", USER)
    probe = free_port()
    controller = Component(
        "scheduler-plugins-controller",
        [
            str(folder / "scheduler-plugins-controller"),
            f"--kubeconfig={kubeconfig}",
            f"--probeAddr=127.0.0.1:{probe}",
            "--metricsAddr=0",
        ],
        plane.logs / "scheduler-plugins-controller.log",
        ports=(probe,),
    )
    plane.components.append(controller)
    controller.wait_ready(lambda: _get(f"http://127.0.0.1:{probe}/readyz") == "ok", READY_SECONDS, "ready (/readyz)")
    config = plane.workdir / "scheduler-plugins.yaml"
    config.write_text(json.dumps(scheduler_config(kubeconfig)))
    port = free_port()
    component = Component(
        "scheduler-plugins-scheduler",
        [
            str(folder / "scheduler-plugins-scheduler"),
            f"--config={config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={plane.workdir / 'scheduler-plugins-certs'}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--v=1",
        ],
        plane.logs / "scheduler-plugins-scheduler.log",
        ports=(port,),
    )
    plane.components.append(component)
    # /readyz (always allowed without credentials) turns ok once its informers synced.
    component.wait_ready(lambda: _get(f"https://127.0.0.1:{port}/readyz") == "ok", READY_SECONDS, "ready (/readyz)")
    return component


def _get(url: str) -> str:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # the scheduler's self-signed serving cert
    with urllib.request.urlopen(url, context=context, timeout=5) as response:
        return response.read().decode().strip()
