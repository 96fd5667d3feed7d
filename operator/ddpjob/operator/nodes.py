"""The operator's view of the cluster's Nodes, from its watch of them: each one's Ready
condition and whether the node-health rules find it unhealthy (job/node_health.py).

The controller hands the job logic the states of the nodes of a job's Pods
(`Observed.nodes`) and every unhealthy node (`Observed.unhealthy_nodes`); a change of a
node's state (it turned NotReady, came back, got an unhealthy condition or taint, or was
deleted) asks for a reconcile of each job with a Pod on it, so a lost node is acted on
from its Node's update, not from the next event of a Pod that will never change again.

Only what the job logic reads is kept, a few strings per node, so a cluster of thousands
of nodes costs little; a deleted Node is remembered as gone (None) for a while, so a Pod
still bound to it is judged lost, not unknown.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from ddpjob.job.node_health import NO_RULES, NodeRules, NodeState, read
from ddpjob.job.observe import PodState

Key = tuple[str, str]  # a job's (namespace, name)

# Deleted Nodes remembered as gone; the oldest are forgotten first (a Pod on a Node
# deleted that long ago has long been handled).
MAX_GONE = 4096


class Nodes:
    def __init__(self, rules: NodeRules = NO_RULES):
        self.rules = rules
        self._states: dict[str, NodeState] = {}
        self._gone: OrderedDict[str, None] = OrderedDict()
        self._unhealthy: dict[str, str] = {}

    def seen(self, name: str, body: Mapping[str, Any] | None) -> bool:
        """Take one watch event of Node `name` (`body` None: deleted); whether its state changed."""
        if body is None:
            changed = name in self._states or name not in self._gone
            self._states.pop(name, None)
            self._unhealthy.pop(name, None)
            self._gone[name] = None
            self._gone.move_to_end(name)
            while len(self._gone) > MAX_GONE:
                self._gone.popitem(last=False)
            return changed
        state = read(body, self.rules)
        self._gone.pop(name, None)
        if self._states.get(name) == state:
            return False
        self._states[name] = state
        if state.unhealthy:
            self._unhealthy[name] = state.unhealthy
        else:
            self._unhealthy.pop(name, None)
        return True

    def to_reconcile(
        self, name: str, body: Mapping[str, Any] | None, pods: Iterable[tuple[Key, tuple[str | None, PodState]]]
    ) -> set[Key]:
        """Take one watch event of Node `name` (`body` None: deleted); when its state changed,
        the jobs with a Pod on it (`pods`: the Pods index's items), else none."""
        if not self.seen(name, body):
            return set()
        return {key for key, (_, pod) in pods if pod.node_name == name}

    def ready_of(self, names: Iterable[str | None]) -> dict[str, str | None]:
        """Each named node's Ready status (None: deleted); a node never seen is left out."""
        out: dict[str, str | None] = {}
        for name in names:
            if not name:
                continue
            if name in self._states:
                out[name] = self._states[name].ready
            elif name in self._gone:
                out[name] = None
        return out

    def unhealthy(self) -> dict[str, str]:
        return dict(self._unhealthy)
