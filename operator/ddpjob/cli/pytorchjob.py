"""A Kubeflow PyTorchJob (`kubeflow.org/v1`) as a DDPJob: every field that maps exactly,
a field error for every one that does not, and a note for each one dropped because
ddpjob sets it itself. docs/pytorchjob.md is the table; `ddpjob convert` the command.

What the training operator does, read from its source (pkg/apis/kubeflow.org/v1 and
pkg/controller.v1/pytorch): replicas default to 1 and restartPolicy to OnFailure;
`nprocPerNode` defaults to `auto`, which torchrun resolves to the visible accelerators,
else the CPU count; each Pod gets MASTER_ADDR (the Master's, Pod 0), MASTER_PORT (the
`pytorch` container's port `pytorchjob-port`, default 23456), WORLD_SIZE (the number of
Pods times `nprocPerNode` where that is a number, else the number of Pods) and RANK (the
Pod's index); an elastic job's min/max replicas default to each other, then to the
Workers' replicas.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ddpjob.api import names
from ddpjob.api.errors import FieldError
from ddpjob.api.launchers import names_a_launcher

API_VERSION = "kubeflow.org/v1"
KIND = "PyTorchJob"
CONTAINER = "pytorch"  # the training operator's container name
PORT_NAME = "pytorchjob-port"
GANGS = ("none", "kubernetes", "volcano", "coscheduling", "kueue")
RESTART_POLICIES = {"OnFailure": "OnFailure", "ExitCode": "ExitCode", "Never": "Never"}
# Container fields that become spec fields; the rest stay in spec.template's trainer container.
LIFTED = {
    "image": "image",
    "command": "command",
    "args": "args",
    "env": "env",
    "workingDir": "workingDir",
    "imagePullPolicy": "imagePullPolicy",
}


class Conversion:
    def __init__(self) -> None:
        self.errors: list[FieldError] = []
        self.notes: list[str] = []

    def err(self, path: str, message: str) -> None:
        self.errors.append(FieldError(path, message))


def _replicas(c: Conversion, specs: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """{'Master': spec, 'Worker': spec}, the keys in any case, as the operator reads them."""
    out: dict[str, Mapping[str, Any]] = {}
    for key, spec in specs.items():
        kind = {"master": "Master", "worker": "Worker"}.get(str(key).lower())
        if kind is None:
            c.err(f"spec.pytorchReplicaSpecs.{key}", "a PyTorchJob has Master and Worker replicas only")
        elif not isinstance(spec, Mapping):
            c.err(f"spec.pytorchReplicaSpecs.{key}", "must be an object")
        else:
            out[kind] = spec
    if not out:
        c.err("spec.pytorchReplicaSpecs", "is required: a Master, Workers, or both")
    return out


def _first_difference(a: Any, b: Any, path: str) -> str | None:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted(set(a) | set(b)):
            found = _first_difference(a.get(key), b.get(key), f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return next(
            (d for i, (x, y) in enumerate(zip(a, b, strict=True)) if (d := _first_difference(x, y, f"{path}[{i}]"))),
            None,
        )
    return None if a == b else path


def _shm(c: Conversion, pod: dict[str, Any], container: dict[str, Any], spec: dict[str, Any]) -> None:
    """A memory-backed emptyDir at /dev/shm (the usual PyTorchJob fix for a small /dev/shm)
    is what every DDPJob Pod has: its sizeLimit becomes shmSize."""
    mounts = [m for m in container.get("volumeMounts") or [] if m.get("mountPath") == "/dev/shm"]
    if len(mounts) != 1:
        return
    volume = next((v for v in pod.get("volumes") or [] if v.get("name") == mounts[0].get("name")), None)
    empty = (volume or {}).get("emptyDir")
    if volume is None or not isinstance(empty, Mapping) or empty.get("medium") != "Memory":
        return
    if empty.get("sizeLimit") is not None:
        spec["shmSize"] = empty["sizeLimit"]
    container["volumeMounts"] = [m for m in container["volumeMounts"] if m is not mounts[0]]
    pod["volumes"] = [v for v in pod["volumes"] if v is not volume]
    c.notes.append("the /dev/shm emptyDir: every DDPJob Pod has a memory-backed /dev/shm (shmSize)")


def _container(c: Conversion, template: Mapping[str, Any], base: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Lift the `pytorch` container's fields into `spec`; return what stays as spec.template."""
    rest = copy.deepcopy(dict(template))
    pod = rest.setdefault("spec", {})
    containers = pod.get("containers") or []
    index = next((i for i, k in enumerate(containers) if isinstance(k, Mapping) and k.get("name") == CONTAINER), None)
    if index is None:
        c.err(f"{base}.spec.containers", f"has no container named {CONTAINER!r} (the one the training operator runs)")
        return rest
    container = containers[index]
    for field, target in LIFTED.items():
        if field in container:
            spec[target] = container.pop(field)
    resources = container.pop("resources", None) or {}
    gpus = {
        k: v for part in ("limits", "requests") for k, v in (resources.get(part) or {}).items() if k.endswith("/gpu")
    }
    for resource, count in gpus.items():
        if len(gpus) > 1 or any((resources.get(p) or {}).get(resource, count) != count for p in ("limits", "requests")):
            c.err(
                f"{base}.spec.containers[{index}].resources",
                f"{resource}: one GPU resource, the same in limits and requests",
            )
            break
        spec["gpusPerNode"] = int(count)
        if resource != names.DEFAULT_GPU_RESOURCE:
            spec["gpuResource"] = resource
    kept = {p: {k: v for k, v in (resources.get(p) or {}).items() if k not in gpus} for p in ("limits", "requests")}
    if any(kept.values()):
        spec["resources"] = {p: v for p, v in kept.items() if v}
    ports = container.get("ports") or []
    ours = [p for p in ports if p.get("name") == PORT_NAME]
    if ours:
        spec["port"] = ours[0].get("containerPort")
        container["ports"] = [p for p in ports if p is not ours[0]] or None
    _shm(c, pod, container, spec)
    if pod.pop("restartPolicy", None) is not None:
        c.notes.append(f"{base}.spec.restartPolicy: the operator sets each Pod's (Never) and restarts the gang")
    container["name"] = names.TRAINER_CONTAINER
    containers[index] = {k: v for k, v in container.items() if v not in (None, [], {})}
    if list(containers[index]) == ["name"] and len(containers) == 1:
        del pod["containers"]
    return {k: v for k, v in rest.items() if v} if rest.get("spec") or rest.get("metadata") else {}


def _nproc(c: Conversion, raw: Any, spec: dict[str, Any], path: str) -> None:
    gpus = spec.get("gpusPerNode", 0)
    argv = [*(spec.get("command") or []), *(spec.get("args") or [])]
    if isinstance(raw, int) or (isinstance(raw, str) and raw.isdigit()):
        spec["nprocPerNode"] = int(raw)
    elif raw in ("auto", "gpu") and gpus:
        spec["nprocPerNode"] = "auto"  # one process per GPU, as torchrun's auto on the Pod's GPUs
    elif raw == "auto" and not names_a_launcher(argv):
        spec["nprocPerNode"] = 1  # a plain program runs once per Pod: torchrun's value is never read
    elif raw in ("auto", "cpu"):
        c.err(path, f"{raw!r}: torchrun starts one process per CPU core of the node; give a number")
    elif raw == "gpu":
        c.err(path, "'gpu' without GPUs fails in torchrun; give a number, or request GPUs")
    else:
        c.err(path, f"must be a number, auto, gpu or cpu (got {raw!r})")


def convert(body: Any, gang: str = "none") -> tuple[dict[str, Any], Conversion]:
    """The DDPJob for a PyTorchJob body, and what the conversion found (errors, notes)."""
    c = Conversion()
    if not isinstance(body, Mapping) or body.get("kind") != KIND or body.get("apiVersion") != API_VERSION:
        got = f"{body.get('apiVersion')} {body.get('kind')}" if isinstance(body, Mapping) else type(body).__name__
        c.err("(root)", f"not a {API_VERSION} {KIND} (got {got})")
        return {}, c
    meta = body.get("metadata") or {}
    src = body.get("spec") or {}
    for key in sorted(set(src) - {"pytorchReplicaSpecs", "elasticPolicy", "nprocPerNode", "runPolicy"}):
        c.err(f"spec.{key}", "has no DDPJob equivalent")
    replicas = _replicas(c, src.get("pytorchReplicaSpecs") or {})
    spec: dict[str, Any] = {"nodes": sum(int(r.get("replicas", 1)) for r in replicas.values())}
    if int(replicas.get("Master", {}).get("replicas", 1)) != 1:
        c.err("spec.pytorchReplicaSpecs.Master.replicas", "must be 1 (the Master is node 0)")
    first = "Master" if "Master" in replicas else "Worker"  # whose template every node runs
    if "Master" in replicas and "Worker" in replicas:
        for field in ("template", "restartPolicy"):
            where = _first_difference(replicas["Master"].get(field), replicas["Worker"].get(field), "")
            if where is not None:
                c.err(
                    f"spec.pytorchReplicaSpecs.Worker.{field}{where}",
                    "differs from the Master's: a DDPJob runs one Pod template on every node",
                )
    if first in replicas:
        policy = replicas[first].get("restartPolicy", "OnFailure")
        if policy not in RESTART_POLICIES:
            c.err(
                f"spec.pytorchReplicaSpecs.{first}.restartPolicy",
                f"{policy!r} has no DDPJob equivalent (OnFailure, ExitCode, Never)",
            )
        spec["restartPolicy"] = RESTART_POLICIES.get(policy, "OnFailure")
        template = _container(
            c, replicas[first].get("template") or {}, f"spec.pytorchReplicaSpecs.{first}.template", spec
        )
        if template:
            spec["template"] = template
    _nproc(
        c,
        src.get("nprocPerNode", (src.get("elasticPolicy") or {}).get("nProcPerNode", "auto")),
        spec,
        "spec.nprocPerNode",
    )
    _elastic(c, src.get("elasticPolicy"), replicas, spec, str(meta.get("name", "")))
    _run_policy(c, src.get("runPolicy") or {}, spec, gang)
    kept = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if meta.get(k)}
    return {"apiVersion": names.API_VERSION, "kind": names.KIND, "metadata": kept, "spec": spec}, c


def _elastic(c: Conversion, policy: Any, replicas: Mapping[str, Any], spec: dict[str, Any], name: str) -> None:
    if policy is None:
        return
    base = "spec.elasticPolicy"
    if "Master" in replicas:
        c.err(base, "with a Master has no exact equivalent: an elastic DDPJob's nodes are all alike (use Workers only)")
    low, high = policy.get("minReplicas"), policy.get("maxReplicas")
    low, high = low or high or spec["nodes"], high or low or spec["nodes"]
    spec["elastic"] = {"minNodes": low, "maxNodes": high}
    if policy.get("rdzvBackend", "c10d") != "c10d":
        c.err(f"{base}.rdzvBackend", f"{policy['rdzvBackend']!r}: a DDPJob's rendezvous is c10d on node 0")
    if policy.get("rdzvPort") is not None:
        spec["port"] = policy["rdzvPort"]
    if policy.get("rdzvId") not in (None, name):
        c.err(f"{base}.rdzvId", "a DDPJob's rendezvous id is the job's name")
    for field in ("rdzvHost", "rdzvConf", "metrics"):
        if policy.get(field):
            what = (
                "the autoscaler's metrics: a DDPJob is resized by changing spec.nodes"
                if field == "metrics"
                else "a DDPJob sets its rendezvous itself (node 0, PET_RDZV_CONF)"
            )
            c.err(f"{base}.{field}", f"has no DDPJob equivalent: {what}")
    if policy.get("standalone"):
        c.err(f"{base}.standalone", "has no DDPJob equivalent: an elastic DDPJob spans its Pods")
    if policy.get("maxRestarts") is not None:
        c.notes.append(
            f"{base}.maxRestarts: torchrun's worker restarts are 4 x maxNodes in a DDPJob (PET_MAX_RESTARTS)"
        )


def _run_policy(c: Conversion, run: Mapping[str, Any], spec: dict[str, Any], gang: str) -> None:
    for src, dst in (
        ("backoffLimit", "maxRestarts"),
        ("activeDeadlineSeconds", "activeDeadlineSeconds"),
        ("ttlSecondsAfterFinished", "ttlSecondsAfterFinished"),
        ("suspend", "suspend"),
    ):
        if run.get(src) is not None:
            spec[dst] = run[src]
    if run.get("cleanPodPolicy") not in (None, "None"):
        c.notes.append(
            f"spec.runPolicy.cleanPodPolicy {run['cleanPodPolicy']}: a DDPJob keeps a finished job's Pods "
            "until the job is deleted (ttlSecondsAfterFinished deletes both)"
        )
    policy = run.get("schedulingPolicy") or {}
    scheduling: dict[str, Any] = {"gang": gang} if gang != "none" else {}
    if policy.get("priorityClass"):
        scheduling["priorityClassName"] = policy["priorityClass"]
    for field, target in (
        ("queue", "queue"),
        ("minAvailable", "minAvailable"),
        ("scheduleTimeoutSeconds", "scheduleTimeoutSeconds"),
    ):
        if policy.get(field) is None:
            continue
        if gang == "none":
            c.err(
                f"spec.runPolicy.schedulingPolicy.{field}",
                "which gang scheduler placed the job is the training "
                "operator's setting, not the file's: say it with --gang (volcano, coscheduling, ...)",
            )
        else:
            scheduling[target] = policy[field]
    if scheduling:
        spec["scheduling"] = scheduling
