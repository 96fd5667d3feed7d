"""spec.elastic: a job that keeps training when nodes come and go.

    elastic:
      minNodes: 2   # the job trains with at least this many Pods
      maxNodes: 4   # and at most this many; spec.nodes (the desired count) lies between

With `elastic` set, `spec.nodes` is the desired size and may change while the job runs
(within the range): torchrun's elastic rendezvous (`--nnodes=MIN:MAX`, c10d) re-forms the
group at every change. The range itself is immutable: every running Pod's torchrun was
started with it. Without `elastic` a job is a rigid gang, as before.

The CRD carries the same rules as CEL (manifests/crd); tests/api/test_crd_parity.py keeps them in step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddpjob.api.checker import Checker

FIELDS = frozenset({"minNodes", "maxNodes"})
MAX_NODES = 1024


@dataclass(frozen=True)
class Elastic:
    min_nodes: int
    max_nodes: int

    @property
    def nnodes(self) -> str:
        """torchrun's --nnodes for the range."""
        return f"{self.min_nodes}:{self.max_nodes}"


def _count(c: Checker, elastic: Mapping[str, Any], key: str) -> int | None:
    path = f"spec.elastic.{key}"
    value = elastic.get(key)
    if value is None:
        c.missing(path)
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        c.err(path, f"must be an integer (got {value!r})"[:200])
        return None
    if not 1 <= value <= MAX_NODES:
        c.err(path, f"must be from 1 to {MAX_NODES} (got {value})")
        return None
    return value


def check_elastic(c: Checker, elastic: Mapping[str, Any] | None, nodes: int | None) -> Elastic | None:
    """Read spec.elastic, reporting every bad field through the checker `c` (api.checker.Checker)."""
    if elastic is None:
        return None
    c.unknown("spec.elastic", elastic, FIELDS)
    lo, hi = _count(c, elastic, "minNodes"), _count(c, elastic, "maxNodes")
    if lo is None or hi is None:
        return None
    if lo > hi:
        c.err("spec.elastic.minNodes", f"must be <= spec.elastic.maxNodes ({hi}) (got {lo})")
        return None
    if nodes is not None and not lo <= nodes <= hi:
        c.err("spec.nodes", f"must be from spec.elastic.minNodes ({lo}) to spec.elastic.maxNodes ({hi}) (got {nodes})")
        return None
    return Elastic(lo, hi)


def gang_minimum(nodes: int, elastic: Elastic | None) -> int:
    """How many Pods a gang scheduler must place together: every node of a rigid job, the
    minimum of an elastic one (it trains with that many)."""
    return elastic.min_nodes if elastic is not None else nodes


def immutable_errors(old_spec: Mapping[str, Any], new_spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(path, message) for changes an elastic job cannot honour: adding or removing the
    range, or moving it (running Pods were started with it). `nodes` may change only
    while the job is (and stays) elastic."""
    old, new = old_spec.get("elastic"), new_spec.get("elastic")
    if (old is None) != (new is None):
        return [("spec.elastic", "is immutable: it may not be added or removed")]
    if old is not None and old != new:
        return [("spec.elastic", "is immutable: running Pods were started with this range")]
    return []
