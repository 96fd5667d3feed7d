"""Pod Security Admission (enforce mode), by namespace label.

Upstream: staging/src/k8s.io/pod-security-admission (admission/admission.go EvaluatePod,
policy/check_*.go, policy/registry.go) and
https://kubernetes.io/docs/concepts/security/pod-security-admission/. A namespace
labelled `pod-security.kubernetes.io/enforce: baseline|restricted` refuses a Pod that
fails a check with 403 Forbidden:

    pods "x" is forbidden: violates PodSecurity "restricted:latest": <reason> (<detail>), ...

Checks run baseline first, then restricted (each group in file-name order), a restricted
check replacing the baseline one it overrides. Modelled: baseline capabilities, host
namespaces, hostPath volumes, hostPorts, privileged, seccomp; restricted
allowPrivilegeEscalation, capabilities, volume types, runAsNonRoot, runAsUser, seccomp.
Not modelled: AppArmor, procMount, SELinux, sysctls, Windows host process (ddpjob's Pods
set none of them), and the `warn`/`audit` modes (they never refuse).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ddpjob_devcluster.apiserver.errors import ApiError

ENFORCE = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION = "pod-security.kubernetes.io/enforce-version"
LEVELS = ("privileged", "baseline", "restricted")
# policy/check_capabilities_baseline.go: the container runtime's default set.
BASELINE_CAPS = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
# policy/check_restrictedVolumes.go
RESTRICTED_VOLUMES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
)

Check = Callable[[Mapping[str, Any]], tuple[str, str] | None]


def _quote(xs: list[str]) -> str:
    return ", ".join(f'"{x}"' for x in xs)


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(field) or []


def _named(noun: str, names: list[str]) -> str:
    return f"{noun}{'s' if len(names) > 1 else ''} {_quote(names)}"


def _sc(c: Mapping[str, Any]) -> Mapping[str, Any]:
    return c.get("securityContext") or {}


def capabilities_baseline(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    bad = {
        c["name"]: [a for a in (_sc(c).get("capabilities") or {}).get("add") or [] if a not in BASELINE_CAPS]
        for c in _containers(spec)
    }
    bad = {k: v for k, v in bad.items() if v}
    if not bad:
        return None
    caps = sorted({a for v in bad.values() for a in v})
    return (
        "non-default capabilities",
        f"{_named('container', list(bad))} must not include {_quote(caps)} in securityContext.capabilities.add",
    )


def host_namespaces(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    used = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    return ("host namespaces", ", ".join(used)) if used else None


def host_path_volumes(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    names = [v["name"] for v in spec.get("volumes") or [] if "hostPath" in v]
    return ("hostPath volumes", _named("volume", names)) if names else None


def host_ports(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    used = [
        (c["name"], str(p["hostPort"])) for c in _containers(spec) for p in c.get("ports") or [] if p.get("hostPort")
    ]
    if not used:
        return None
    return "hostPort", ", ".join(f'container "{c}" uses hostPort {p}' for c, p in used)


def privileged(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    names = [c["name"] for c in _containers(spec) if _sc(c).get("privileged")]
    return (
        ("privileged", f"{_named('container', names)} must not set securityContext.privileged=true") if names else None
    )


def _seccomp_types(spec: Mapping[str, Any]) -> tuple[str | None, dict[str, str | None]]:
    pod = ((spec.get("securityContext") or {}).get("seccompProfile") or {}).get("type")
    return pod, {c["name"]: (_sc(c).get("seccompProfile") or {}).get("type") for c in _containers(spec)}


def seccomp_baseline(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    pod, per = _seccomp_types(spec)
    bad = [n for n, t in per.items() if t == "Unconfined"]
    parts = (
        ['pod must not set securityContext.seccompProfile.type to "Unconfined"'] if pod == "Unconfined" else []
    ) + (
        [f'{_named("container", bad)} must not set securityContext.seccompProfile.type to "Unconfined"'] if bad else []
    )
    return ("seccompProfile", "; ".join(parts)) if parts else None


def allow_privilege_escalation(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    names = [c["name"] for c in _containers(spec) if _sc(c).get("allowPrivilegeEscalation") is not False]
    if not names:
        return None
    return (
        "allowPrivilegeEscalation != false",
        f"{_named('container', names)} must set securityContext.allowPrivilegeEscalation=false",
    )


def capabilities_restricted(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    no_drop = [
        c["name"] for c in _containers(spec) if "ALL" not in ((_sc(c).get("capabilities") or {}).get("drop") or [])
    ]
    adds = {
        c["name"]: [a for a in (_sc(c).get("capabilities") or {}).get("add") or [] if a != "NET_BIND_SERVICE"]
        for c in _containers(spec)
    }
    adds = {k: v for k, v in adds.items() if v}
    parts = [f'{_named("container", no_drop)} must set securityContext.capabilities.drop=["ALL"]'] if no_drop else []
    if adds:
        caps = sorted({a for v in adds.values() for a in v})
        parts.append(
            f"{_named('container', list(adds))} must not include {_quote(caps)} in securityContext.capabilities.add"
        )
    return ("unrestricted capabilities", "; ".join(parts)) if parts else None


def restricted_volumes(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    bad = [
        (v["name"], next((k for k in v if k != "name"), ""))
        for v in spec.get("volumes") or []
        if not any(k in v for k in RESTRICTED_VOLUMES)
    ]
    if not bad:
        return None
    names, types = [n for n, _ in bad], sorted({t for _, t in bad})
    verb, noun = ("uses", "type") if len(bad) == 1 else ("use", "types")
    return "restricted volume types", f"{_named('volume', names)} {verb} restricted volume {noun} {_quote(types)}"


def run_as_non_root(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    pod = (spec.get("securityContext") or {}).get("runAsNonRoot")
    explicit_false = [c["name"] for c in _containers(spec) if _sc(c).get("runAsNonRoot") is False]
    implicit = [c["name"] for c in _containers(spec) if _sc(c).get("runAsNonRoot") is None and pod is not True]
    if pod is False:
        return "runAsNonRoot != true", "pod must not set securityContext.runAsNonRoot=false"
    if explicit_false:
        return (
            "runAsNonRoot != true",
            f"{_named('container', explicit_false)} must not set securityContext.runAsNonRoot=false",
        )
    if implicit:
        return (
            "runAsNonRoot != true",
            f"pod or {_named('container', implicit)} must set securityContext.runAsNonRoot=true",
        )
    return None


def run_as_user(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    parts = ["pod must not set runAsUser=0"] if (spec.get("securityContext") or {}).get("runAsUser") == 0 else []
    bad = [c["name"] for c in _containers(spec) if _sc(c).get("runAsUser") == 0]
    if bad:
        parts.append(f"{_named('container', bad)} must not set runAsUser=0")
    return ("runAsUser=0", "; ".join(parts)) if parts else None


def seccomp_restricted(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    pod, per = _seccomp_types(spec)
    ok = ("RuntimeDefault", "Localhost")
    if pod is not None and pod not in ok:
        return "seccompProfile", f'pod must not set securityContext.seccompProfile.type to "{pod}"'
    bad = [n for n, t in per.items() if t is not None and t not in ok]
    if bad:
        return (
            "seccompProfile",
            f'{_named("container", bad)} must not set securityContext.seccompProfile.type to "{per[bad[0]]}"',
        )
    unset = [n for n, t in per.items() if t is None and pod is None]
    if unset:
        return (
            "seccompProfile",
            f"pod or {_named('container', unset)} must set securityContext.seccompProfile.type "
            f'to "RuntimeDefault" or "Localhost"',
        )
    return None


# (check, level, the baseline check it overrides) in registry order.
BASELINE: list[Check] = [
    capabilities_baseline,
    host_namespaces,
    host_path_volumes,
    host_ports,
    privileged,
    seccomp_baseline,
]
RESTRICTED: list[tuple[Check, Check | None]] = [
    (allow_privilege_escalation, None),
    (capabilities_restricted, capabilities_baseline),
    (restricted_volumes, host_path_volumes),
    (run_as_non_root, None),
    (run_as_user, None),
    (seccomp_restricted, seccomp_baseline),
]


def violations(level: str, spec: Mapping[str, Any]) -> list[str]:
    if level not in ("baseline", "restricted"):
        return []
    checks = list(BASELINE)
    if level == "restricted":
        overridden = {o for _, o in RESTRICTED if o is not None}
        checks = [c for c in checks if c not in overridden] + [c for c, _ in RESTRICTED]
    found = [c(spec) for c in checks]
    return [f"{reason} ({detail})" if detail else reason for reason, detail in (f for f in found if f)]


def admit(namespace: Mapping[str, Any] | None, pod: Mapping[str, Any]) -> None:
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    level = labels.get(ENFORCE, "privileged")
    if level not in LEVELS:
        level = "restricted"  # an unknown level is enforced as the strictest (admission.go)
    found = violations(level, pod.get("spec") or {})
    if found:
        name = (pod.get("metadata") or {}).get("name", "")
        version = labels.get(ENFORCE_VERSION, "latest")
        raise ApiError(
            403,
            "Forbidden",
            f'pods "{name}" is forbidden: violates PodSecurity "{level}:{version}": ' + ", ".join(found),
            {"name": name, "kind": "pods"},
        )
