"""What a job's `template` may ask for: the operator's template policy.

A DDPJob's template is merged into Pods the operator creates with its own service
account, so the template is where a user could ask for more than a Pod of their own
would get. By default the operator refuses what the baseline Pod Security Standard
forbids: privileged containers, hostPath volumes, the host's network/PID/IPC namespaces
and added Linux capabilities. A cluster admin allows them one by one with the
operator's `--template-allow` setting (chart value `templatePolicy.allow`), e.g. for a
job that needs hostPath for a node-local dataset cache. Pod Security Admission in the
namespace still applies on top.

Pure: the operator and `ddpjob validate` call `check()` with the allowances they run with.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ddpjob.api.spec import FieldError

PRIVILEGED, HOST_PATH, HOST_NAMESPACES, CAPABILITIES = "privileged", "hostPath", "hostNamespaces", "capabilities"
ALLOWANCES = (PRIVILEGED, HOST_PATH, HOST_NAMESPACES, CAPABILITIES)
ENV = "DDPJOB_TEMPLATE_ALLOW"  # comma-separated allowances, set by the chart

BASE = "spec.template.spec"


def parse_allowances(text: str | Iterable[str] | None) -> frozenset[str]:
    """`"privileged,hostPath"` -> the set; ValueError naming an unknown allowance."""
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text or []) if t and t.strip()]
    unknown = [t for t in items if t not in ALLOWANCES]
    if unknown:
        raise ValueError(f"unknown template allowance {unknown[0]!r} (known: {', '.join(ALLOWANCES)})")
    return frozenset(items)


def _refused(path: str, what: str, allowance: str) -> FieldError:
    return FieldError(path, f"{what} is refused by the operator's template policy "
                            f"(an admin can allow it: templatePolicy.allow: [{allowance}])")


def check(template: Mapping[str, Any] | None, allow: frozenset[str] = frozenset()) -> list[FieldError]:
    """Field errors for what the template asks and the policy does not allow."""
    spec = (template or {}).get("spec") if isinstance(template, Mapping) else None
    if not isinstance(spec, Mapping):
        return []
    errors: list[FieldError] = []
    if HOST_NAMESPACES not in allow:
        for key in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(key) is True:
                errors.append(_refused(f"{BASE}.{key}", f"{key}=true", HOST_NAMESPACES))
    if HOST_PATH not in allow:
        for i, volume in enumerate(spec.get("volumes") or []):
            if isinstance(volume, Mapping) and "hostPath" in volume:
                errors.append(_refused(f"{BASE}.volumes[{i}].hostPath", "a hostPath volume", HOST_PATH))
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for i, c in enumerate(spec.get(field) or []):
            sc = c.get("securityContext") if isinstance(c, Mapping) else None
            if not isinstance(sc, Mapping):
                continue
            path = f"{BASE}.{field}[{i}].securityContext"
            if PRIVILEGED not in allow and sc.get("privileged") is True:
                errors.append(_refused(f"{path}.privileged", "a privileged container", PRIVILEGED))
            caps = sc.get("capabilities")
            if CAPABILITIES not in allow and isinstance(caps, Mapping) and caps.get("add"):
                errors.append(_refused(f"{path}.capabilities.add", "adding Linux capabilities", CAPABILITIES))
    return errors
