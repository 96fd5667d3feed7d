"""One training job on a cluster taken through disruptions one after the other, each
measured from outside the operator: a Pod deleted through the API (graceful: the kubelet
sends SIGTERM), every process of a Pod SIGKILLed (a process kubelet's Pods are processes
on this host: node_processes.py), and `spec.nodes` raised (a join). Used by
tests/system/test_elastic_real.py and benchmarks/elastic_resize.py.

Each disruption at time T gives a `Heal`, read from the trainer's sample log (each
group's size and step times: sample_audit.step_times), the API server and the Pods' logs:
- healed: T to the end of the first optimizer step of the next group, at whatever size
  (a step ends when the next one starts);
- pause: when a group of the whole size follows a smaller one (a join: the lost Pod
  back, or the raise), how long its members stood still: from the start of the smaller
  group's last step to the start of the grown group's first, less one step of the smaller
  group (its median);
- join resize (in place): that pause as the members' resize line says (agree + group +
  state), without the step around it;
- split, for a group that resizes in place: from the resize line of the lowest-numbered
  survivor (`at=`: when its worker knew; agree, group, state: ddpjob_trainer.resize),
  detection = at - T, agreement, group re-creation, state sent, and the first step (the
  rest of `healed`: DDP re-wrapped and the step itself);
- kept: the survivors' worker processes are the same PIDs once the job is whole again;
- statuses: the `status.nodes` values the API server showed meanwhile.
"""

from __future__ import annotations

import itertools
import os
import pathlib
import re
import signal
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from ddpjob_devcluster.clusters.client import wait_until
from ddpjob_devcluster.scenarios import elastic as elastic_scenario, node_processes as procs, sample_audit

DELETE, SIGKILL, RAISE = "delete", "sigkill", "raise"
RESIZE_LINE = re.compile(
    r"resized group \d+ nodes=\[([\d, ]*)\] step=\d+ agree ([\d.]+)s group ([\d.]+)s state ([\d.]+)s at=([\d.]+)"
)


@dataclass
class Heal:
    what: str  # e.g. "delete Pod 2", "raise to 4"
    at: float  # wall-clock time of the disruption
    healed_s: float | None = None
    healed_at: int | None = None  # the next group's size
    pause_s: float | None = None
    split: dict[str, float] | None = None
    kept: bool | None = None
    statuses: list[str] = field(default_factory=list)
    lost_indices: dict[int, int] = field(default_factory=dict)  # status.lostIndices seen: index -> losses
    join_resize_s: float | None = None  # in place: agree + group + state of the resize to the whole size


def job(
    name: str,
    samples: pathlib.Path,
    *,
    elastic: bool,
    step_seconds: float,
    size: int,
    epochs: int,
    launch: tuple[str, ...] = (),
    release: pathlib.Path | None = None,
) -> dict[str, Any]:
    """The job a `Run` takes through its disruptions (elastic.job's trainer and sample log):
    4 nodes at the most, an elastic one started at 3 (raising it to 4 is its join), a rigid
    one at 4; a lost index is created again, and a rigid gang restarts, after 5 s."""
    return elastic_scenario.job(
        name,
        samples,
        elastic=elastic,
        nodes=3 if elastic else 4,
        max_nodes=4,
        backoff=5,
        step_seconds=step_seconds,
        size=size,
        epochs=epochs,
        launch=launch,
        release=release,
    )


class Run:
    """The job `body` (its sample log in `samples`), started on `cluster`."""

    def __init__(self, cluster: Any, body: dict[str, Any], samples: pathlib.Path):
        self.cluster, self.body, self.samples = cluster, body, samples
        self.name = body["metadata"]["name"]
        self.nodes = body["spec"]["nodes"]
        self.heals: list[Heal] = []

    def start(self, steps: int, timeout: float) -> None:
        """Create the job and wait until it has made `steps` optimizer steps."""
        self.cluster.create_job(self.body)
        self.wait_steps(steps, timeout)

    def wait_steps(self, steps: int, timeout: float) -> None:
        """Until the newest group made `steps` steps (the job settled after a disruption)."""

        def enough() -> bool:
            groups = sample_audit.step_times(str(self.samples))
            self._running()
            return bool(groups) and len(groups[-1][1]) >= steps

        wait_until(enough, timeout, f"{self.name}: {steps} steps", self._describe, interval=0.5)

    def workers(self, nodes: list[int]) -> list[int]:
        return procs.workers(self.name, nodes, self.cluster.namespace)

    def disrupt(self, what: str, target: int, timeout: float) -> Heal:
        """Delete or SIGKILL Pod `target`, or raise spec.nodes to `target`; wait until a group
        of the whole size has stepped after it, and measure."""
        survivors = [n for n in range(self.nodes) if not (what != RAISE and n == target)]
        before = self.workers(survivors)
        at = time.time()
        if what == DELETE:
            self.cluster.core.delete_namespaced_pod(f"{self.name}-{target}", self.cluster.namespace)
        elif what == SIGKILL:
            victims = procs.of_node(self.name, target, self.cluster.namespace)
            assert victims, f"no process of {self.name}-{target} to kill"
            for pid in victims:
                os.kill(pid, signal.SIGKILL)
        else:
            patch = {"spec": {"nodes": target}}
            self.cluster.custom.patch_namespaced_custom_object(
                "ddpjob.io", "v1alpha1", self.cluster.namespace, "ddpjobs", self.name, patch
            )
            self.nodes = target
        heal = Heal(f"{what} Pod {target}" if what != RAISE else f"raise to {target}", at)

        def whole() -> bool:
            status = self._running()
            shown = status.get("nodes")
            if shown and shown not in heal.statuses:
                heal.statuses.append(shown)
            for entry in status.get("lostIndices") or ():
                index, losses = entry.get("index"), entry.get("losses", 0)
                heal.lost_indices[index] = max(losses, heal.lost_indices.get(index, 0))
            after = [g for g in sample_audit.step_times(str(self.samples)) if g[1][0] > at]
            return any(w == self.nodes and len(times) >= 2 for w, times in after)

        wait_until(whole, timeout, f"{self.name}: whole again after {heal.what}", self._describe, interval=0.2)
        now = self.workers(survivors)
        heal.kept = bool(before) and now == before
        self._measure(heal, survivors)
        self.heals.append(heal)
        return heal

    def _measure(self, heal: Heal, survivors: list[int]) -> None:
        groups = sample_audit.step_times(str(self.samples))
        first = next(i for i, (_, times) in enumerate(groups) if times[0] > heal.at)
        healed = sample_audit.healed(groups, heal.at)
        assert healed is not None  # disrupt() waited for a whole group's steps after it
        heal.healed_at, heal.healed_s = healed[0], healed[1] - heal.at
        grown = next(i for i in range(first, len(groups)) if groups[i][0] == self.nodes)
        if grown > 0 and groups[grown - 1][0] < self.nodes:
            prev = groups[grown - 1][1]
            step = statistics.median(b - a for a, b in itertools.pairwise(prev)) if len(prev) > 1 else 0.0
            heal.pause_s = groups[grown][1][0] - prev[-1] - step
        lines = self._resize_lines(min(survivors), heal.at)
        if lines:
            _, agree, group, state, learned = lines[0]
            detect = learned - heal.at
            heal.split = {
                "detect": detect,
                "agree": agree,
                "group": group,
                "state": state,
                "first_step": heal.healed_s - detect - agree - group - state,
            }
        # The members' own part of the pause: the resize that made the whole group.
        joins = [sum(line[1:4]) for line in lines if line[0] == self.nodes]
        heal.join_resize_s = joins[0] if joins and heal.pause_s is not None else None

    def _resize_lines(self, node: int, since: float) -> list[tuple[int, float, float, float, float]]:
        """(nodes, agree, group, state, at) of each resize in place this node's worker made after `since`."""
        log = self.cluster.kubelet.logs(f"{self.name}-{node}", tail=100_000)
        found = []
        for m in RESIZE_LINE.finditer(log):
            nodes, agree, group, state, at = m.groups()
            if float(at) > since:
                found.append((len(nodes.split(",")), float(agree), float(group), float(state), float(at)))
        return found

    def _running(self) -> dict[str, Any]:
        status = self.cluster.status(self.name)
        if status.get("phase") in ("Succeeded", "Failed"):
            raise AssertionError(f"{self.name} ended before the scenario did: {status}")
        return status

    def _describe(self) -> str:
        groups = [(w, len(t)) for w, t in sample_audit.step_times(str(self.samples))]
        return f"groups (size, steps) {groups}, status {self.cluster.status(self.name)}"

    def finish(self, timeout: float) -> dict[str, Any]:
        """Wait for the job's end; its status."""

        def ended() -> dict[str, Any] | None:
            status = self.cluster.status(self.name)
            return status if status.get("phase") in ("Succeeded", "Failed") else None

        return wait_until(ended, timeout, f"{self.name} did not finish", self._describe, interval=1.0)

    def stop(self, timeout: float) -> None:
        """Delete the job and wait for its Pods to be gone (a benchmark done measuring)."""
        self.cluster.custom.delete_namespaced_custom_object(
            "ddpjob.io", "v1alpha1", self.cluster.namespace, "ddpjobs", self.name
        )
        wait_until(lambda: not self.cluster.pods(self.name), timeout, f"{self.name}'s Pods not gone", interval=0.5)

    def audit(self, size: int, epochs: int | None = None) -> tuple[int, int]:
        """Samples lost and repeated over `epochs`, or over the epochs the last group had
        finished (a job stopped mid-epoch)."""
        if epochs is None:
            epochs = sample_audit.last_epoch(str(self.samples)) - 1
        return sample_audit.lost_and_repeated(str(self.samples), size, epochs)


def describe(heal: Heal) -> str:
    def s(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f} s"

    split = " ".join(f"{k} {v:.2f}" for k, v in (heal.split or {}).items())
    return (
        f"{heal.what}: healed {s(heal.healed_s)} at {heal.healed_at} nodes, pause {s(heal.pause_s)} "
        f"(resize {s(heal.join_resize_s)}), "
        f"kept {heal.kept}, statuses {heal.statuses}" + (f", split [{split}]" if split else "")
    )
