"""The baseline Pod Security Standard's checks, over a DDPJob's template, with field paths.

The operator creates Pods with its own ServiceAccount, so whatever a DDPJob's template
asks for is granted with the operator's rights, not its author's. By default the
template may ask for nothing the baseline standard forbids
(https://kubernetes.io/docs/concepts/security/pod-security-standards/, checked upstream by
k8s.io/pod-security-admission policy/check_*.go). Each check yields
(allowance, path, what): the operator's `templatePolicy.allow` names the allowance that
lets it through. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

PRIVILEGED, HOST_PATH, HOST_NAMESPACES, CAPABILITIES = "privileged", "hostPath", "hostNamespaces", "capabilities"
HOST_PORTS, SELINUX, HOST_PROCESS, PROC_MOUNT = "hostPorts", "seLinux", "hostProcess", "procMount"
UNCONFINED, SYSCTLS, PROBE_HOSTS = "unconfinedProfiles", "sysctls", "probeHosts"
BASELINE = (
    PRIVILEGED,
    HOST_PATH,
    HOST_NAMESPACES,
    CAPABILITIES,
    HOST_PORTS,
    SELINUX,
    HOST_PROCESS,
    PROC_MOUNT,
    UNCONFINED,
    SYSCTLS,
    PROBE_HOSTS,
)

# The checks of k8s.io/pod-security-admission v0.37 (Kubernetes 1.37, the version the
# project pins), policy/check_*.go; docs/threat-model.md compares them item by item.
# check_seLinuxOptions.go (1.31+)
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
# check_sysctls.go: the safe set of 1.37
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_notsent_lowat",
}
SECCOMP_POD = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER = "container.seccomp.security.alpha.kubernetes.io/"
APPARMOR = "container.apparmor.security.beta.kubernetes.io/"
# check_appArmorProfile.go: what the fields and the annotations may say
APPARMOR_TYPES = {None, "RuntimeDefault", "Localhost"}
# check_hostProbesAndhostLifecycle.go (1.34+): a probe or lifecycle handler with a host
# makes the kubelet connect there, from the node (e.g. 169.254.169.254, 127.0.0.1:10250).
PROBES, HANDLERS = ("livenessProbe", "readinessProbe", "startupProbe"), ("postStart", "preStop")

Finding = tuple[str, str, str]  # (allowance, field path, what is asked)


def _containers(spec: Mapping[str, Any], base: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for i, c in enumerate(spec.get(field) or []):
            if isinstance(c, Mapping):
                yield f"{base}.{field}[{i}]", c


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _security(sc: Mapping[str, Any], path: str) -> Iterator[Finding]:
    """The securityContext fields checked at Pod and container level alike."""
    se = _mapping(sc.get("seLinuxOptions"))
    if se.get("type", "") not in SELINUX_TYPES:
        yield SELINUX, f"{path}.seLinuxOptions.type", f"SELinux type {se.get('type')!r}"
    for key in ("user", "role"):
        if se.get(key):
            yield SELINUX, f"{path}.seLinuxOptions.{key}", f"a custom SELinux {key}"
    if _mapping(sc.get("windowsOptions")).get("hostProcess") is True:
        yield HOST_PROCESS, f"{path}.windowsOptions.hostProcess", "a Windows host process"
    if _mapping(sc.get("seccompProfile")).get("type") == "Unconfined":
        yield UNCONFINED, f"{path}.seccompProfile.type", "an Unconfined seccomp profile"
    apparmor = _mapping(sc.get("appArmorProfile")).get("type")
    if apparmor not in APPARMOR_TYPES:
        yield UNCONFINED, f"{path}.appArmorProfile.type", f"the AppArmor profile {apparmor!r}"[:200]


def _hosts(container: Mapping[str, Any], path: str) -> Iterator[Finding]:
    """Probes and lifecycle handlers that name a host."""
    handlers = [(f"{path}.{p}", _mapping(container.get(p))) for p in PROBES]
    handlers += [(f"{path}.lifecycle.{h}", _mapping(_mapping(container.get("lifecycle")).get(h))) for h in HANDLERS]
    for where, handler in handlers:
        for kind in ("httpGet", "tcpSocket"):
            if _mapping(handler.get(kind)).get("host"):
                yield (
                    PROBE_HOSTS,
                    f"{where}.{kind}.host",
                    "a probe or lifecycle handler that connects to a host of its own choosing, from the node",
                )


def findings(template: Mapping[str, Any], base: str = "spec.template") -> Iterator[Finding]:
    """Everything in `template` (a Pod template: metadata and spec) that baseline forbids."""
    spec = _mapping(template.get("spec"))
    sbase = f"{base}.spec"
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key) is True:
            yield HOST_NAMESPACES, f"{sbase}.{key}", f"{key}=true"
    for i, volume in enumerate(spec.get("volumes") or []):
        if isinstance(volume, Mapping) and "hostPath" in volume:
            yield HOST_PATH, f"{sbase}.volumes[{i}].hostPath", "a hostPath volume"
    pod_sc = _mapping(spec.get("securityContext"))
    yield from _security(pod_sc, f"{sbase}.securityContext")
    for i, sysctl in enumerate(pod_sc.get("sysctls") or []):
        if _mapping(sysctl).get("name") not in SAFE_SYSCTLS:
            yield (
                SYSCTLS,
                f"{sbase}.securityContext.sysctls[{i}]",
                f"the unsafe sysctl {_mapping(sysctl).get('name')!r}",
            )
    for path, c in _containers(spec, sbase):
        sc = _mapping(c.get("securityContext"))
        if sc.get("privileged") is True:
            yield PRIVILEGED, f"{path}.securityContext.privileged", "a privileged container"
        # Stricter than baseline, which allows re-adding the runtime's default set: a
        # training container needs none, and "add nothing" is simple to audit.
        added = list(_mapping(sc.get("capabilities")).get("add") or [])
        if added:
            yield CAPABILITIES, f"{path}.securityContext.capabilities.add", f"adding Linux capabilities {added}"
        if sc.get("procMount") not in (None, "Default"):
            yield PROC_MOUNT, f"{path}.securityContext.procMount", f"procMount {sc.get('procMount')!r}"
        yield from _security(sc, f"{path}.securityContext")
        for j, port in enumerate(c.get("ports") or []):
            if _mapping(port).get("hostPort"):
                yield HOST_PORTS, f"{path}.ports[{j}].hostPort", "a hostPort"
        yield from _hosts(c, path)
    annotations = _mapping(_mapping(template.get("metadata")).get("annotations"))
    for key, value in annotations.items():
        unconfined = ((key == SECCOMP_POD or key.startswith(SECCOMP_CONTAINER)) and value == "unconfined") or (
            key.startswith(APPARMOR) and not (value in ("", "runtime/default") or str(value).startswith("localhost/"))
        )
        if unconfined:
            yield UNCONFINED, f"{base}.metadata.annotations[{key}]", "an unconfined profile (legacy annotation)"
