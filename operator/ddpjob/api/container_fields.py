"""The trainer container's `env` and `resources`, and the `checkpoint` volume: read and
checked for spec.py, every bad field named."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddpjob import contract
from ddpjob.api import names, tensorboard
from ddpjob.api.checker import Checker, show

# The environment contract is set by the operator and the local runner only.
RESERVED_ENV = contract.RESERVED
ENV_FIELDS = ("name", "value", "valueFrom")
RESOURCES_FIELDS = ("limits", "requests")
CHECKPOINT_FIELDS = ("mountPath", "claimName", "volume")


@dataclass(frozen=True)
class Checkpoint:
    mount_path: str
    claim_name: str | None = None
    volume: Mapping[str, Any] | None = None
    tensorboard: bool = False  # spec.tensorboard: the job's TensorBoard serves it (api/tensorboard.py)


def check_env(c: Checker, env: Any) -> tuple[Mapping[str, Any], ...]:
    if env is None:
        return ()
    if not isinstance(env, list):
        c.err("spec.env", "must be a list of {name, value} entries")
        return ()
    seen: set[str] = set()
    for i, entry in enumerate(env):
        path = f"spec.env[{i}]"
        if not isinstance(entry, Mapping):
            c.err(path, "must be an object with name and value or valueFrom")
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            c.err(f"{path}.name", "is required and must be a non-empty string")
            continue
        if (
            not (name[0].isalpha() or name[0] in "-._")
            or not all(ch.isalnum() or ch in "-._" for ch in name)
            or not name.isascii()
        ):
            c.err(f"{path}.name", f"{show(name)} is not a valid environment variable name")
        if name in RESERVED_ENV:
            c.err(f"{path}.name", f"{name} is reserved by the rendezvous contract and set by ddpjob")
        if name in seen:
            c.err(f"{path}.name", f"{name} is set twice")
        seen.add(name)
        if "value" in entry and not isinstance(entry["value"], str):
            c.err(f"{path}.value", f"must be a string (got {show(entry['value'])}); quote numbers in YAML")
        if "valueFrom" in entry and not isinstance(entry["valueFrom"], Mapping):
            c.err(f"{path}.valueFrom", "must be an object")
        c.unknown(path, entry, ENV_FIELDS)
    return tuple(dict(e) for e in env if isinstance(e, Mapping))


def check_template_env(c: Checker, template: Mapping[str, Any]) -> None:
    """The template's trainer container may not set a reserved name either: its env
    reaches the same process as `spec.env`, after the contract (an operator's value it
    does not set, such as DDPJOB_CHECKPOINT_DIR without a checkpoint, was the user's)."""
    pod = template.get("spec")
    containers = pod.get("containers") if isinstance(pod, Mapping) else None
    for i, container in enumerate(containers if isinstance(containers, list) else []):
        if not isinstance(container, Mapping) or container.get("name") != names.TRAINER_CONTAINER:
            continue
        env = container.get("env")
        for j, entry in enumerate(env if isinstance(env, list) else []):
            name = entry.get("name") if isinstance(entry, Mapping) else None
            if isinstance(name, str) and name in RESERVED_ENV:
                c.err(
                    f"spec.template.spec.containers[{i}].env[{j}].name",
                    f"{name} is reserved by the rendezvous contract and set by ddpjob",
                )


def check_resources(c: Checker, resources: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not resources:
        return {}
    c.unknown("spec.resources", resources, RESOURCES_FIELDS)
    for key, value in resources.items():
        if key not in RESOURCES_FIELDS:
            continue
        if not isinstance(value, Mapping):
            c.err(f"spec.resources.{key}", "must be a map of resource name to quantity")
        else:
            for res, qty in value.items():
                if isinstance(qty, bool) or not isinstance(qty, (str, int)):
                    c.err(f"spec.resources.{key}.{res}", f"must be a quantity such as '2' or '4Gi' (got {show(qty)})")
    return dict(resources)


def check_checkpoint(c: Checker, ckpt: Mapping[str, Any] | None, board: Any = None) -> Checkpoint | None:
    """The volume, and whether TensorBoard is to serve it (`spec.tensorboard`, which needs it)."""
    served = tensorboard.check(c, board, ckpt is not None)
    if ckpt is None:
        return None
    mount = ckpt.get("mountPath", names.DEFAULT_CHECKPOINT_MOUNT)
    if not isinstance(mount, str) or not mount.startswith("/"):
        c.err("spec.checkpoint.mountPath", f"must be an absolute path (got {show(mount)})")
    claim, volume = ckpt.get("claimName"), ckpt.get("volume")
    c.unknown("spec.checkpoint", ckpt, CHECKPOINT_FIELDS)
    if claim is not None and volume is not None:
        c.err("spec.checkpoint", "set exactly one of claimName or volume")
    elif claim is None and volume is None and not c.meant & {"spec.checkpoint.claimName", "spec.checkpoint.volume"}:
        # A misspelt claimName is one mistake, said once as the unknown field it is.
        c.err("spec.checkpoint", "set exactly one of claimName or volume")
    if claim is not None and (not isinstance(claim, str) or not claim):
        c.err("spec.checkpoint.claimName", "must be a non-empty string")
    if volume is not None and not isinstance(volume, Mapping):
        c.err("spec.checkpoint.volume", "must be a volume source object such as {nfs: {...}}")
    return Checkpoint(mount_path=str(mount), claim_name=claim, volume=volume, tensorboard=served)
