"""How the process kubelet starts a Pod's `trainer` container: the Pod's directory (its
log, the progress file standing in for an emptyDir), the job's checkpoint directory
standing in for its RWX volume, and the node executor's start (`ddpjob.local.node`). A
job's TensorBoard Pod runs its one container instead, on the same checkpoint directory
(`tensorboard_pod.py`). A command that cannot start is reported as containerd reports
it: exit code 128, `StartError`.
"""

from __future__ import annotations

import contextlib
import pathlib
import time
from typing import Any

import kubernetes

from ddpjob.api import names
from ddpjob.local.container import LocalRunError, StartError, trainer_container
from ddpjob.local.node import LocalNode
from ddpjob_devcluster.kubelet import tensorboard_pod
from ddpjob_devcluster.kubelet.status import Container, report


def _container(pod: dict[str, Any]) -> Any:
    """The container this kubelet runs: the trainer, or a TensorBoard Pod's one."""
    return tensorboard_pod.container(pod) if tensorboard_pod.is_tensorboard(pod) else trainer_container(pod)


def new_container(pod: dict[str, Any], workdir: pathlib.Path, kubelet_id: str) -> Container:
    """The container of `pod`, not started yet, with its Pod directory made."""
    meta = pod["metadata"]
    namespace, name, uid = meta.get("namespace", "default"), meta["name"], meta["uid"]
    labels = meta.get("labels") or {}
    board = tensorboard_pod.is_tensorboard(pod)
    pod_dir = workdir / "pods" / namespace / f"{name}-{uid[:8]}"
    pod_dir.mkdir(parents=True, exist_ok=True)
    c = Container(
        namespace=namespace,
        pod=name,
        uid=uid,
        job=tensorboard_pod.job_of(pod) if board else labels.get(names.LABEL_JOB_NAME, name),
        attempt=int(labels.get(names.LABEL_RESTART_COUNT, 0)),
        tag=f"{kubelet_id}/{uid}",
        log_path=pod_dir / "trainer.log",
    )
    if board:
        c.name = tensorboard_pod.CONTAINER
    c.times["seen"] = time.time()
    with contextlib.suppress(LocalRunError):
        c.image = _container(pod).get("image") or ""
    return c


def checkpoint_volume(pod: dict[str, Any], path: pathlib.Path) -> pathlib.Path | None:
    """`path` (made) when the container mounts the checkpoint volume, else None."""
    try:
        mounts = _container(pod).get("volumeMounts") or []
    except LocalRunError:
        return None
    if not any(m.get("name") == "checkpoint" for m in mounts):
        return None
    path.mkdir(parents=True, exist_ok=True)
    return path


def start(
    core: kubernetes.client.CoreV1Api,
    node: LocalNode,
    c: Container,
    pod: dict[str, Any],
    checkpoint: pathlib.Path | None,
) -> None:
    """Start `c`'s process on `node` and report the Pod Running, or Failed (StartError)."""
    pod_dir = c.log_path.parent
    c.log_file = open(c.log_path, "a", encoding="utf-8")  # noqa: SIM115 - closed with the container
    try:
        if tensorboard_pod.is_tensorboard(pod):
            started = tensorboard_pod.start(node, pod, checkpoint, out=c.log_file, pod_dir=pod_dir, tag=c.uid)
        else:
            started = node.start(
                pod,
                port=node.port_for((c.namespace, c.job, c.attempt)),
                checkpoint_dir=str(checkpoint) if checkpoint else None,
                progress_file=str(pod_dir / "progress.json"),
                out=c.log_file,
                cwd=str(pod_dir),
                tag=c.uid,
            )
        c.proc, c.ip = started.proc, started.ip
    except (LocalRunError, OSError) as exc:
        # containerd reports a command that cannot start as exit code 128, StartError.
        c.log_file.write(f"[{c.pod}] {StartError.reason}: {exc}\n")
        c.exit_code = StartError.exit_code
        c.times["exited"] = time.time()
        report(core, c, "Failed", exit_code=StartError.exit_code, reason=StartError.reason, message=str(exc))
        c.close_log()
        return
    c.times["started"] = c.proc.started_at
    report(core, c, "Running")
    c.times["running_reported"] = time.time()
