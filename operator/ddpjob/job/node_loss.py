"""Members on a node that was lost or reported unhealthy, pure.

A node's kubelet that stops reporting (the node was killed, paused, or cut off the network)
leaves its Pods `Running` in the API: nothing will ever write their end. Kubernetes marks
the Node not Ready after the node lifecycle controller's grace period
(`--node-monitor-grace-period`, 50 s by default) and evicts its Pods only after their
`not-ready`/`unreachable` toleration (300 s by default), and even then no kubelet confirms
the deletion. The job logic does not wait for either: once the observation says a member's
Node is gone or not Ready, the member is lost now (a disruption, `NodeLost`, never counted
against maxRestarts): a rigid gang restarts on the healthy nodes, an elastic job goes on
without it, and the Pod is force-deleted at once (creation.force_deletes), since no kubelet
will confirm it. A Pod that still runs cut off on such a node is harmless: the trainer's
checkpoints are fenced by attempt and generation (ddpjob_trainer/checkpoint.py).

A node that reports itself unhealthy (a condition or a taint the operator's settings name:
node-problem-detector's, a GPU health checker's) still has a live kubelet: its members are
moved off before any fails (`NodeUnhealthy`, a disruption too): deleted gracefully, so
their trainers get SIGTERM and save, and the Pods made next avoid every unhealthy node
(`avoid`).

`Observed.nodes` holds the Ready condition of the nodes of the job's Pods, and
`Observed.unhealthy_nodes` the unhealthy ones; a node the observation does not name is
taken as healthy (a node the operator has not seen yet is not lost).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from ddpjob.job.observe import PodState

if TYPE_CHECKING:
    from ddpjob.job.decision import Observed

NODE_LOST, NODE_UNHEALTHY = "NodeLost", "NodeUnhealthy"
# The Pods made next avoid at most this many unhealthy nodes (a bounded affinity term).
MAX_AVOIDED = 64


def lost_node(observed: Observed, node: str | None) -> str | None:
    """Why `node` is lost (gone, or its Ready condition False or Unknown), else None."""
    if not node or node not in observed.nodes:
        return None
    ready = observed.nodes[node]
    if ready is None:
        return f"node {node} is gone"
    if ready in ("False", "Unknown"):
        return f"node {node} is not Ready (Ready={ready})"
    return None


def trouble(observed: Observed, pod: PodState) -> tuple[str, str] | None:
    """(reason, message) for a live member whose node was lost or is unhealthy."""
    if pod.deleting or pod.phase in ("Succeeded", "Failed"):
        return None
    lost = lost_node(observed, pod.node_name)
    if lost:
        return NODE_LOST, f"Pod {pod.name} lost: its {lost}"
    why = observed.unhealthy_nodes.get(pod.node_name or "")
    if why:
        return NODE_UNHEALTHY, f"Pod {pod.name} moved off node {pod.node_name}: {why}"
    return None


def members(observed: Observed, current: Mapping[int, PodState]) -> list[PodState]:
    """The current attempt's live members (`current`, a step's) on a lost or unhealthy node,
    as disruptions."""
    out = []
    for pod in current.values():
        found = trouble(observed, pod)
        if found:
            reason, message = found
            out.append(replace(pod, disruption=reason, reason=reason, message=message))
    return sorted(out, key=lambda p: p.node_rank)


def avoid(observed: Observed) -> tuple[str, ...]:
    """The nodes the Pods made next must not land on: the unhealthy ones. (A lost node needs
    no such term: the node lifecycle controller taints it `not-ready` or `unreachable`
    NoSchedule as it marks it, and the scheduler keeps new Pods off it.) A Pod's affinity is
    fixed once made: one that waits for room keeps avoiding a node that recovers meanwhile,
    until the job's next attempt or replacement."""
    return tuple(sorted(observed.unhealthy_nodes))[:MAX_AVOIDED]
