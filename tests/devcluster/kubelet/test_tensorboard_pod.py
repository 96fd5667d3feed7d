"""The process kubelet runs a job's TensorBoard Pod (`spec.tensorboard`, rendered by
`ddpjob.render.tensorboard`): its one container, `tensorboard`, on the job's checkpoint
directory (the one its trainer Pods write into), listening at the Pod's IP; and it stops
it when the Pod is deleted (docs/divergences.md, K9)."""

from __future__ import annotations

import json
import pathlib
import time
import urllib.request
from typing import Any

import pytest

from ddpjob.api import spec
from ddpjob.render import tensorboard as render_tensorboard
from ddpjob_devcluster.clusters.client import wait_until
from ddpjob_devcluster.kubelet import tensorboard_pod
from tests.devcluster.kubelet.conftest import KubeletNode
from tests.devcluster.kubelet.test_kubelet import NS
from tests.support.deadlines import PHASE, REACTION, TEST

pytestmark = pytest.mark.timeout(TEST)
pytest.importorskip("tensorboard")


def board_pod(name: str = "board", namespace: str = NS) -> dict[str, Any]:
    job = spec.parse_job(
        {
            "apiVersion": "ddpjob.io/v1alpha1",
            "kind": "DDPJob",
            "metadata": {"name": name, "namespace": namespace, "uid": "u-1", "generation": 1},
            "spec": {
                "image": "none",
                "command": ["true"],
                "tensorboard": True,
                "checkpoint": {"claimName": "ckpt", "mountPath": "/ckpt"},
            },
        }
    )
    template = render_tensorboard.render_deployment(job)["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        **template,
        "metadata": {**template["metadata"], "name": f"{name}-tensorboard-abc12", "namespace": namespace},
    }


def write_loss(logdir: pathlib.Path, losses: list[float]) -> None:
    """Event files as the trainer's rank 0 writes them: train/loss against the step."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(logdir))
    for step, loss in enumerate(losses, 1):
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="train/loss", simple_value=loss)])
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
    writer.close()


def fetch(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def answered(url: str) -> Any:
    try:
        return fetch(url)
    except OSError:
        return None


def test_the_mount_path_is_mapped_and_bind_all_becomes_the_pods_address(tmp_path) -> None:
    pod = board_pod()
    mapped = tensorboard_pod.mounts(pod, tmp_path / "ckpt", tmp_path / "pod")
    assert mapped == {"/ckpt": str(tmp_path / "ckpt"), "/tmp": str(tmp_path / "pod" / "volumes" / "tmp")}
    args = tensorboard_pod.local_args(pod["spec"]["containers"][0]["args"], mapped, "127.9.8.7")
    assert args == ["--logdir", f"{tmp_path}/ckpt/tensorboard", "--host", "127.9.8.7", "--port", "6006"]
    assert tensorboard_pod.localize("/ckptx/a", mapped) == "/ckptx/a"  # a prefix of a name is not the mount
    assert tensorboard_pod.is_tensorboard(pod) and tensorboard_pod.job_of(pod) == "board"
    trainer = {**pod, "spec": {**pod["spec"], "containers": [{**pod["spec"]["containers"][0], "name": "trainer"}]}}
    assert not tensorboard_pod.is_tensorboard(trainer)


def test_the_tensorboard_pod_serves_the_jobs_event_files_at_its_ip(node: KubeletNode) -> None:
    kubelet = node.kubelet
    write_loss(kubelet.checkpoint_dir("board", node.ns) / "tensorboard", [2.0, 1.5, 1.0])
    pod = board_pod(namespace=node.ns)
    node.create_pod(pod)
    name = pod["metadata"]["name"]
    status = node.wait_phase(name, "Running")
    assert status["containerStatuses"][0]["name"] == "tensorboard"
    ip = status["podIP"]
    assert ip.startswith("127.") and ip != "127.0.0.1"  # its own address, as every Pod's

    # TensorBoard answers at the Pod's IP and reads the trainer's event files from the
    # job's checkpoint directory (its logdir /ckpt/tensorboard, mapped).
    base = f"http://{ip}:6006"
    tags = wait_until(
        lambda: (got := answered(f"{base}/data/plugin/scalars/tags")) and got,
        PHASE,
        "TensorBoard did not answer at the Pod IP",
        lambda: kubelet.logs(name),
    )
    assert "train/loss" in tags["."], tags
    points = fetch(f"{base}/data/plugin/scalars/scalars?run=.&tag=train/loss")
    assert [(p[1], p[2]) for p in points] == [(1, 2.0), (2, 1.5), (3, 1.0)]

    # A deleted Pod's TensorBoard is stopped with it.
    container = kubelet.container(name, node.ns)
    assert container is not None
    node.core.delete_namespaced_pod(name, node.ns)
    wait_until(lambda: not container.running, REACTION, "the TensorBoard outlived its Pod", lambda: kubelet.logs(name))
