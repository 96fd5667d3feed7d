"""Builds the upstream binaries the real dev cluster runs, from pinned Go modules.

Each component is a small Go module of ours under `hack/upstream/<name>/` whose go.mod
pins one upstream release and lists its commands as `tool` directives (go_module.py reads
it); go.sum makes the download checksum-verified. `go build` fetches the modules from the module proxy and
builds the commands, exactly as `go install` builds any Go tool: no upstream source is
kept in this repository.

Binaries land in a cache keyed by the component, its version and a hash of the
module's go.mod/go.sum (`$DDPJOB_UPSTREAM_CACHE`, default
`~/.cache/ddpjob/upstream/`), so a second build of the same pins costs nothing. A file
lock makes concurrent builders (parallel test workers) wait for one build.

`python -m ddpjob_devcluster.controlplane.build [component|group ...]` builds the named
components (`make control-plane`: the group `plane`; `make gang-schedulers`: the group
`gang-schedulers`; no argument: all).
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import shutil
import subprocess
import sys
import time

from ddpjob_devcluster.controlplane import c_libraries
from ddpjob_devcluster.controlplane.go_module import BuildError, Component, built_name

# A first build of Kubernetes on 2 cores takes about 15 minutes; past an hour
# something is wrong (a hung download), and the caller hears so.
BUILD_DEADLINE_SECONDS = 3600


KUBERNETES = Component("kubernetes", "k8s.io/kubernetes", version_package="k8s.io/component-base/version")
ETCD = Component("etcd", "go.etcd.io/etcd/server/v3")
# The coscheduling gang plugin's scheduler (`gang: coscheduling`), a second scheduler.
# Not stamped: its release number is not a Kubernetes one, and component-base's version
# decides which feature gates exist.
SCHEDULER_PLUGINS = Component("scheduler-plugins", "sigs.k8s.io/scheduler-plugins")
# Volcano's scheduler and controller manager (`gang: volcano`); not stamped either.
VOLCANO = Component("volcano", "volcano.sh/volcano")
# Kueue's manager (`gang: kueue`): quota, queueing and preemption for plain-Pod groups.
KUEUE = Component("kueue", "sigs.k8s.io/kueue")
# kind itself, for the kind tier (`make engine`: the project's container engine comes from
# Debian's packages, hack/engine-packages.sh, and kind beside it).
KIND = Component("kind", "sigs.k8s.io/kind", cgo=False)
# What a kind node holds besides the control plane's binaries (hack/kind-node-image.sh):
# the node's Kubernetes commands (same pin as `kubernetes`, so Go's cache shares most of
# the work), containerd and runc (built as kind's base image builds them: containerd 2, which
# the pinned kubelet needs), crictl, the CNI plugins, CoreDNS and the local-path provisioner.
KIND_NODE = (
    Component("kubernetes-node", "k8s.io/kubernetes", version_package="k8s.io/component-base/version"),
    Component(
        "containerd",
        "github.com/containerd/containerd/v2",
        cgo=False,
        tags=("no_aufs", "no_zfs", "no_btrfs", "no_devmapper"),
    ),
    Component(
        "runc",
        "github.com/opencontainers/runc",
        tags=("seccomp",),
        cgo=True,
        c_libraries=(("libseccomp", "libseccomp-dev"),),
    ),
    Component("cri-tools", "sigs.k8s.io/cri-tools", cgo=False),
    Component("cni-plugins", "github.com/containernetworking/plugins", cgo=False),
    Component("coredns", "github.com/coredns/coredns", cgo=False),
    Component("local-path-provisioner", "github.com/rancher/local-path-provisioner", cgo=False),
)
COMPONENTS = {c.name: c for c in (KUBERNETES, ETCD, SCHEDULER_PLUGINS, VOLCANO, KUEUE, KIND, *KIND_NODE)}
# What the control plane itself needs (`make control-plane`), the gang schedulers and
# queues started beside it for the gang tier (`make gang-schedulers`, `make test-gangs`),
# and the kind node's (`make kind-node-image`).
PLANE = ("kubernetes", "etcd")
GANG_SCHEDULERS = ("scheduler-plugins", "volcano", "kueue")
GROUPS = {
    "plane": PLANE,
    "gang-schedulers": GANG_SCHEDULERS,
    "kind-node": (*PLANE, *(c.name for c in KIND_NODE)),
}


def cache_root() -> pathlib.Path:
    configured = os.environ.get("DDPJOB_UPSTREAM_CACHE")
    if configured:
        return pathlib.Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
    return pathlib.Path(base) / "ddpjob" / "upstream"


def bin_dir(component: Component) -> pathlib.Path:
    return cache_root() / component.key() / "bin"


def cached(component: Component) -> pathlib.Path | None:
    folder = bin_dir(component)
    if all((folder / name).is_file() for name in component.binary_names()):
        return folder
    return None


def module_dir(component: Component) -> pathlib.Path:
    """The pinned module's files in the Go module cache (downloaded by its build): where
    its CRDs, RBAC and configuration are read from at run time, never copied in."""
    done = subprocess.run(
        [go_toolchain(), "list", "-m", "-f", "{{.Dir}}", component.module],
        cwd=component.folder,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, GOFLAGS="-mod=readonly"),
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise BuildError(f"{component.name}: cannot find module {component.module}: {done.stderr.strip()[:300]}")
    return pathlib.Path(done.stdout.strip())


def go_toolchain() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "the real control plane is built from Go modules, and no `go` command is on PATH (install Go 1.26 or newer)"
        )
    return go


def build(component: Component, *, quiet: bool = False) -> pathlib.Path:
    """The folder holding the component's binaries, built first if not cached."""
    found = cached(component)
    if found is not None:
        return found
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{component.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder; the others find its result
        found = cached(component)
        if found is not None:
            return found
        return _build_locked(component, quiet=quiet)


def _build_locked(component: Component, *, quiet: bool) -> pathlib.Path:
    go = go_toolchain()
    c_libraries.ensure(component)
    final = bin_dir(component)
    staging = final.parent / "bin.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log_path = final.parent / "build.log"
    tools = component.tools()
    command = [
        go,
        "build",
        "-trimpath",
        *component.build_flags(),
        "-ldflags",
        component.ldflags(),
        "-o",
        str(staging) + os.sep,
        *tools,
    ]
    if not quiet:
        print(
            f"building {component.name} {component.version()} ({', '.join(component.binary_names())}) "
            f"into {final} (log: {log_path})",
            file=sys.stderr,
            flush=True,
        )
    started = time.monotonic()
    # GOFLAGS=-mod=readonly: go.sum must already cover every module (checksums are
    # verified, never added behind the reviewer's back); GOTOOLCHAIN=auto lets a module
    # that needs a newer Go fetch that toolchain from the proxy.
    env = dict(os.environ, GOFLAGS="-mod=readonly", GOTOOLCHAIN=os.environ.get("GOTOOLCHAIN", "auto"))
    if component.cgo is not None:
        env["CGO_ENABLED"] = "1" if component.cgo else "0"
    with open(log_path, "w") as log:
        try:
            done = subprocess.run(
                command,
                cwd=component.folder,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                stdin=subprocess.DEVNULL,
                timeout=BUILD_DEADLINE_SECONDS,
            )
        except subprocess.TimeoutExpired:
            raise BuildError(
                f"building {component.name} took over {BUILD_DEADLINE_SECONDS} s and was stopped; see {log_path}"
            ) from None
    if done.returncode != 0:
        raise BuildError(
            f"building {component.name} {component.version()} failed (exit {done.returncode}); "
            f"see {log_path}: {_last_line(log_path)}"
        )
    for name in component.binary_names():
        built = staging / built_name(name, tools)
        if not built.is_file():
            raise BuildError(f"building {component.name}: {built.name} was not produced; see {log_path}")
        if built.name != name:
            built.rename(staging / name)
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    if not quiet:
        print(f"built {component.name} in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return final


def _last_line(path: pathlib.Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(empty log)"


def main(argv: list[str] | None = None) -> int:
    groups = GROUPS
    asked = (argv if argv is not None else sys.argv[1:]) or list(COMPONENTS)
    names = [name for word in asked for name in groups.get(word, (word,))]
    unknown = [n for n in names if n not in COMPONENTS]
    if unknown:
        print(
            f"unknown component {unknown[0]!r}: choose from {', '.join(COMPONENTS)} (or a group: {', '.join(groups)})",
            file=sys.stderr,
        )
        return 2
    try:
        for name in names:
            folder = build(COMPONENTS[name])
            print(f"{name} {COMPONENTS[name].version()}: {folder}")
    except BuildError as exc:
        print(f"make control-plane: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
