"""Which resources the emulated server serves: the built-in ones, and those a CustomResourceDefinition adds.

Wraps kmock's `ResourcesArray` (what discovery lists): a resource's info or a 404, an
object's key (cluster-scoped ones have no namespace), the resource of an apiVersion and
kind (an owner reference's), and serving or unserving a CRD's versions.
"""

from __future__ import annotations

from typing import Any

from kmock import ResourceInfo, ResourcesArray, resource as Resource

from ddpjob.times import now
from ddpjob_devcluster.apiserver.errors import ApiError

Key = tuple[Resource, str | None, str]
ALL_VERBS = {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}


def api_version(res: Resource) -> str:
    return f"{res.group}/{res.version}" if res.group else str(res.version)


def is_status_subresource(info: ResourceInfo) -> bool:
    return "status" in info.subresources


class ServedResources:
    def __init__(self, resources: ResourcesArray):
        self.resources = resources
        # (apiVersion, kind) -> resource: found ones only, cleared when a CRD is (un)served
        # (resources are otherwise only added, at start).
        self._by_kind: dict[tuple[str, str], Resource] = {}

    def info(self, res: Resource | None) -> ResourceInfo:
        if res is None or res not in self.resources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return self.resources[res]

    def key(self, res: Resource, namespace: str | None, name: str) -> Key:
        return (res, namespace if self.info(res).namespaced else None, name)

    def resource_of(self, api_version: str, kind: str) -> Resource | None:
        """The served resource of an apiVersion and kind (an owner reference's), or None."""
        known = self._by_kind.get((api_version, kind))
        if known is not None:
            return known
        group, _, version = api_version.rpartition("/")
        # By key: kmock's mapping is typed to also take plain dicts, but its keys are
        # resources and its values ResourceInfo (its __iter__ and __getitem__ say so).
        for res in self.resources:
            info = self.resources[res]
            if info.kind == kind and res.version == version and (res.group or "") == group:
                self._by_kind[api_version, kind] = res
                return res
        return None

    def serve_crd(self, crd: dict[str, Any]) -> None:
        """Make a CustomResourceDefinition's resources discoverable, and mark it Established."""
        self._by_kind.clear()
        spec, names = crd.get("spec") or {}, (crd.get("spec") or {}).get("names") or {}
        for version in spec.get("versions") or []:
            if not version.get("served", True):
                continue
            subresources = set((version.get("subresources") or spec.get("subresources") or {}).keys())
            self.resources[Resource(group=spec["group"], version=version["name"], plural=names["plural"])] = (
                ResourceInfo(
                    namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                    kind=names.get("kind"),
                    singular=names.get("singular") or names.get("kind", "").lower(),
                    verbs=ALL_VERBS,
                    shortnames=names.get("shortNames") or (),
                    categories=names.get("categories") or (),
                    subresources=subresources,
                )
            )
        crd["status"] = {
            "acceptedNames": names,
            "storedVersions": [v["name"] for v in spec.get("versions") or [] if v.get("storage")],
            "conditions": [
                {"type": t, "status": "True", "reason": r, "lastTransitionTime": now()}
                for t, r in (("NamesAccepted", "NoConflicts"), ("Established", "InitialNamesAccepted"))
            ],
        }

    def unserve_crd(self, crd: dict[str, Any]) -> None:
        self._by_kind.clear()
        spec = crd.get("spec") or {}
        for version in spec.get("versions") or []:
            res = Resource(group=spec["group"], version=version["name"], plural=spec["names"]["plural"])
            if res in self.resources:
                del self.resources[res]
