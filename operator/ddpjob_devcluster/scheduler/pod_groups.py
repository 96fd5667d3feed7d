"""The native PodGroup API (`scheduling.k8s.io/v1beta1`, KEP-4671) of the development
cluster: served as a 1.37 API server serves it with the GenericWorkload feature gate, and
protected by `scheduling.k8s.io/podgroup-protection`: stamped on every PodGroup (the
PodGroupProtection admission plugin does it at creation; here on the scheduler's next
pass), removed once a deleted PodGroup has no Pod left that is not finished (the
podgroupprotection controller), so a deleted PodGroup lingers while its Pods run.
`scheduler.py` places the groups' Pods all or nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kmock import ResourceInfo, resource as Resource

from ddpjob_devcluster.apiserver.registry.served_resources import ALL_VERBS
from ddpjob_devcluster.apiserver.registry.store import Store
from ddpjob_devcluster.scheduler.node_fit import holds_resources

POD_GROUPS = Resource(group="scheduling.k8s.io", version="v1beta1", plural="podgroups")
PROTECTION_FINALIZER = "scheduling.k8s.io/podgroup-protection"


def serve_native_pod_groups(store: Store) -> None:
    """Serve `scheduling.k8s.io/v1beta1` PodGroups, as a 1.37 API server does with the
    GenericWorkload feature gate and that API version turned on."""
    store.resources[POD_GROUPS] = ResourceInfo(
        namespaced=True,
        kind="PodGroup",
        singular="podgroup",
        verbs=ALL_VERBS,
        shortnames=(),
        categories=(),
        subresources={"status"},
    )


def members(group: Mapping[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Pods of `group` (its namespace's Pods that name it) that still hold resources."""
    meta = group["metadata"]
    return [
        p
        for p in pods
        if p["metadata"].get("namespace") == meta.get("namespace")
        and ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") == meta["name"]
        and holds_resources(p)
    ]


def protect(store: Store, pods: list[dict[str, Any]]) -> None:
    """The finalizer on every PodGroup, off a deleted one once no member holds resources."""
    if POD_GROUPS not in store.resources:
        return
    for group in store.view_all(POD_GROUPS, None):
        meta = group["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            if PROTECTION_FINALIZER in finalizers and not members(group, pods):
                finalizers.remove(PROTECTION_FINALIZER)
            else:
                continue
        elif PROTECTION_FINALIZER not in finalizers:
            finalizers.append(PROTECTION_FINALIZER)
        else:
            continue
        merge = "application/merge-patch+json"
        store.patch(
            POD_GROUPS,
            meta.get("namespace"),
            meta["name"],
            None,
            merge,
            {"metadata": {"finalizers": finalizers or None}},
        )
