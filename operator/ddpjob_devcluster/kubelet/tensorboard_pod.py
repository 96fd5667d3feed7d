"""How the process kubelet runs a job's TensorBoard Pod (`spec.tensorboard`,
render/tensorboard.py): its one container, `tensorboard`, as a local process tree, started
as a trainer's is (`ddpjob.local.container`: the Pod's command found on PATH or beside
this Python, its env, the container's tag, die-with-parent), with what one machine lacks
substituted:

- a volume's mount path becomes a local directory wherever it appears in the container's
  args and env: the checkpoint claim's becomes the job's checkpoint directory, the one
  its trainer Pods write into (`ProcessKubelet.checkpoint_dir`), so TensorBoard reads
  their event files; an emptyDir's (its `/tmp`) a directory in the Pod's own;
- `--bind_all` becomes `--host <Pod IP>`: every Pod shares this machine, so each binds
  its own address only, as a trainer's launcher binds its progress port, and two jobs'
  TensorBoards never collide on port 6006. The Pod's IP is the one the kubelet gives
  every Pod (a 127/8 address, or the demo's Pod CIDR in its own network).

Not emulated (docs/divergences.md, K9): the readinessProbe (the Pod is Ready once its
process runs), the read-only root, the user, the image (the command must be installed
here: the development venv has TensorBoard). It gets none of the trainer's contract
variables: it is not one of the gang's Pods.
"""

from __future__ import annotations

import copy
import pathlib
from collections.abc import Mapping
from typing import Any

from ddpjob.api import tensorboard
from ddpjob.local.container import start_container
from ddpjob.local.node import LocalNode, Started
from ddpjob.local.progress_view import loopback_address
from ddpjob.render.tensorboard import CONTAINER

# The node executor runs the container of the trainer's name (container.trainer_container).
_RUN_AS = "trainer"


def is_tensorboard(pod: Mapping[str, Any]) -> bool:
    """A job's TensorBoard Pod: the operator's label, and its one container."""
    labels = pod["metadata"].get("labels") or {}
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    return tensorboard.LABEL_FOR in labels and names == [CONTAINER]


def job_of(pod: Mapping[str, Any]) -> str:
    return str(pod["metadata"]["labels"][tensorboard.LABEL_FOR])


def container(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod["spec"]["containers"][0]  # is_tensorboard: the only one


def mounts(pod: Mapping[str, Any], checkpoint: pathlib.Path | None, pod_dir: pathlib.Path) -> dict[str, str]:
    """Each mount path of the container and the local directory standing in for it."""
    volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
    found: dict[str, str] = {}
    for mount in container(pod).get("volumeMounts") or []:
        name, path = mount.get("name"), str(mount.get("mountPath") or "")
        if name == "checkpoint" and checkpoint is not None:
            found[path] = str(checkpoint)
        elif "emptyDir" in (volumes.get(name) or {}):
            local = pod_dir / "volumes" / str(name)
            local.mkdir(parents=True, exist_ok=True)
            found[path] = str(local)
    return found


def localize(value: str, mapped: Mapping[str, str]) -> str:
    """`value` with a mount path at its head replaced by its local directory."""
    for path, local in mapped.items():
        head = path.rstrip("/")
        if value == head or value.startswith(head + "/"):
            return local + value[len(head) :]
    return value


def local_args(args: list[str], mapped: Mapping[str, str], ip: str) -> list[str]:
    out = []
    for arg in args:
        out += ["--host", ip] if arg == "--bind_all" else [localize(arg, mapped)]
    return out


def start(
    node: LocalNode,
    pod: Mapping[str, Any],
    checkpoint: pathlib.Path | None,
    *,
    out: Any,
    pod_dir: pathlib.Path,
    tag: str,
) -> Started:
    """Start the TensorBoard container on `node`; LocalRunError (or OSError) when it cannot."""
    ip = (node.addresses or loopback_address)()
    mapped = mounts(pod, checkpoint, pod_dir)
    view: dict[str, Any] = copy.deepcopy(dict(pod))
    board = view["spec"]["containers"][0]
    board["name"] = _RUN_AS
    board["args"] = local_args(list(board.get("args") or []), mapped, ip)
    board["env"] = [
        {**e, "value": localize(str(e["value"]), mapped)} if "value" in e else e for e in board.get("env") or []
    ]
    proc = start_container(view, out=out, cwd=str(pod_dir), tag=node.tag_prefix + tag, preexec=node.preexec)
    return Started(proc, ip)
