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
from ddpjob.api.checker import show
from ddpjob.api.elastic import MAX_NODES
from ddpjob.api.launchers import names_a_launcher
from ddpjob.cli import pytorchjob_policies, pytorchjob_torchrun
from ddpjob.cli.conversion import MAX_GPUS, MAX_NPROC, Conversion

API_VERSION = "kubeflow.org/v1"
KIND = "PyTorchJob"
CONTAINER = "pytorch"  # the training operator's container name
PORT_NAME = "pytorchjob-port"
GANGS = ("none", "kubernetes", "volcano", "coscheduling", "kueue")
RESTART_POLICIES = {"OnFailure": "OnFailure", "ExitCode": "ExitCode", "Never": "Never"}
# Container fields that become spec fields; the rest stay in spec.template's trainer container.
LIMITS = ("limits", "requests")
REPLICAS = "spec.pytorchReplicaSpecs"
OBJECTS = ("pytorchReplicaSpecs", "elasticPolicy", "runPolicy")  # spec fields that are objects
LIFTED = {
    "image": "image",
    "command": "command",
    "args": "args",
    "env": "env",
    "workingDir": "workingDir",
    "imagePullPolicy": "imagePullPolicy",
}


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


def _shm(c: Conversion, pod: dict[str, Any], container: dict[str, Any], spec: dict[str, Any], base: str) -> None:
    """A memory-backed emptyDir at /dev/shm (the usual PyTorchJob fix for a small /dev/shm)
    is what every DDPJob Pod has: its sizeLimit becomes shmSize."""
    mounts = c.objects(container.get("volumeMounts"), f"{base}.containers[trainer].volumeMounts")
    mounts = [m for m in mounts if m.get("mountPath") == "/dev/shm"]
    if len(mounts) != 1:
        return
    volumes = c.objects(pod.get("volumes"), f"{base}.volumes")
    volume = next((v for v in volumes if v.get("name") == mounts[0].get("name")), None)
    empty = (volume or {}).get("emptyDir")
    if volume is None or not isinstance(empty, Mapping) or empty.get("medium") != "Memory":
        return
    if empty.get("sizeLimit") is not None:
        spec["shmSize"] = empty["sizeLimit"]
    container["volumeMounts"] = [m for m in container["volumeMounts"] if m is not mounts[0]]
    pod["volumes"] = [v for v in pod["volumes"] if v is not volume]
    c.notes.append("dropped the /dev/shm emptyDir: every DDPJob Pod has a memory-backed /dev/shm (shmSize)")


def _container(c: Conversion, template: Mapping[str, Any], base: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Lift the `pytorch` container's fields into `spec`; return what stays as spec.template."""
    if not isinstance(template, Mapping) or not isinstance(template.get("spec") or {}, Mapping):
        c.err(base, f"must be a Pod template object (got {show(template)})")
        return {}
    rest = copy.deepcopy(dict(template))
    pod = rest["spec"] = dict(rest.get("spec") or {})
    said = len(c.errors)
    containers = c.objects(pod.get("containers"), f"{base}.spec.containers")
    index = next((i for i, k in enumerate(containers) if k.get("name") == CONTAINER), None)
    if index is None and len(c.errors) > said:  # not a list: said once
        return rest
    if index is None:
        c.err(f"{base}.spec.containers", f"has no container named {CONTAINER!r} (the one the training operator runs)")
        return rest
    container = containers[index]
    for field, target in LIFTED.items():
        if field in container:
            spec[target] = container.pop(field)
    resources = container.pop("resources", None) or {}
    where = f"{base}.spec.containers[{index}].resources"
    if not isinstance(resources, Mapping) or not all(isinstance(resources.get(p) or {}, Mapping) for p in LIMITS):
        c.err(where, f"must be an object of limits and requests (got {show(resources)})")
        resources = {}
    gpus = {k: v for part in LIMITS for k, v in (resources.get(part) or {}).items() if str(k).endswith("/gpu")}
    for resource, count in gpus.items():
        if len(gpus) > 1 or any((resources.get(p) or {}).get(resource, count) != count for p in ("limits", "requests")):
            c.err(
                f"{base}.spec.containers[{index}].resources",
                f"{resource}: one GPU resource, the same in limits and requests",
            )
            break
        part = next(p for p in LIMITS if resource in (resources.get(p) or {}))
        spec["gpusPerNode"] = c.count(count, f"{where}.{part}.{resource}", 0, MAX_GPUS, text=True)
        if resource != names.DEFAULT_GPU_RESOURCE:
            spec["gpuResource"] = resource
    kept = {p: {k: v for k, v in (resources.get(p) or {}).items() if k not in gpus} for p in LIMITS}
    if any(kept.values()):
        spec["resources"] = {p: v for p, v in kept.items() if v}
    ports = c.objects(container.get("ports"), f"{base}.spec.containers[{index}].ports")
    ours = [p for p in ports if p.get("name") == PORT_NAME]
    if ours:
        spec["port"] = ours[0].get("containerPort")
        container["ports"] = [p for p in ports if p is not ours[0]] or None
    _shm(c, pod, container, spec, f"{base}.spec")
    if pod.pop("restartPolicy", None) is not None:
        c.notes.append(f"dropped {base}.spec.restartPolicy: the operator sets each Pod's (Never) and restarts the gang")
    container["name"] = names.TRAINER_CONTAINER
    containers[index] = {k: v for k, v in container.items() if v not in (None, [], {})}
    if list(containers[index]) == ["name"] and len(containers) == 1:
        del pod["containers"]
    return {k: v for k, v in rest.items() if v} if rest.get("spec") or rest.get("metadata") else {}


def _nproc(c: Conversion, raw: Any, spec: dict[str, Any], path: str) -> None:
    """spec.nprocPerNode from the PyTorchJob's (None: unset, which the training operator
    makes `auto`, as it does here)."""
    gpus = spec.get("gpusPerNode") or 0
    argv = [w for k in ("command", "args") if isinstance(spec.get(k), list) for w in spec[k] if isinstance(w, str)]
    unset = raw is None
    raw = "auto" if unset else raw
    if isinstance(raw, int) or (isinstance(raw, str) and raw.isascii() and raw.isdigit()):
        spec["nprocPerNode"] = c.count(raw, path, 1, MAX_NPROC, text=True)
    elif raw in ("auto", "gpu") and gpus:
        spec["nprocPerNode"] = "auto"  # one process per GPU, as torchrun's auto on the Pod's GPUs
    elif raw == "auto":
        # A plain program runs once per Pod either way (torchrun's value is never read);
        # under torchrun, auto on CPU is a process per core of whatever node: said, then 1.
        spec["nprocPerNode"] = 1
        if names_a_launcher(argv):
            said = "unset, so auto (the PyTorchJob default)" if unset else "auto"
            c.notes.append(
                f"{path}: {said} starts a torchrun process per CPU core of the node a Pod lands on, which no "
                "spec can hold; the DDPJob runs 1 per node (set spec.nprocPerNode for more)"
            )
    elif raw == "cpu":
        c.err(path, "'cpu': torchrun starts one process per CPU core of the node; give a number")
    elif raw == "gpu":
        c.err(path, "'gpu' without GPUs fails in torchrun; give a number, or request GPUs")
    else:
        c.err(path, f"must be a number, auto, gpu or cpu (got {show(raw)})")


def convert(body: Any, gang: str = "none") -> tuple[dict[str, Any], Conversion]:
    """The DDPJob for a PyTorchJob body, and what the conversion found (errors, notes)."""
    c = Conversion()
    if not isinstance(body, Mapping) or body.get("kind") != KIND or body.get("apiVersion") != API_VERSION:
        said = (body.get(k) for k in ("apiVersion", "kind")) if isinstance(body, Mapping) else ()
        got = " ".join(v[:60] if isinstance(v, str) else show(v) for v in said) or type(body).__name__
        c.err("(root)", f"not a {API_VERSION} {KIND} (got {got})")
        return {}, c
    meta, src = body.get("metadata") or {}, body.get("spec") or {}
    for path, value in (("metadata", meta), ("spec", src)):
        if not isinstance(value, Mapping):
            c.err(path, f"must be an object (got {show(value)})")
    for key in OBJECTS if not c.errors else ():
        if not isinstance(src.get(key) or {}, Mapping):
            c.err(f"spec.{key}", f"must be an object (got {show(src[key])})")
    if c.errors:
        return {}, c
    for key in sorted(set(src) - {"nprocPerNode", *OBJECTS}):
        c.err(f"spec.{key}", "has no DDPJob equivalent")
    replicas = _replicas(c, src.get("pytorchReplicaSpecs") or {})
    counts = {k: c.count(r.get("replicas", 1), f"{REPLICAS}.{k}.replicas", 0, MAX_NODES) for k, r in replicas.items()}
    spec: dict[str, Any] = {"nodes": sum(n or 0 for n in counts.values())}
    if counts.get("Master", 1) not in (1, None):
        c.err(f"{REPLICAS}.Master.replicas", "must be 1 (the Master is node 0)")
    first = "Master" if "Master" in replicas else "Worker"  # whose template every node runs
    if "Master" in replicas and "Worker" in replicas:
        for field in ("template", "restartPolicy"):
            where = _first_difference(replicas["Master"].get(field), replicas["Worker"].get(field), "")
            if where is not None:
                c.err(
                    f"{REPLICAS}.Worker.{field}{where}",
                    "differs from the Master's: a DDPJob runs one Pod template on every node",
                )
    elastic = src.get("elasticPolicy") or {}
    if first in replicas:
        policy = replicas[first].get("restartPolicy", "OnFailure")
        if not isinstance(policy, str) or policy not in RESTART_POLICIES:
            c.err(
                f"{REPLICAS}.{first}.restartPolicy",
                f"{show(policy)} has no DDPJob equivalent (OnFailure, ExitCode, Never)",
            )
        spec["restartPolicy"] = RESTART_POLICIES.get(str(policy), "OnFailure")
        base = f"{REPLICAS}.{first}.template"
        template = _container(c, replicas[first].get("template") or {}, base, spec)
        if template:
            spec["template"] = template
        in_command = pytorchjob_torchrun.take_flags(c, spec, f"{base}.spec.containers[0]", bool(elastic))
        if in_command is not None:  # the command's flag wins over PET_NPROC_PER_NODE, as in torchrun
            _nproc(c, in_command, spec, f"{base}.spec.containers[0] --nproc_per_node")
    if "nprocPerNode" not in spec:
        _nproc(c, src.get("nprocPerNode", elastic.get("nProcPerNode")), spec, "spec.nprocPerNode")
    name = meta["name"] if isinstance(meta.get("name"), str) else ""
    pytorchjob_policies.elastic(c, src.get("elasticPolicy"), replicas, spec, name)
    pytorchjob_policies.run_policy(c, src.get("runPolicy") or {}, spec, gang)
    kept = {k: meta[k] for k in ("name", "labels", "annotations") if meta.get(k)}
    if meta.get("namespace"):
        c.notes.append(
            f"dropped metadata.namespace {show(meta['namespace'])}: the DDPJob goes to the namespace it is "
            f"submitted to (`ddpjob submit -n {meta['namespace']}` keeps it)"
        )
    return {"apiVersion": names.API_VERSION, "kind": names.KIND, "metadata": kept, "spec": spec}, c
