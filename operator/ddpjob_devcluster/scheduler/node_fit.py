"""Whether a Pod fits a Node, as kube-scheduler's filters decide it (NodeResourcesFit, NodeSelector).

A Node's `status.allocatable` minus the requests of the Pods bound to it and not finished
must cover the Pod's requests (a container's limit stands for a missing request), and one
more Pod must fit under `allocatable.pods`. The message of a Pod that fits nowhere is
kube-scheduler's FitError.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from ddpjob.api.quantity import parse_quantity


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        res = container.get("resources") or {}
        for key, qty in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
            total[key] = total.get(key, Decimal(0)) + parse_quantity(qty)
    return total


def fit_error(total_nodes: int, reasons: Counter) -> str:
    """pkg/scheduler/framework/types.go FitError.Error(): reasons counted, as sorted strings."""
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{total_nodes} nodes are available: " + ", ".join(parts) + "."


def holds_resources(pod: Mapping[str, Any]) -> bool:
    # A finished Pod no longer holds its node's resources; a terminating one still does.
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def allocatable(node: Mapping[str, Any]) -> dict[str, Decimal]:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return {k: parse_quantity(v) for k, v in alloc.items()}


def take(free: dict[str, Decimal], requests: Mapping[str, Decimal]) -> None:
    for key, qty in requests.items():
        free[key] = free.get(key, Decimal(0)) - qty
    free["pods"] = free.get("pods", Decimal(0)) - 1


def find_node(pod: Mapping[str, Any], nodes: list[dict], free: dict[str, dict[str, Decimal]]) -> tuple[str | None, str]:
    """The Node a Pod fits on (the one with the most of its scarcest resource left), or
    None and the FitError message; `free` is each Node's allocatable minus what its Pods hold."""
    requests = pod_requests(pod)
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    reasons: Counter = Counter()
    fits: list[str] = []
    for node in nodes:
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in selector.items()):
            reasons["node(s) didn't match Pod's node affinity/selector"] += 1
            continue
        avail = free[name]
        short = [key for key, qty in requests.items() if qty > 0 and avail.get(key, Decimal(0)) < qty]
        if avail.get("pods", Decimal(0)) < 1:
            short.append("pods")
        if short:
            for key in short:
                reasons["Too many pods" if key == "pods" else f"Insufficient {key}"] += 1
            continue
        fits.append(name)
    if not fits:
        return None, fit_error(len(nodes), reasons)
    gpu = next((k for k in requests if k.endswith("/gpu")), "pods")
    # The node with the most of the scarcest resource left (ties: by name).
    return max(fits, key=lambda n: (free[n].get(gpu, Decimal(0)), [-ord(c) for c in n])), ""
