"""One machine standing in for the cluster's nodes: the executor that `ddpjob run` and the
dev cluster's process kubelet share.

It starts a Pod's `trainer` container (`container.start_container`) with what only a
cluster provides substituted, the same way for both:

- a rendezvous port per gang attempt (`port_for`): two attempts may overlap while the old
  one terminates, and a fresh port keeps the new rendezvous away from the old one's store;
- an IP per Pod, as a CNI plugin gives one: by default a random 127/8 address (the
  dev cluster's own network namespace hands out Pod CIDR addresses instead), on which
  the Pod's launcher binds the contract's progress port (so Pods never collide on it);
- an elastic job's node addresses (`contract.node_address`): node i's store is at node 0's
  loopback address plus i, from a random block per attempt (`loopback_base`), as Pods
  find each other through the headless Service's DNS names in a cluster;
- the checkpoint directory, the progress file and the termination log (the Pod's
  terminationMessagePath, read when the container ends) in local directories
  (`contract.local_overrides`);
- die-with-parent: every container gets `preexec` before exec (ownership.py), so none
  outlives the thread that started it;
- every container carries a tag under `tag_prefix`, which its descendants inherit, so
  `stop_all` and `sweep` reach processes that left the container's session.

A container's end and exit code (128+N for a signal) are `ContainerProcess.terminated()`'s.
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import time
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO

from ddpjob import contract
from ddpjob.local import ownership, ports
from ddpjob.local.container import ContainerProcess, start_container
from ddpjob.local.process_tags import kill_tagged, tagged_pids
from ddpjob.local.progress_view import loopback_address

POLL_SECONDS = 0.05
TERMINATION_LOG_FILE = "termination-log"  # beside the Pod's progress file
BLOCK = 1024  # loopback addresses per attempt: node stores 0..1022 of a job


def loopback_base(rng: random.Random | None = None) -> str:
    """Node 0's store address of one gang attempt: x.y.z.1 of a random block of BLOCK
    addresses in 127.1.0.0-127.254.255.255 (all of 127/8 is this machine's loopback)."""
    value = (127 << 24) + (rng or random).randrange(0x010000, 0xFF0000, BLOCK) + 1
    return ".".join(str(b) for b in value.to_bytes(4, "big"))


@dataclass(frozen=True)
class Started:
    proc: ContainerProcess
    ip: str  # the Pod's address ("Pod IP") on this machine, where its progress port is served


@dataclass
class LocalNode:
    tag_prefix: str  # every container's tag starts with it (the sweep's target)
    stop_grace: float = 10.0  # SIGTERM, then SIGKILL after this many seconds
    preexec: Callable[[], None] = ownership.die_with_parent
    ports: dict[Hashable, int] = field(default_factory=dict)  # attempt key -> rendezvous port
    addresses: Callable[[], str] | None = None  # each Pod's IP (default: a random 127/8 one)
    bases: dict[int, str] = field(default_factory=dict)  # rendezvous port (one per attempt) -> node 0's store

    def port_for(self, attempt: Hashable) -> int:
        """The rendezvous port of one gang attempt (a key such as (namespace, job, attempt))."""
        if attempt not in self.ports:
            # setdefault: kubelets of several Nodes may share one map (one attempt, one
            # port on every node) and ask at once; the first answer wins for all.
            self.ports.setdefault(attempt, ports.free_port())
        return self.ports[attempt]

    def start(
        self,
        pod: Mapping,
        *,
        port: int,
        checkpoint_dir: str | None,
        progress_file: str,
        out: IO[str] | None = None,
        cwd: str | None = None,
        tag: str | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> Started:
        """Start the Pod's trainer container; LocalRunError (or OSError) when it cannot start."""
        ip = (self.addresses or loopback_address)()
        base = self.bases.setdefault(port, loopback_base())
        termination_log = os.path.join(os.path.dirname(os.path.abspath(progress_file)), TERMINATION_LOG_FILE)
        overrides = {
            **contract.local_overrides(port, checkpoint_dir, progress_file, ip, termination_log, base),
            **(extra_env or {}),
        }
        proc = start_container(
            pod, overrides, out=out, cwd=cwd, tag=self.tag_prefix + (tag or uuid.uuid4().hex), preexec=self.preexec
        )
        return Started(proc, ip)

    def stop_all(self, procs: Iterable[ContainerProcess]) -> None:
        """SIGTERM to every container now (the trainer saves a checkpoint on it); after the
        grace, SIGKILL to whatever is left of each, descendants included."""
        procs = list(procs)
        deadline = time.monotonic() + self.stop_grace
        for proc in procs:
            proc.stop(self.stop_grace)
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
        for proc in procs:
            if proc.poll() is None:
                proc.kill_tree()
            elif proc.tag:
                kill_tagged(proc.tag)  # a container is everything it started, like a cgroup
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)

    def sweep(self) -> int:
        """Kill every process any container of this node left; how many were found."""
        return kill_tagged(self.tag_prefix)

    def live_pids(self) -> list[int]:
        return tagged_pids(self.tag_prefix)
