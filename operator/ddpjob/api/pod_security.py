"""The Pod Security Standards (baseline and restricted), checked on a Pod.

Upstream: staging/src/k8s.io/pod-security-admission (policy/check_*.go, policy/registry.go)
at "latest". Each check gives upstream's reason and detail (what Pod Security Admission
says) and the path of every offending field, so that the operator's template policy
(`template_policy`, which refuses what baseline forbids) names the job's field. The dev
cluster's Pod Security Admission (`ddpjob_devcluster.admission.podsecurity`) uses the same
checks. Pure; odd types are the API's own validation's to report, never an exception here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

LEVELS = ('privileged', 'baseline', 'restricted')
# policy/check_capabilities_baseline.go: the container runtime's default set.
BASELINE_CAPS = {'AUDIT_WRITE', 'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'MKNOD', 'NET_BIND_SERVICE',
                 'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID', 'SYS_CHROOT'}
# policy/check_restrictedVolumes.go
RESTRICTED_VOLUMES = ('configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim',
                      'projected', 'secret')
# policy/check_seLinuxOptions.go
SELINUX_TYPES = ('', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t')
# policy/check_sysctls.go: the namespaced sysctls known to be safe, up to 1.32.
SAFE_SYSCTLS = {'kernel.shm_rmid_forced', 'net.ipv4.ip_local_port_range', 'net.ipv4.ip_unprivileged_port_start',
                'net.ipv4.tcp_syncookies', 'net.ipv4.ping_group_range', 'net.ipv4.ip_local_reserved_ports',
                'net.ipv4.tcp_keepalive_time', 'net.ipv4.tcp_fin_timeout', 'net.ipv4.tcp_keepalive_intvl',
                'net.ipv4.tcp_keepalive_probes', 'net.ipv4.tcp_rmem', 'net.ipv4.tcp_wmem'}
APPARMOR_ANNOTATION = 'container.apparmor.security.beta.kubernetes.io/'
CONTAINER_FIELDS = ('initContainers', 'containers', 'ephemeralContainers')


@dataclass(frozen=True)
class Found:
    """One failed check: upstream's reason and detail, and the Pod's offending fields."""
    reason: str
    detail: str
    paths: tuple[str, ...]


Check = Callable[[Mapping[str, Any]], 'Found | None']


def as_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


def pod_spec(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_map(pod.get('spec'))


def _containers(pod: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(path, name, container) of every container, init and ephemeral ones included."""
    for field in CONTAINER_FIELDS:
        for i, c in enumerate(as_list(pod_spec(pod).get(field))):
            if isinstance(c, Mapping):
                yield f'spec.{field}[{i}]', str(c.get('name', '')), c


def _sc(c: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_map(c.get('securityContext'))


def _pod_sc(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return _sc(pod_spec(pod))


def _quote(xs: list[str]) -> str:
    return ', '.join(f'"{x}"' for x in xs)


def _named(noun: str, names: list[str]) -> str:
    return f'{noun}{"s" if len(names) > 1 else ""} {_quote(names)}'


def _found(reason: str, parts: list[str], paths: list[str]) -> Found | None:
    return Found(reason, '; '.join(parts), tuple(paths)) if paths else None


def app_armor(pod: Mapping[str, Any]) -> Found | None:
    """Unconfined AppArmor, by field (1.30+) or by the beta annotation."""
    ok = ('RuntimeDefault', 'Localhost')
    bad, paths = [], []
    for key, value in as_map(as_map(pod.get('metadata')).get('annotations')).items():
        if str(key).startswith(APPARMOR_ANNOTATION) and value not in ('', 'runtime/default') \
                and not str(value).startswith('localhost/'):
            bad.append(f'{key}="{value}"')
            paths.append(f'metadata.annotations[{key}]')
    kind = as_map(_pod_sc(pod).get('appArmorProfile')).get('type')
    if kind is not None and kind not in ok:
        bad.append(f'pod securityContext.appArmorProfile.type="{kind}"')
        paths.append('spec.securityContext.appArmorProfile.type')
    for path, name, c in _containers(pod):
        kind = as_map(_sc(c).get('appArmorProfile')).get('type')
        if kind is not None and kind not in ok:
            bad.append(f'container "{name}" securityContext.appArmorProfile.type="{kind}"')
            paths.append(f'{path}.securityContext.appArmorProfile.type')
    return _found('forbidden AppArmor profile' + ('s' if len(bad) > 1 else ''), [', '.join(bad)], paths)


def capabilities_baseline(pod: Mapping[str, Any]) -> Found | None:
    bad: dict[str, list[str]] = {}
    paths = []
    for path, name, c in _containers(pod):
        added = [a for a in as_list(as_map(_sc(c).get('capabilities')).get('add')) if a not in BASELINE_CAPS]
        if added:
            bad[name] = added
            paths.append(f'{path}.securityContext.capabilities.add')
    caps = sorted({str(a) for v in bad.values() for a in v})
    return _found('non-default capabilities', [f'{_named("container", list(bad))} must not include {_quote(caps)} '
                                               f'in securityContext.capabilities.add'], paths)


def host_namespaces(pod: Mapping[str, Any]) -> Found | None:
    used = [k for k in ('hostNetwork', 'hostPID', 'hostIPC') if pod_spec(pod).get(k) is True]
    return _found('host namespaces', [', '.join(f'{k}=true' for k in used)], [f'spec.{k}' for k in used])


def host_path_volumes(pod: Mapping[str, Any]) -> Found | None:
    bad = [(i, v) for i, v in enumerate(as_list(pod_spec(pod).get('volumes'))) if isinstance(v, Mapping) and 'hostPath' in v]
    return _found('hostPath volumes', [_named('volume', [str(v.get('name', '')) for _, v in bad])],
                  [f'spec.volumes[{i}].hostPath' for i, _ in bad])


def host_ports(pod: Mapping[str, Any]) -> Found | None:
    used, paths = [], []
    for path, name, c in _containers(pod):
        for j, p in enumerate(as_list(c.get('ports'))):
            if isinstance(p, Mapping) and p.get('hostPort'):
                used.append(f'container "{name}" uses hostPort {p["hostPort"]}')
                paths.append(f'{path}.ports[{j}].hostPort')
    return _found('hostPort', [', '.join(used)], paths)


def privileged(pod: Mapping[str, Any]) -> Found | None:
    bad = [(path, name) for path, name, c in _containers(pod) if _sc(c).get('privileged') is True]
    return _found('privileged', [f'{_named("container", [n for _, n in bad])} must not set '
                                 f'securityContext.privileged=true'],
                  [f'{p}.securityContext.privileged' for p, _ in bad])


def proc_mount(pod: Mapping[str, Any]) -> Found | None:
    bad = [(path, name, _sc(c).get('procMount')) for path, name, c in _containers(pod)
           if _sc(c).get('procMount') not in (None, 'Default')]
    return _found('procMount', [f'{_named("container", [n for _, n, _ in bad])} must not set '
                                f'securityContext.procMount to {_quote(sorted({str(v) for _, _, v in bad}))}'],
                  [f'{p}.securityContext.procMount' for p, _, _ in bad])


def _selinux_bad(options: Any) -> list[str]:
    options = as_map(options)
    bad = [k for k in ('user', 'role') if options.get(k)]
    return bad + (['type'] if options.get('type', '') not in SELINUX_TYPES else [])


def se_linux_options(pod: Mapping[str, Any]) -> Found | None:
    paths = [f'spec.securityContext.seLinuxOptions.{k}' for k in _selinux_bad(_pod_sc(pod).get('seLinuxOptions'))]
    subjects = ['pod'] if paths else []
    for path, name, c in _containers(pod):
        bad = _selinux_bad(_sc(c).get('seLinuxOptions'))
        paths += [f'{path}.securityContext.seLinuxOptions.{k}' for k in bad]
        subjects += [f'container "{name}"'] if bad else []
    return _found('seLinuxOptions', [f'{", ".join(subjects)} set forbidden securityContext.seLinuxOptions'], paths)


def _seccomp(pod: Mapping[str, Any]) -> tuple[Any, list[tuple[str, str, Any]]]:
    kind = as_map(_pod_sc(pod).get('seccompProfile')).get('type')
    return kind, [(p, n, as_map(_sc(c).get('seccompProfile')).get('type')) for p, n, c in _containers(pod)]


def seccomp_baseline(pod: Mapping[str, Any]) -> Found | None:
    kind, per = _seccomp(pod)
    bad = [(p, n) for p, n, t in per if t == 'Unconfined']
    who = (['pod'] if kind == 'Unconfined' else []) + ([_named('container', [n for _, n in bad])] if bad else [])
    return _found('seccompProfile', [f'{w} must not set securityContext.seccompProfile.type to "Unconfined"'
                                     for w in who],
                  (['spec.securityContext.seccompProfile.type'] if kind == 'Unconfined' else [])
                  + [f'{p}.securityContext.seccompProfile.type' for p, _ in bad])


def sysctls(pod: Mapping[str, Any]) -> Found | None:
    bad = [(i, as_map(s).get('name')) for i, s in enumerate(as_list(_pod_sc(pod).get('sysctls')))
           if as_map(s).get('name') not in SAFE_SYSCTLS]
    return _found('forbidden sysctls', [', '.join(str(n) for _, n in bad)],
                  [f'spec.securityContext.sysctls[{i}].name' for i, _ in bad])


def windows_host_process(pod: Mapping[str, Any]) -> Found | None:
    on_pod = as_map(_pod_sc(pod).get('windowsOptions')).get('hostProcess') is True
    bad = [(p, n) for p, n, c in _containers(pod) if as_map(_sc(c).get('windowsOptions')).get('hostProcess') is True]
    who = (['pod'] if on_pod else []) + ([_named('container', [n for _, n in bad])] if bad else [])
    return _found('hostProcess', [f'{" and ".join(who)} must not set securityContext.windowsOptions.hostProcess=true'],
                  (['spec.securityContext.windowsOptions.hostProcess'] if on_pod else [])
                  + [f'{p}.securityContext.windowsOptions.hostProcess' for p, _ in bad])


def allow_privilege_escalation(pod: Mapping[str, Any]) -> Found | None:
    bad = [(p, n) for p, n, c in _containers(pod) if _sc(c).get('allowPrivilegeEscalation') is not False]
    return _found('allowPrivilegeEscalation != false', [f'{_named("container", [n for _, n in bad])} must set '
                                                        f'securityContext.allowPrivilegeEscalation=false'],
                  [f'{p}.securityContext.allowPrivilegeEscalation' for p, _ in bad])


def capabilities_restricted(pod: Mapping[str, Any]) -> Found | None:
    no_drop, adds, paths = [], {}, []
    for path, name, c in _containers(pod):
        caps = as_map(_sc(c).get('capabilities'))
        if 'ALL' not in as_list(caps.get('drop')):
            no_drop.append(name)
            paths.append(f'{path}.securityContext.capabilities.drop')
        added = [a for a in as_list(caps.get('add')) if a != 'NET_BIND_SERVICE']
        if added:
            adds[name] = added
            paths.append(f'{path}.securityContext.capabilities.add')
    parts = [f'{_named("container", no_drop)} must set securityContext.capabilities.drop=["ALL"]'] if no_drop else []
    if adds:
        caps = sorted({str(a) for v in adds.values() for a in v})
        parts.append(f'{_named("container", list(adds))} must not include {_quote(caps)} in '
                     f'securityContext.capabilities.add')
    return _found('unrestricted capabilities', parts, paths)


def restricted_volumes(pod: Mapping[str, Any]) -> Found | None:
    bad = [(i, str(v.get('name', '')), next((str(k) for k in v if k != 'name'), ''))
           for i, v in enumerate(as_list(pod_spec(pod).get('volumes')))
           if isinstance(v, Mapping) and not any(k in v for k in RESTRICTED_VOLUMES)]
    types = sorted({t for _, _, t in bad})
    verb, noun = ('uses', 'type') if len(bad) == 1 else ('use', 'types')
    return _found('restricted volume types', [f'{_named("volume", [n for _, n, _ in bad])} {verb} restricted '
                                              f'volume {noun} {_quote(types)}'],
                  [f'spec.volumes[{i}]' for i, _, _ in bad])


def run_as_non_root(pod: Mapping[str, Any]) -> Found | None:
    pod_value = _pod_sc(pod).get('runAsNonRoot')
    if pod_value is False:
        return Found('runAsNonRoot != true', 'pod must not set securityContext.runAsNonRoot=false',
                     ('spec.securityContext.runAsNonRoot',))
    explicit = [(p, n) for p, n, c in _containers(pod) if _sc(c).get('runAsNonRoot') is False]
    implicit = [(p, n) for p, n, c in _containers(pod) if _sc(c).get('runAsNonRoot') is None and pod_value is not True]
    bad, text = (explicit, 'must not set securityContext.runAsNonRoot=false') if explicit else \
        (implicit, 'must set securityContext.runAsNonRoot=true')
    who = _named("container", [n for _, n in bad])
    return _found('runAsNonRoot != true', [f'{who if explicit else "pod or " + who} {text}'],
                  [f'{p}.securityContext.runAsNonRoot' for p, _ in bad])


def run_as_user(pod: Mapping[str, Any]) -> Found | None:
    on_pod = _pod_sc(pod).get('runAsUser') == 0
    bad = [(p, n) for p, n, c in _containers(pod) if _sc(c).get('runAsUser') == 0]
    return _found('runAsUser=0', (['pod must not set runAsUser=0'] if on_pod else [])
                  + ([f'{_named("container", [n for _, n in bad])} must not set runAsUser=0'] if bad else []),
                  (['spec.securityContext.runAsUser'] if on_pod else [])
                  + [f'{p}.securityContext.runAsUser' for p, _ in bad])


def seccomp_restricted(pod: Mapping[str, Any]) -> Found | None:
    kind, per = _seccomp(pod)
    ok = ('RuntimeDefault', 'Localhost')
    if kind is not None and kind not in ok:
        return Found('seccompProfile', f'pod must not set securityContext.seccompProfile.type to "{kind}"',
                     ('spec.securityContext.seccompProfile.type',))
    bad = [(p, n, t) for p, n, t in per if t is not None and t not in ok]
    if bad:
        return Found('seccompProfile', f'{_named("container", [n for _, n, _ in bad])} must not set '
                                       f'securityContext.seccompProfile.type to "{bad[0][2]}"',
                     tuple(f'{p}.securityContext.seccompProfile.type' for p, _, _ in bad))
    unset = [(p, n) for p, n, t in per if t is None and kind is None]
    return _found('seccompProfile', [f'pod or {_named("container", [n for _, n in unset])} must set '
                                     f'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"'],
                  [f'{p}.securityContext.seccompProfile.type' for p, _ in unset])


# In registry (file-name) order; each restricted check with the baseline check it replaces.
BASELINE: list[Check] = [app_armor, capabilities_baseline, host_namespaces, host_path_volumes, host_ports,
                         privileged, proc_mount, se_linux_options, seccomp_baseline, sysctls, windows_host_process]
RESTRICTED: list[tuple[Check, Check | None]] = [
    (allow_privilege_escalation, None), (capabilities_restricted, capabilities_baseline),
    (restricted_volumes, host_path_volumes), (run_as_non_root, None), (run_as_user, None),
    (seccomp_restricted, seccomp_baseline)]


def findings(level: str, pod: Mapping[str, Any]) -> list[tuple[Check, Found]]:
    """(check, what it found) of a level's failed checks, in Pod Security Admission's order."""
    overridden = {o for _, o in RESTRICTED if o is not None}
    checks = {'baseline': BASELINE, 'restricted': [c for c in BASELINE if c not in overridden]
              + [c for c, _ in RESTRICTED]}.get(level, [])
    return [(check, f) for check in checks if (f := check(pod)) is not None]


def violations(level: str, pod: Mapping[str, Any]) -> list[str]:
    """Upstream's `reason (detail)` list for a Pod under a level; empty when it passes."""
    return [f'{f.reason} ({f.detail})' if f.detail else f.reason for _, f in findings(level, pod)]
