"""Where a rendered Pod may not go: the nodes the job logic asks it to avoid (unhealthy ones,
job/node_loss.py), as a required node affinity on the Node's name.

`matchFields` on `metadata.name` names the Node itself (a `kubernetes.io/hostname` label
need not equal it). Required node selector terms are ORed, so the exclusion is added to
every term the template already has (each term stays as selective as it was, and none
lets the Pod onto an avoided node), or is the one term when there is none.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any


def avoiding(pod: dict[str, Any], nodes: Sequence[str]) -> dict[str, Any]:
    """`pod` with a required affinity that keeps it off `nodes` (unchanged without any)."""
    if not nodes:
        return pod
    out = copy.deepcopy(pod)
    spec = out.setdefault("spec", {})
    required = (
        spec.setdefault("affinity", {})
        .setdefault("nodeAffinity", {})
        .setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    )
    exclusion = {"key": "metadata.name", "operator": "NotIn", "values": sorted(set(nodes))}
    terms = required.get("nodeSelectorTerms") or [{}]
    required["nodeSelectorTerms"] = [
        {**term, "matchFields": [*(term.get("matchFields") or []), exclusion]} for term in terms
    ]
    return out
