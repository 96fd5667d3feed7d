"""What a Node says of itself, read from its body: its Ready condition, and whether the
operator's node-health rules find it unhealthy. Pure; the operator keeps one `NodeState`
per Node from its watch (operator/nodes.py) and hands the job logic those of its Pods
(node_loss.py).

The rules are the cluster admin's (the chart's `nodeHealth` values, the operator's
DDPJOB_UNHEALTHY_NODE_CONDITIONS and DDPJOB_UNHEALTHY_NODE_TAINTS): the conditions and
taints that node-problem-detector, a GPU health checker or a remediation controller
sets on a node that should run no training. Both are comma-separated:

    conditions   TYPE or TYPE=STATUS (STATUS defaults to True), e.g. KernelDeadlock,GPUHealthy=False
    taints       KEY, KEY=VALUE, KEY:EFFECT or KEY=VALUE:EFFECT, e.g. nvidia.com/gpu-unhealthy:NoSchedule
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddpjob import text

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
CONDITION_STATUSES = ("True", "False", "Unknown")
MAX_RULES = 32
WHY_LIMIT = 200  # a condition's message is the node's own words: bounded


@dataclass(frozen=True)
class Taint:
    key: str
    value: str | None = None  # None: any value
    effect: str | None = None  # None: any effect

    def matches(self, taint: Mapping[str, Any]) -> bool:
        return (
            taint.get("key") == self.key
            and (self.value is None or taint.get("value", "") == self.value)
            and (self.effect is None or taint.get("effect") == self.effect)
        )


@dataclass(frozen=True)
class NodeRules:
    conditions: tuple[tuple[str, str], ...] = ()  # (type, status) that marks a node unhealthy
    taints: tuple[Taint, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.conditions or self.taints)


NO_RULES = NodeRules()


@dataclass(frozen=True)
class NodeState:
    ready: str  # the Ready condition's status: "True", "False", "Unknown", "" without one
    unhealthy: str | None = None  # why the rules find it unhealthy


def _items(raw: str) -> list[str]:
    items = [item.strip() for item in raw.split(",") if item.strip()]
    if len(items) > MAX_RULES:
        raise ValueError(f"at most {MAX_RULES} entries (got {len(items)})")
    return items


def parse_conditions(raw: str) -> tuple[tuple[str, str], ...]:
    """`TYPE[=STATUS],...`; ValueError naming the entry that is not one."""
    out = []
    for item in _items(raw):
        kind, eq, status = item.partition("=")
        status = status if eq else "True"
        if not _NAME.match(kind) or "/" in kind or status not in CONDITION_STATUSES:
            statuses = ", ".join(CONDITION_STATUSES)
            raise ValueError(f"{item[:80]!r} is not TYPE or TYPE=STATUS (STATUS one of {statuses})")
        out.append((kind, status))
    return tuple(out)


def parse_taints(raw: str) -> tuple[Taint, ...]:
    """`KEY[=VALUE][:EFFECT],...`; ValueError naming the entry that is not one."""
    out = []
    for item in _items(raw):
        rest, _, effect = item.partition(":")
        key, eq, value = rest.partition("=")
        if not _NAME.match(key) or (eq and not _VALUE.match(value)) or (effect and effect not in EFFECTS):
            raise ValueError(f"{item[:80]!r} is not KEY[=VALUE][:EFFECT] (EFFECT one of {', '.join(EFFECTS)})")
        out.append(Taint(key, value if eq else None, effect or None))
    return tuple(out)


def read(node: Mapping[str, Any], rules: NodeRules) -> NodeState:
    """The state of one Node body (as the API server or a watch gives it)."""
    status = node.get("status") if isinstance(node.get("status"), Mapping) else {}
    spec = node.get("spec") if isinstance(node.get("spec"), Mapping) else {}
    conditions = {c.get("type"): c for c in (status or {}).get("conditions") or [] if isinstance(c, Mapping)}
    ready = conditions.get("Ready") or {}
    return NodeState(ready=str(ready.get("status") or ""), unhealthy=_unhealthy(conditions, spec or {}, rules))


def _unhealthy(conditions: Mapping[Any, Mapping[str, Any]], spec: Mapping[str, Any], rules: NodeRules) -> str | None:
    for kind, wanted in rules.conditions:
        found = conditions.get(kind)
        if found is not None and found.get("status") == wanted:
            said = text.clean(str(found.get("message") or found.get("reason") or ""), WHY_LIMIT)
            return f"condition {kind}={wanted}" + (f" ({said})" if said else "")
    taints = [t for t in spec.get("taints") or [] if isinstance(t, Mapping)]
    for rule in rules.taints:
        for taint in taints:
            if rule.matches(taint):
                value = f"={taint.get('value')}" if taint.get("value") else ""
                return text.clean(f"taint {taint.get('key')}{value}:{taint.get('effect')}", WHY_LIMIT)
    return None
