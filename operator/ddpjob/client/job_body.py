"""The DDPJob the Python client creates: from a dict, a file, a few arguments, or
TrainerClient's `CustomTrainerContainer`.

Whichever form, the body is checked as `ddpjob submit` checks a file before sending it
(every field, with its path; the template policy of the chart's default operator) and
said what `ddpjob submit` says of it (a command that cannot fill its world, a backend
falling back to gloo). A body without a name gets one drawn here, so the name is known
before the API server sees it (and checked for the length its Pod names need).
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from ddpjob.api import names, notices, template_policy
from ddpjob.api.errors import FieldError
from ddpjob.api.job_file import FileError, load_documents
from ddpjob.api.spec import DDPJob, InvalidSpec, parse_job
from ddpjob.client.backend_configs import CustomTrainerContainer

JobSource = Mapping[str, Any] | str | os.PathLike[str]


def camel(field: str) -> str:
    """`restart_policy` -> `restartPolicy`: the Python spelling of a spec field."""
    head, *rest = field.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def from_arguments(
    image: str,
    command: Sequence[str] | None,
    args: Sequence[str],
    nodes: int,
    nproc_per_node: int | str,
    gpus_per_node: int,
    env: Mapping[str, str],
    spec: Mapping[str, Any],
) -> dict[str, Any]:
    """A body from the few arguments of `train()`; `spec` holds any other field, in
    either spelling (`restart_policy` or `restartPolicy`)."""
    body: dict[str, Any] = {"image": image, "nodes": nodes, "nprocPerNode": nproc_per_node}
    if command is not None:
        body["command"] = list(command)
    if args:
        body["args"] = list(args)
    if gpus_per_node:
        body["gpusPerNode"] = gpus_per_node
    if env:
        body["env"] = [{"name": k, "value": v} for k, v in env.items()]
    body.update({camel(k): v for k, v in spec.items()})
    return {"apiVersion": names.API_VERSION, "kind": names.KIND, "metadata": {}, "spec": body}


# What of `metadata` a new job takes from a dict or file: not what the server set on the
# object it came from (a `Job.raw` read back has a uid, a resourceVersion, ...).
KEPT_METADATA = ("name", "generateName", "namespace", "labels", "annotations")


def from_source(job: JobSource) -> dict[str, Any]:
    """A body from a dict (copied, never changed) or a YAML file of one DDPJob; a status,
    and what the server set in `metadata`, are left out."""
    if isinstance(job, Mapping):
        meta = job.get("metadata")
        kept = {k: v for k, v in meta.items() if k in KEPT_METADATA} if isinstance(meta, Mapping) else meta
        return {**{k: v for k, v in job.items() if k != "status"}, "metadata": kept or {}}
    path = os.fspath(job)
    docs = load_documents(path)
    if len(docs) != 1 or not isinstance(docs[0], Mapping):
        raise FileError(f"{path}: holds {len(docs)} documents; train() creates one DDPJob per call")
    return from_source(docs[0])


def drawn_name(prefix: str = "ddpjob") -> str:
    """A fresh name: the prefix and eight random letters and digits (lower case)."""
    return f"{prefix}-{secrets.token_hex(4)}"


def checked(
    body: dict[str, Any], name: str | None, namespace: str, template_allow: str | None, say_to: str
) -> tuple[dict[str, Any], DDPJob]:
    """The body with its name and namespace set, and its model; or InvalidSpec naming
    every bad field. `name` overrides the body's; a body without one gets one drawn."""
    meta = dict(body.get("metadata") or {})
    if name is not None:
        meta["name"] = name
    elif not meta.get("name"):
        prefix = meta.pop("generateName", None)
        meta["name"] = drawn_name(re.sub(r"[^a-z0-9-]", "", str(prefix or "ddpjob").lower()).strip("-") or "ddpjob")
    meta["namespace"] = namespace
    body = {**body, "metadata": meta}
    job = parse_job(body)
    try:
        allow = template_policy.parse_allowances(template_allow)
    except ValueError as exc:
        raise InvalidSpec([FieldError("template_allow", str(exc))]) from None
    errors = template_policy.check_job(job, allow)
    if errors:
        raise InvalidSpec(errors)
    notices.say(say_to, job)
    return body, job


# TrainerClient's `resources_per_node` key for GPUs (its own spellings): DDPJob's gpusPerNode.
GPU_KEYS = ("gpu", "nvidia.com/gpu")


def from_container(trainer: CustomTrainerContainer) -> dict[str, Any]:
    """A body from TrainerClient's `CustomTrainerContainer`: `num_nodes` nodes of the
    image, `{"gpu": N}` as gpusPerNode, any other resource as the container's requests and
    limits (as TrainerClient sets both)."""
    resources = dict(trainer.resources_per_node or {})
    gpus = [resources.pop(key) for key in GPU_KEYS if key in resources]
    if len(gpus) > 1:
        raise InvalidSpec([FieldError("resources_per_node", f"give the GPUs once, as one of {', '.join(GPU_KEYS)}")])
    extra: dict[str, Any] = {"resources": {"requests": resources, "limits": dict(resources)}} if resources else {}
    return from_arguments(
        trainer.image,
        trainer.command,
        trainer.args,
        1 if trainer.num_nodes is None else trainer.num_nodes,
        trainer.nproc_per_node,
        gpus[0] if gpus else 0,
        trainer.env or {},
        extra,
    )


def from_call(
    job: JobSource | None,
    trainer: object | None,
    image: str | None,
    command: Sequence[str] | None,
    args: Sequence[str],
    nodes: int,
    nproc_per_node: int | str,
    gpus_per_node: int,
    env: Mapping[str, str] | None,
    spec: Mapping[str, Any],
) -> tuple[dict[str, Any], str]:
    """The body `train()` was given, one way of three (a job, TrainerClient's `trainer=`,
    or arguments), and what its notices are said of (the file, or `train()`)."""
    extra = {"image": image, "command": command, "args": args or None, "env": env, **spec}
    given = [k for k, v in extra.items() if v is not None]
    if nodes != 1 or nproc_per_node != "auto" or gpus_per_node:
        given += [k for k, v in (("nodes", nodes != 1), ("nproc_per_node", nproc_per_node != "auto")) if v]
        given += ["gpus_per_node"] if gpus_per_node else []
    if job is not None or trainer is not None:
        if job is not None and trainer is not None:
            raise TypeError("train(): give a job (dict or file) or trainer=, not both")
        if given:
            raise TypeError(f"train(): give a job (dict or file), or arguments for one, not both ({given})")
        if trainer is not None:
            if not isinstance(trainer, CustomTrainerContainer):
                raise ValueError(
                    f"trainer: a DDPJob runs a container: give a CustomTrainerContainer (got {type(trainer).__name__})"
                )
            return from_container(trainer), "train()"
        assert job is not None
        return from_source(job), os.fspath(job) if not isinstance(job, Mapping) else "train()"
    if image is None:
        raise TypeError("train(): give a job (dict or file), trainer=CustomTrainerContainer(...), or at least image=")
    return from_arguments(image, command, args, nodes, nproc_per_node, gpus_per_node, env or {}, spec), "train()"
