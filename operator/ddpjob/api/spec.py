"""The DDPJob model: parse a body, apply the CRD's defaults, and report every bad field.

The same rules live in the CRD (OpenAPI + CEL) so the API server rejects bad objects;
they are checked again here because the object may come from an old API server (one
without the CRD's newer rules), or a file on a laptop. tests/api/test_crd_parity.py keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ddpjob import contract
from ddpjob.api import backend as backend_choice, bounds, names, object_meta
from ddpjob.api.checker import Checker, show, without_nulls
from ddpjob.api.container_fields import Checkpoint, check_checkpoint, check_env, check_resources, check_template_env
from ddpjob.api.elastic import Elastic, check_elastic, gang_minimum, immutable_errors
from ddpjob.api.errors import FieldError, ImmutableFieldError, InvalidSpec
from ddpjob.api.scheduling import Scheduling, check_scheduling

__all__ = ["DDPJob", "FieldError", "ImmutableFieldError", "InvalidSpec", "parse_job"]

BACKENDS = ("nccl", "gloo", "auto")
RESTART_POLICIES = ("OnFailure", "ExitCode", "Never")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")


# Fields whose change would silently reshape a running gang; the CRD marks them too.
# `nodes` may change in an elastic job (within spec.elastic), which re-forms its group.
IMMUTABLE_FIELDS = ("nodes", "nprocPerNode", "backend", "image", "command", "args", "gpusPerNode")

# The defaults of the immutable fields, as the CRD stores them: an update that spells out
# a default (or drops it) is no change, one that moves away from it is.
IMMUTABLE_DEFAULTS = {"nodes": 1, "nprocPerNode": "auto", "backend": "auto", "gpusPerNode": 0}

ROOT_FIELDS = frozenset({"apiVersion", "kind", "metadata", "spec", "status"})

SPEC_FIELDS = frozenset(
    {
        "nodes",
        "nprocPerNode",
        "backend",
        "image",
        "imagePullPolicy",
        "command",
        "args",
        "workingDir",
        "env",
        "resources",
        "gpusPerNode",
        "gpuResource",
        "port",
        "shmSize",
        "restartPolicy",
        "maxRestarts",
        "restartBackoffSeconds",
        "activeDeadlineSeconds",
        "stallTimeoutSeconds",
        "ttlSecondsAfterFinished",
        "suspend",
        "checkpoint",
        "template",
        "scheduling",
        "elastic",
        "tensorboard",
    }
)


MAX_DURATION_SECONDS = 365 * 24 * 3600  # one year


@dataclass(frozen=True)
class DDPJob:
    name: str
    namespace: str
    uid: str
    generation: int
    nodes: int
    nproc_per_node: int  # resolved: 'auto' becomes the GPU count, else 1
    backend: str  # resolved: nccl or gloo
    image: str
    command: tuple[str, ...] | None
    args: tuple[str, ...]
    env: tuple[Mapping[str, Any], ...]
    gpus_per_node: int
    gpu_resource: str
    port: int
    restart_policy: str
    max_restarts: int
    restart_backoff_seconds: int
    suspend: bool
    image_pull_policy: str | None = None
    working_dir: str | None = None
    resources: Mapping[str, Any] = field(default_factory=dict)
    shm_size: str | int | None = None
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    stall_timeout_seconds: int | None = None  # None: no stall detection
    checkpoint: Checkpoint | None = None
    template: Mapping[str, Any] = field(default_factory=dict)
    scheduling: Scheduling = field(default_factory=lambda: Scheduling())
    elastic: Elastic | None = None  # None: a rigid gang
    backend_requested: str = "auto"  # what spec.backend says (backend is what it resolved to)

    @property
    def world_size(self) -> int:
        """Processes at the desired size (an elastic job may train with fewer for a while)."""
        return self.nodes * self.nproc_per_node

    @property
    def min_nodes(self) -> int:
        """Pods the job trains with at least: all of a rigid gang's."""
        return gang_minimum(self.nodes, self.elastic)


def _check_name(c: Checker, metadata: Mapping[str, Any], nodes: int) -> str:
    name = metadata.get("name")
    if name is None or name == "":
        c.err("metadata.name", "is required")
        return ""
    if not isinstance(name, str):
        return ""  # said with every other field the API server cannot decode (object_meta.py)
    limit = names.max_job_name_length(nodes)
    # The job's headless Service is named after it: a DNS-1035 label (a real API server
    # refuses the Service of a job named `1abc`, which a DNS-1123 label would allow).
    if not names.is_dns1035_label(name[: names.MAX_LABEL]) or "\n" in name:
        c.err(
            "metadata.name",
            f"{show(name)} must be a DNS-1035 label: lower case letters, digits and '-', "
            "starting with a letter and ending with a letter or digit (it names the job's Service)",
        )
    elif len(name) > limit:
        c.err(
            "metadata.name",
            f"is {len(name)} characters; with {nodes} nodes it must be at most {limit} "
            f"so that Pod names '<name>-<rank>' fit in {names.MAX_LABEL}",
        )
    return name


def parse_job(body: Mapping[str, Any]) -> DDPJob:
    """Turn a DDPJob body into a resolved model, or raise InvalidSpec with every error."""
    c = Checker()
    if not isinstance(body, Mapping):
        raise InvalidSpec([FieldError("(root)", "must be a DDPJob object")])
    if body.get("kind", names.KIND) != names.KIND:  # another object: its fields are no DDPJob's errors
        what = f"{show(body['kind'])} (apiVersion {show(body.get('apiVersion'))})"
        raise InvalidSpec([FieldError("kind", f"not a DDPJob: this is a {what}")])
    if body.get("apiVersion", names.API_VERSION) != names.API_VERSION:
        c.err("apiVersion", f"must be {names.API_VERSION} (got {show(body.get('apiVersion'))})")
    c.unknown("", body, ROOT_FIELDS)
    metadata = body.get("metadata") or {}
    spec = body.get("spec")
    metadata_ok = isinstance(metadata, Mapping)
    if not metadata_ok:
        c.err("metadata", "must be an object")
        metadata = {}
    # A field the API server cannot decode is refused there before anything else (a 400).
    for bad in object_meta.mismatches(dict(metadata)):
        c.err(bad.path, f"must be {bad.expected} (got {show(bad.value)})")
    if not isinstance(spec, Mapping):
        c.err("spec", "is required and must be an object")
        raise InvalidSpec(c.errors)
    too_deep_or_big = bounds.check(spec)
    if too_deep_or_big:  # nothing below may walk it
        raise InvalidSpec(c.errors + too_deep_or_big)
    spec = without_nulls(spec)

    c.unknown("spec", spec, SPEC_FIELDS)

    nodes = c.integer(spec, "nodes", 1, 1, 1024)
    gpus = c.integer(spec, "gpusPerNode", 0, 0, 64)
    nproc_raw = "auto" if spec.get("nprocPerNode") is None else spec["nprocPerNode"]
    nproc: int | None
    if nproc_raw == "auto":
        nproc = max(gpus or 0, 1)
    else:
        nproc = c.integer(spec, "nprocPerNode", None, 1, 256) if not isinstance(nproc_raw, str) else None
        if isinstance(nproc_raw, str):
            c.err("spec.nprocPerNode", f"must be an integer from 1 to 256 or 'auto' (got {show(nproc_raw)})")
    backend_raw = c.choice(spec, "backend", "auto", BACKENDS)
    backend = backend_choice.resolve(backend_raw, gpus, nproc)  # auto: nccl only with a GPU per process
    if backend_raw == "nccl" and gpus == 0:
        c.err("spec.backend", "nccl needs gpusPerNode > 0 (use gloo or auto on CPU)")
    if backend_raw == "nccl" and gpus is not None and isinstance(nproc_raw, int) and nproc and nproc > gpus:
        c.err("spec.nprocPerNode", f"with nccl every process needs its own GPU, so it must be <= gpusPerNode ({gpus})")

    image = c.string(spec, "image", required=True)
    pull = c.choice(spec, "imagePullPolicy", None, PULL_POLICIES)
    command = c.strings(spec, "command")
    args = c.strings(spec, "args") or ()
    working_dir = c.string(spec, "workingDir")
    env = check_env(c, spec.get("env"))
    resources = check_resources(c, c.mapping(spec, "resources"))
    gpu_resource = c.string(spec, "gpuResource", names.DEFAULT_GPU_RESOURCE)
    port = c.integer(spec, "port", names.DEFAULT_PORT, 1, 65535)
    if port == contract.DEFAULT_PROGRESS_PORT:
        c.err("spec.port", f"{port} is the progress port of the env contract; choose another")
    shm = spec.get("shmSize")
    if shm is not None and (isinstance(shm, bool) or not isinstance(shm, (str, int))):
        c.err("spec.shmSize", f"must be a quantity such as '2Gi' (got {show(shm)})")
    policy = c.choice(spec, "restartPolicy", "OnFailure", RESTART_POLICIES)
    max_restarts = c.integer(spec, "maxRestarts", 3, 0, 1000)
    backoff = c.integer(spec, "restartBackoffSeconds", 10, 0, 3600)
    # Every duration has a bound a user could mean (a year): a larger one would overflow
    # timers and datetime arithmetic and wedge the job.
    deadline = c.integer(spec, "activeDeadlineSeconds", None, 1, MAX_DURATION_SECONDS)
    ttl = c.integer(spec, "ttlSecondsAfterFinished", None, 0, MAX_DURATION_SECONDS)
    stall = c.integer(spec, "stallTimeoutSeconds", None, 10, 604800)
    suspend = spec.get("suspend", False)
    if not isinstance(suspend, bool):
        c.err("spec.suspend", f"must be true or false (got {show(suspend)})")
    checkpoint = check_checkpoint(c, c.mapping(spec, "checkpoint"), spec.get("tensorboard"))
    template = c.mapping(spec, "template") or {}
    if template:
        from ddpjob.api import template_types  # only a job with a template reads its types' data

        c.errors += template_types.check(template)
        check_template_env(c, template)
    elastic = check_elastic(c, c.mapping(spec, "elastic"), nodes if nodes and 1 <= nodes <= 1024 else None)
    scheduling = check_scheduling(
        c,
        c.mapping(spec, "scheduling"),
        gang_minimum(nodes, elastic) if nodes is not None else None,
        elastic is not None,
    )
    # Pod names must fit for every size the job may take.
    most = elastic.max_nodes if elastic else nodes
    name = _check_name(c, metadata, most if most and 1 <= most <= 1024 else 1) if metadata_ok else ""
    namespace = metadata.get("namespace") or "default"
    if isinstance(namespace, str) and not names.is_dns1123_label(namespace):
        c.err("metadata.namespace", f"{show(namespace)} must be a DNS-1123 label")

    if c.errors:
        raise InvalidSpec(c.errors)
    # No error: every field with a default or marked required was read.
    assert nodes is not None and nproc is not None and backend is not None and image is not None
    assert gpus is not None and gpu_resource is not None and port is not None and policy is not None
    assert max_restarts is not None and backoff is not None
    return DDPJob(
        name=name,
        namespace=namespace,
        uid=str(metadata.get("uid", "")),
        # Server-set; whatever a file says there is ignored, as the API server ignores it.
        generation=int(metadata["generation"]) if type(metadata.get("generation")) is int else 0,
        nodes=nodes,
        nproc_per_node=nproc,
        backend=backend,
        image=image,
        command=command,
        args=args,
        env=env,
        gpus_per_node=gpus,
        gpu_resource=gpu_resource,
        port=port,
        restart_policy=policy,
        max_restarts=max_restarts,
        restart_backoff_seconds=backoff,
        suspend=suspend,
        image_pull_policy=pull,
        working_dir=working_dir,
        resources=resources,
        shm_size=shm,
        active_deadline_seconds=deadline,
        ttl_seconds_after_finished=ttl,
        stall_timeout_seconds=stall,
        checkpoint=checkpoint,
        template=dict(template),
        scheduling=scheduling,
        elastic=elastic,
        backend_requested=backend_raw or "auto",
    )


def validate(body: Mapping[str, Any]) -> list[FieldError]:
    try:
        parse_job(body)
    except InvalidSpec as exc:
        return exc.errors
    return []


def validate_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """Errors of `new`, plus changes to fields that cannot change under a running gang."""
    errors = validate(new)
    old_spec, new_spec = (
        without_nulls(b.get("spec")) if isinstance(b.get("spec"), Mapping) else {} for b in (old, new)
    )
    both_elastic = old_spec.get("elastic") is not None and new_spec.get("elastic") is not None
    for key in IMMUTABLE_FIELDS:
        if key == "nodes" and both_elastic:
            continue
        default = IMMUTABLE_DEFAULTS.get(key)
        if old_spec.get(key, default) != new_spec.get(key, default):
            errors.append(ImmutableFieldError(f"spec.{key}"))
    errors += [ImmutableFieldError(path, message) for path, message in immutable_errors(old_spec, new_spec)]
    return errors
