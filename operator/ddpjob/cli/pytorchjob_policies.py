"""A PyTorchJob's elasticPolicy and runPolicy as a DDPJob's fields (`elastic`, maxRestarts,
deadlines, scheduling): each maps exactly, is refused naming it, or is dropped with a note.
User: cli/pytorchjob.py (`convert`), whose module docstring says what the training operator
does with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ddpjob.api.checker import show
from ddpjob.api.elastic import MAX_NODES
from ddpjob.cli.conversion import Conversion


def elastic(c: Conversion, policy: Any, replicas: Mapping[str, Any], spec: dict[str, Any], name: str) -> None:
    if policy is None:
        return
    base = "spec.elasticPolicy"
    if "Master" in replicas:
        c.err(base, "with a Master has no exact equivalent: an elastic DDPJob's nodes are all alike (use Workers only)")
    low, high = (
        None if policy.get(k) is None else c.count(policy[k], f"{base}.{k}", 1, MAX_NODES)
        for k in ("minReplicas", "maxReplicas")
    )
    low, high = low or high or spec["nodes"], high or low or spec["nodes"]
    spec["elastic"] = {"minNodes": low, "maxNodes": high}
    if policy.get("rdzvBackend", "c10d") != "c10d":
        c.err(f"{base}.rdzvBackend", f"{show(policy['rdzvBackend'])}: a DDPJob's rendezvous is c10d on node 0")
    if policy.get("rdzvPort") is not None:
        spec["port"] = policy["rdzvPort"]
    if policy.get("rdzvId") not in (None, name):
        c.err(f"{base}.rdzvId", "a DDPJob's rendezvous id is the job's name")
    for field in ("rdzvHost", "rdzvConf"):
        if policy.get(field):
            c.err(f"{base}.{field}", "has no DDPJob equivalent: a DDPJob sets its rendezvous itself (node 0)")
    if policy.get("metrics"):
        # The training operator's HorizontalPodAutoscaler: it only moves the Worker count
        # within min..max, which a DDPJob does when spec.nodes changes. The job runs as is.
        c.notes.append(
            f"dropped {base}.metrics: the training operator's autoscaler (a HorizontalPodAutoscaler); an "
            f"elastic DDPJob resizes within minNodes..maxNodes when its spec.nodes changes"
        )
    if policy.get("standalone"):
        c.err(f"{base}.standalone", "has no DDPJob equivalent: an elastic DDPJob spans its Pods")
    if policy.get("maxRestarts") is not None:
        c.notes.append(
            f"dropped {base}.maxRestarts: torchrun's worker restarts are 4 x maxNodes in a DDPJob (PET_MAX_RESTARTS)"
        )


def run_policy(c: Conversion, run: Mapping[str, Any], spec: dict[str, Any], gang: str) -> None:
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
            f"dropped spec.runPolicy.cleanPodPolicy {show(run['cleanPodPolicy'])}: a DDPJob keeps a finished "
            "job's Pods until the job is deleted (ttlSecondsAfterFinished deletes both)"
        )
    policy = run.get("schedulingPolicy") or {}
    if not isinstance(policy, Mapping):
        c.err("spec.runPolicy.schedulingPolicy", f"must be an object (got {show(policy)})")
        return
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
