"""Pure rendering: a DDPJob becomes its headless Service and one Pod per node.

Every user value goes through `| tojson` (JSON is valid YAML), so no name or env value
can change the structure of what is rendered. The operator, `ddpjob render`, the local
runner and the tests all call these functions.
"""

from __future__ import annotations

import functools
from typing import Any

import jinja2
import yaml

from ddpjob import contract
from ddpjob.api import names
from ddpjob.api.spec import DDPJob
from ddpjob.render import gang, skeleton
from ddpjob.render.merge import merge_pod_template


@functools.lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("ddpjob.render", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        # The templates ship in the package and never change under a running process:
        # no stat of the file per render.
        auto_reload=False,
    )
    skeleton.install(env)
    return env


def _render(template: str, **values: Any) -> dict[str, Any]:
    obj = skeleton.render(_env(), template, **values)
    if not isinstance(obj, dict):
        raise TypeError(f"template {template} rendered {type(obj).__name__}, not one object")
    return obj


def job_labels(job: DDPJob) -> dict[str, str]:
    return {names.LABEL_JOB_NAME: job.name, "app.kubernetes.io/managed-by": "ddpjob-operator"}


def pod_labels(job: DDPJob, node_rank: int, restart_count: int) -> dict[str, str]:
    return {
        **job_labels(job),
        names.LABEL_NODE_RANK: str(node_rank),
        names.LABEL_RESTART_COUNT: str(restart_count),
    }


def owner_references(job: DDPJob) -> list[dict[str, Any]]:
    # A job read from a file has no uid yet: the operator always has one.
    if not job.uid:
        return []
    return [
        {
            "apiVersion": names.API_VERSION,
            "kind": names.KIND,
            "name": job.name,
            "uid": job.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def contract_env(job: DDPJob, node_rank: int, restart_count: int = 0) -> list[dict[str, str]]:
    """The environment contract (`ddpjob.contract`) for one Pod of the gang."""
    return contract.pod_env(job, names.pod_fqdn(job.name, job.namespace, 0), node_rank, restart_count)


def _resources(job: DDPJob) -> dict[str, Any]:
    res = {k: dict(v) for k, v in job.resources.items()}
    if job.gpus_per_node:
        # Extended resources must be equal in requests and limits.
        for key in ("limits", "requests"):
            res.setdefault(key, {})[job.gpu_resource] = job.gpus_per_node
    return res


def _volumes(job: DDPJob) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    shm: dict[str, Any] = {"medium": "Memory"}
    if job.shm_size is not None:
        shm["sizeLimit"] = job.shm_size
    # Docker's 64 MB /dev/shm default breaks DataLoader workers and NCCL.
    volumes = [{"name": "dshm", "emptyDir": shm}, {"name": "ddpjob-progress", "emptyDir": {}}]
    mounts = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        # The progress record's home: writable even under a read-only root filesystem.
        {"name": "ddpjob-progress", "mountPath": contract.PROGRESS_DIR},
    ]
    if job.checkpoint:
        source = (
            {"persistentVolumeClaim": {"claimName": job.checkpoint.claim_name}}
            if job.checkpoint.claim_name
            else dict(job.checkpoint.volume or {})
        )
        volumes.append({"name": "checkpoint", **source})
        mounts.append({"name": "checkpoint", "mountPath": job.checkpoint.mount_path})
    return volumes, mounts


# The container half of the restricted Pod Security Standard; the template's own
# securityContext fields win (merge.py), and sidecars get the same defaults.
CONTAINER_SECURITY_CONTEXT = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def render_service(job: DDPJob) -> dict[str, Any]:
    return _render(
        "service.yaml.j2",
        name=names.service_name(job.name),
        namespace=job.namespace,
        labels=job_labels(job),
        owner_references=owner_references(job),
        selector={names.LABEL_JOB_NAME: job.name},
        port=job.port,
    )


def render_pod(
    job: DDPJob, node_rank: int, restart_count: int = 0, options: gang.GangOptions = gang.DEFAULT_OPTIONS
) -> dict[str, Any]:
    volumes, mounts = _volumes(job)
    pod = _render(
        "pod.yaml.j2",
        name=names.pod_name(job.name, node_rank),
        namespace=job.namespace,
        service=names.service_name(job.name),
        labels=pod_labels(job, node_rank, restart_count),
        owner_references=owner_references(job),
        image=job.image,
        image_pull_policy=job.image_pull_policy,
        command=list(job.command) if job.command else None,
        args=list(job.args),
        working_dir=job.working_dir,
        env=contract_env(job, node_rank, restart_count) + [dict(e) for e in job.env],
        port=job.port,
        progress_port=contract.DEFAULT_PROGRESS_PORT,
        progress_port_name=contract.PROGRESS_PORT_NAME,
        resources=_resources(job),
        volume_mounts=mounts,
        volumes=volumes,
        container_security_context=CONTAINER_SECURITY_CONTEXT,
    )
    return gang.apply_to_pod(merge_pod_template(pod, job.template), job, restart_count, options)


def with_notice_token(pod: dict[str, Any], job: DDPJob, token: str) -> dict[str, Any]:
    """An elastic job's rendered Pod with the key of the notices to it (contract.NOTICE_TOKEN),
    which only the operator or `ddpjob run` knows: `ddpjob render` leaves it out."""
    if job.elastic is not None:
        for container in pod["spec"]["containers"]:
            if container.get("name") == names.TRAINER_CONTAINER:
                container.setdefault("env", []).append({"name": contract.NOTICE_TOKEN, "value": token})
    return pod


def render_pod_group(job: DDPJob, restart_count: int = 0) -> dict[str, Any] | None:
    """The PodGroup of one gang attempt (spec.scheduling.gang), or None."""
    if not gang.has_pod_group(job):
        return None
    # One Pod stands for all: the Pods of a gang differ only in names and env.
    return gang.render_pod_group(
        job, restart_count, render_pod(job, 0, restart_count), owner_references(job), job_labels(job)
    )


def render(
    job: DDPJob, restart_count: int = 0, options: gang.GangOptions = gang.DEFAULT_OPTIONS
) -> list[dict[str, Any]]:
    """Everything the operator creates for a job, in its order: the PodGroup (the
    scheduler needs it before the Pods), the Service, the Pods."""
    group = render_pod_group(job, restart_count)
    return (
        ([group] if group else [])
        + [render_service(job)]
        + [render_pod(job, i, restart_count, options) for i in range(job.nodes)]
    )


def to_yaml_stream(objects: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False)
