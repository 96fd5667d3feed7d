"""Pure rendering of a job's TensorBoard (`spec.tensorboard`): a Deployment of one Pod
serving the checkpoint volume's event files, a Service in front of it, and a
NetworkPolicy that admits nothing to that Pod over the Pod network (port-forward and the
kubelet's probe do not come that way).

All are owned by the job (the garbage collector removes them with it, at its TTL too),
and the Pod meets the restricted Pod Security Standard: non-root, no privilege
escalation, every capability dropped, the RuntimeDefault seccomp profile, a read-only
root filesystem, no service account token. It mounts the checkpoint volume read-only:
TensorBoard only reads what the trainer's rank 0 writes. What it runs (the image, which
must carry TensorBoard and ddpjob_trainer: the trainer images do) and its resources are the
operator's configuration (the chart's `tensorboard` values), not the job's.

Plain dictionaries rather than a jinja2 template: one object per job, no per-Pod cost to
save, and no user text is ever parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ddpjob.api import tensorboard
from ddpjob.api.spec import DDPJob
from ddpjob.render.objects import owner_references
from ddpjob.version import trainer_image

CONTAINER = "tensorboard"


@dataclass(frozen=True)
class TensorBoardConfig:
    """The operator's choice of what runs TensorBoard (operator/settings.py reads it)."""

    image: str = field(default_factory=lambda: trainer_image("cpu"))
    image_pull_policy: str | None = None  # None: the cluster's default
    resources: Mapping[str, Any] = field(
        default_factory=lambda: {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
    )


DEFAULT_CONFIG = TensorBoardConfig()


def labels(job: DDPJob) -> dict[str, str]:
    return {
        tensorboard.LABEL_FOR: job.name,
        "app.kubernetes.io/name": "tensorboard",
        "app.kubernetes.io/managed-by": "ddpjob-operator",
    }


def _metadata(job: DDPJob) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": tensorboard.object_name(job.name),
        "namespace": job.namespace,
        "labels": labels(job),
    }
    if job.uid:
        meta["ownerReferences"] = owner_references(job)
    return meta


def _checkpoint_volume(job: DDPJob) -> dict[str, Any]:
    assert job.checkpoint is not None  # spec.tensorboard needs it (api/tensorboard.py)
    if job.checkpoint.claim_name:
        return {
            "name": "checkpoint",
            "persistentVolumeClaim": {"claimName": job.checkpoint.claim_name, "readOnly": True},
        }
    return {"name": "checkpoint", **dict(job.checkpoint.volume or {})}


def _container(job: DDPJob, config: TensorBoardConfig) -> dict[str, Any]:
    assert job.checkpoint is not None
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": config.image,
        # `tensorboard` with one header dropped, so its page passes the API server's
        # service proxy (ddpjob_trainer/tensorboard_serve.py says why); its own flags.
        "command": ["python", "-m", "ddpjob_trainer.tensorboard_serve"],
        # --bind_all: the Pod's address for the Service and localhost for a port-forward.
        "args": [
            "--logdir",
            tensorboard.log_dir(job.checkpoint.mount_path),
            "--bind_all",
            "--port",
            str(tensorboard.PORT),
        ],
        # TensorBoard keeps its scratch files in the temporary directory; the root is read-only.
        "env": [{"name": "HOME", "value": "/tmp"}, {"name": "TMPDIR", "value": "/tmp"}],
        "ports": [{"name": tensorboard.PORT_NAME, "containerPort": tensorboard.PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/", "port": tensorboard.PORT_NAME}, "periodSeconds": 10},
        "resources": {k: dict(v) for k, v in config.resources.items()},
        "volumeMounts": [
            {"name": "checkpoint", "mountPath": job.checkpoint.mount_path, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    if config.image_pull_policy:
        container["imagePullPolicy"] = config.image_pull_policy
    return container


def render_deployment(job: DDPJob, config: TensorBoardConfig = DEFAULT_CONFIG) -> dict[str, Any]:
    selector = {tensorboard.LABEL_FOR: job.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(job),
        "spec": {
            "replicas": 1,
            "revisionHistoryLimit": 1,
            # A ReadWriteOnce claim cannot be mounted by two Pods on two nodes: the old
            # Pod goes before the new one starts.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": labels(job)},
                "spec": {
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [_container(job, config)],
                    "volumes": [_checkpoint_volume(job), {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}],
                },
            },
        },
    }


def render_service(job: DDPJob) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(job),
        "spec": {
            "selector": {tensorboard.LABEL_FOR: job.name},
            "ports": [
                {
                    "name": tensorboard.PORT_NAME,
                    "port": tensorboard.PORT,
                    "targetPort": tensorboard.PORT_NAME,
                    "protocol": "TCP",
                }
            ],
        },
    }


def render_network_policy(job: DDPJob) -> dict[str, Any]:
    """No ingress to the TensorBoard Pod over the Pod network: the page is the job's curves,
    run names and hyperparameters, and a ClusterIP Service answers any Pod of the cluster.
    `kubectl port-forward` still reaches it: the kubelet connects inside the Pod's own network
    namespace, which no NetworkPolicy filters; so does the kubelet's readiness probe, from
    the Pod's node, which a NetworkPolicy always admits. The API server's service proxy
    (`ddpjob tensorboard --via proxy`) comes over the Pod network from the API server's
    address, which differs per cluster: a cluster that uses it adds a NetworkPolicy of its
    own admitting that address (NetworkPolicies add up; docs/threat-model.md has one)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(job),
        "spec": {
            "podSelector": {"matchLabels": {tensorboard.LABEL_FOR: job.name}},
            "policyTypes": ["Ingress"],
            "ingress": [],
        },
    }


def render(job: DDPJob, config: TensorBoardConfig = DEFAULT_CONFIG) -> list[dict[str, Any]]:
    """The job's TensorBoard objects, the NetworkPolicy first (its Pod never runs without
    it), then the Service; none unless spec.tensorboard is on (with the checkpoint volume
    the API requires for it)."""
    if not (job.checkpoint is not None and job.checkpoint.tensorboard):
        return []
    return [render_network_policy(job), render_service(job), render_deployment(job, config)]
