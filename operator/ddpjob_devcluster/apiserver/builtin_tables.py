"""Server-side printing of the built-in kinds the development cluster holds (Pods,
Nodes, Services, Events, Namespaces), for `kubectl get`.

kubectl 1.37 prints no kind itself: it asks for a `meta.k8s.io/v1` Table and, without
one, shows only NAME and AGE. The API server builds these tables with the printers of
pkg/printers/internalversion/printers.go; the columns here are theirs (names, types,
priorities: priority 1 appears with `-o wide`), the cells the same rules, trimmed to
what the development cluster's objects carry.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Any

from ddpjob.times import age

Obj = Mapping[str, Any]


def _col(name: str, priority: int = 0, type_: str = "string", format_: str = "") -> dict[str, Any]:
    return {"name": name, "type": type_, "format": format_, "priority": priority, "description": ""}


NAME = _col("Name", format_="name")


def _age(obj: Obj, now: datetime.datetime, key: str = "creationTimestamp") -> str:
    value = (obj.get("metadata") or {}).get(key) if key == "creationTimestamp" else obj.get(key)
    try:
        then = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    return age((now - then).total_seconds())


def _name(obj: Obj) -> str:
    return (obj.get("metadata") or {}).get("name") or ""


def _pod_status(pod: Obj) -> str:
    """printPod's STATUS: the phase, else the reason a container waits or ended with."""
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Pending"
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            t = state["terminated"] or {}
            reason = t.get("reason") or (
                f"Signal:{t['signal']}" if t.get("signal") else f"ExitCode:{t.get('exitCode')}"
            )
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    return reason


def _pod(pod: Obj, now: datetime.datetime) -> list[Any]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for cs in statuses if cs.get("ready"))
    restarts = sum(int(cs.get("restartCount") or 0) for cs in statuses)
    gates = spec.get("readinessGates") or []
    return [
        _name(pod),
        f"{ready}/{len(spec.get('containers') or [])}",
        _pod_status(pod),
        restarts,
        _age(pod, now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"0/{len(gates)}" if gates else "<none>",
    ]


def _node(node: Obj, now: datetime.datetime) -> list[Any]:
    status = node.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = {"True": "Ready", "False": "NotReady"}.get(ready or "", "Unknown")
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = ",".join(sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")))
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    info = status.get("nodeInfo") or {}
    return [
        _name(node),
        state,
        roles or "<none>",
        _age(node, now),
        info.get("kubeletVersion") or "",
        addresses.get("InternalIP") or "<none>",
        addresses.get("ExternalIP") or "<none>",
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _service(svc: Obj, now: datetime.datetime) -> list[Any]:
    spec = svc.get("spec") or {}
    ports = ",".join(
        f"{p.get('port')}" + (f":{p['nodePort']}" if p.get("nodePort") else "") + f"/{p.get('protocol') or 'TCP'}"
        for p in spec.get("ports") or []
    )
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items()))
    external = ",".join(spec.get("externalIPs") or []) or "<none>"
    return [
        _name(svc),
        spec.get("type") or "ClusterIP",
        spec.get("clusterIP") or "<none>",
        external,
        ports or "<none>",
        _age(svc, now),
        selector or "<none>",
    ]


def _event(event: Obj, now: datetime.datetime) -> list[Any]:
    involved = event.get("involvedObject") or {}
    when = (
        event.get("lastTimestamp") or event.get("eventTime") or (event.get("metadata") or {}).get("creationTimestamp")
    )
    first = event.get("firstTimestamp") or when
    source = event.get("source") or {}
    return [
        _age({"t": when}, now, "t"),
        event.get("type") or "",
        event.get("reason") or "",
        f"{str(involved.get('kind') or '').lower()}/{involved.get('name') or ''}",
        involved.get("fieldPath") or "",
        ", ".join(x for x in (source.get("component") or event.get("reportingComponent"), source.get("host")) if x),
        event.get("message") or "",
        _age({"t": first}, now, "t"),
        int(event.get("count") or 1),
        _name(event),
    ]


def _namespace(ns: Obj, now: datetime.datetime) -> list[Any]:
    return [_name(ns), (ns.get("status") or {}).get("phase") or "Active", _age(ns, now)]


# (group, plural) -> the columns and the row of one object, in the API server's order.
PRINTERS: dict[tuple[str, str], tuple[list[dict[str, Any]], Callable[[Obj, datetime.datetime], list[Any]]]] = {
    ("", "pods"): (
        [
            NAME,
            _col("Ready"),
            _col("Status"),
            _col("Restarts", type_="string"),
            _col("Age"),
            _col("IP", 1),
            _col("Node", 1),
            _col("Nominated Node", 1),
            _col("Readiness Gates", 1),
        ],
        _pod,
    ),
    ("", "nodes"): (
        [
            NAME,
            _col("Status"),
            _col("Roles"),
            _col("Age"),
            _col("Version"),
            _col("Internal-IP", 1),
            _col("External-IP", 1),
            _col("OS-Image", 1),
            _col("Kernel-Version", 1),
            _col("Container-Runtime", 1),
        ],
        _node,
    ),
    ("", "services"): (
        [
            NAME,
            _col("Type"),
            _col("Cluster-IP"),
            _col("External-IP"),
            _col("Port(s)"),
            _col("Age"),
            _col("Selector", 1),
        ],
        _service,
    ),
    ("", "events"): (
        [
            _col("Last Seen"),
            _col("Type"),
            _col("Reason"),
            _col("Object"),
            _col("Subobject", 1),
            _col("Source", 1),
            _col("Message"),
            _col("First Seen", 1),
            _col("Count", 1, "integer"),
            _col("Name", 1),
        ],
        _event,
    ),
    ("", "namespaces"): ([NAME, _col("Status"), _col("Age")], _namespace),
}


def printer(res: Any) -> tuple[list[dict[str, Any]], Callable[[Obj, datetime.datetime], list[Any]]] | None:
    """The columns and row function of a built-in resource, or None (kubectl then shows NAME and AGE)."""
    return PRINTERS.get((res.group or "", res.plural)) if res is not None and res.version == "v1" else None
