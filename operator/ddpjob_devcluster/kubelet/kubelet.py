"""A kubelet for tests that runs Pods as local processes.

It watches its Node's Pods on the API server (as `controlplane/node.py`'s Node), starts each Pod's `trainer` container
(`container_start.py`) with the node executor of `ddpjob run` (`ddpjob.local.node`: same argv, same env
resolution, same process group handling), and reports what happens back through
`pods/status`, as a kubelet does:
`Running` once the process is up, then `Succeeded`/`Failed` with the container's
`state.terminated` exit code (128+N for a signal) and reason.

What a laptop cannot provide is substituted exactly as `ddpjob run` does it
(`contract.local_overrides`): the job's Service DNS names (`J-i.J.NS.svc`) become
127.0.0.1 through MASTER_ADDR/PET_MASTER_ADDR, and every job attempt gets a free port of
its own (two attempts may overlap while the old one terminates; a fresh port keeps the
new rendezvous away from the old one's store). The checkpoint volume becomes one local
directory per job, shared by all of the job's Pods and attempts, as a RWX volume is.
Every Pod gets an IP of its own, as a CNI plugin gives one (kubelet's
pkg/kubelet/kuberuntime sandbox status -> status.podIP): a random 127/8 address (this machine's
loopback), or the demo's Pod CIDR's in its network (`demo/network.py`). Its launcher binds the
contract's progress port on that address (DDPJOB_PROGRESS_HOST), so Pods never collide on the port and the operator
reaches `status.podIP:29510` exactly as in a cluster. The progress file (an emptyDir in
a Pod) moves into the Pod's directory.

Container semantics that matter for gang restarts:
- a deleted Pod gets its container stopped: SIGTERM, then SIGKILL after `stop_grace`,
  and its deletion confirmed (a grace-0 delete) once the container has stopped;
- a container is everything its main process started, like a cgroup: when the main
  process ends, or on SIGKILL, every process carrying the container's tag (an env
  variable every descendant inherits) is killed too. `ddpjob-launch` and torchrun put
  their children into new sessions, so a process-group kill alone would leak them.

Not emulated: init containers, sidecars (only `trainer` runs), probes, resource limits,
images (the command must be installed here), Pods with a nodeName of another node.
"""

from __future__ import annotations

import contextlib
import pathlib
import queue
import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes

from ddpjob.local import ownership
from ddpjob.local.node import LocalNode
from ddpjob_devcluster.kubelet import container_start
from ddpjob_devcluster.kubelet.pod_watch import PodWatch, api_client
from ddpjob_devcluster.kubelet.status import Container, confirm_deletion, report, send

# A kubelet's default grace is the Pod's terminationGracePeriodSeconds (30 s). Tests
# want gang restarts to be quick; the trainer saves within a step of SIGTERM.
DEFAULT_STOP_GRACE = 5.0
POLL_SECONDS = 0.05


class ProcessKubelet:
    """Start with `start()` (or `with`); `stop()` kills every process it ever started."""

    def __init__(
        self,
        server: str,
        workdir: str | pathlib.Path,
        *,
        namespace: str | None = None,
        stop_grace: float = DEFAULT_STOP_GRACE,
        bound_only: bool = False,
        kubeconfig: pathlib.Path | None = None,
        node_name: str | None = None,
        ports: dict[Any, int] | None = None,
        addresses: Callable[[], str] | None = None,
    ):
        """kubeconfig: the node's own identity on the API server at `server` (without one,
        a kubelet under test that never reaches a server). node_name: run only the Pods bound to this
        Node (`spec.nodeName`), listed and watched with that field selector as a kubelet
        does; several kubelets are several nodes, sharing `ports` (each attempt's port)
        and `addresses` (each Pod's IP; default a random 127/8 one)."""
        self.server, self.kubeconfig, self.node_name = server, kubeconfig, node_name
        # With a scheduler, run only Pods bound to a node, as a kubelet runs only its own.
        self.bound_only = bound_only or node_name is not None
        self.workdir = pathlib.Path(workdir)
        self.namespace, self.stop_grace = namespace, stop_grace
        self.id = uuid.uuid4().hex[:12]
        self.containers: dict[str, Container] = {}  # by Pod uid; finished ones stay for inspection
        # SIGTERM, not SIGKILL, when the work loop that started them ends: stop() then
        # stops them with the grace, as a kubelet shutting down does.
        self.node = LocalNode(
            f"{self.id}/",
            stop_grace,
            preexec=ownership.stop_with_parent,
            ports={} if ports is None else ports,
            addresses=addresses,
        )
        self.ports = self.node.ports  # (namespace, job, attempt) -> port
        self.errors: list[BaseException] = []
        self._events: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._watch = PodWatch(self._api, self._events, self._stopping, namespace=namespace, node_name=node_name)

    # ---- public: lifecycle ------------------------------------------------------------

    def start(self) -> ProcessKubelet:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for target, name in ((self._watch.run, "kubelet-watch"), (self._work_loop, "kubelet-work")):
            thread = threading.Thread(target=self._guard(target), name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop watching, stop every container (SIGTERM, SIGKILL after the grace), and
        make sure no process this kubelet started survives, whatever happened before."""
        self._stopping.set()
        self._watch.interrupt()
        for thread in self._threads:
            thread.join(timeout=self.stop_grace + 15)
        self._threads = []
        self.node.stop_all(c.proc for c in self.containers.values() if c.running and c.proc is not None)
        self.node.sweep()
        for c in list(self.containers.values()):
            c.close_log()

    def __enter__(self) -> ProcessKubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- public: what tests look at and do -----------------------------------------------

    def snapshot(self) -> list[Container]:
        """Every container so far, oldest first (safe to call from any thread)."""
        with self._lock:
            return sorted(self.containers.values(), key=lambda c: c.times.get("seen", 0))

    def container(self, pod: str, namespace: str = "default", *, running: bool = True) -> Container | None:
        """The newest container of Pod `pod` (only a running one, unless running=False)."""
        found = [c for c in self.snapshot() if c.pod == pod and c.namespace == namespace and (c.running or not running)]
        return found[-1] if found else None

    def kill(self, pod: str, namespace: str = "default", sig: int = signal.SIGKILL) -> Container:
        """Signal a running container's main process, as a crash or the OOM killer would;
        the container then ends (and is reported) like any other."""
        c = self.container(pod, namespace)
        if c is None or c.proc is None:
            raise LookupError(f"no running container for Pod {namespace}/{pod}")
        c.proc.popen.send_signal(sig)
        return c

    def checkpoint_dir(self, job: str, namespace: str = "default") -> pathlib.Path:
        """The local directory standing in for job `job`'s checkpoint volume."""
        return self.workdir / "volumes" / namespace / job / "checkpoint"

    def live_processes(self) -> list[int]:
        return self.node.live_pids()

    def logs(self, pod: str | None = None, tail: int = 40) -> str:
        """The last lines of each container's output (all containers, or one Pod's)."""
        parts = []
        for c in self.snapshot():
            if pod is not None and c.pod != pod:
                continue
            with contextlib.suppress(OSError):
                lines = c.log_path.read_text(errors="replace").splitlines()[-tail:]
                parts.append(
                    f"--- {c.namespace}/{c.pod} (attempt {c.attempt}, uid {c.uid[:8]}, "
                    f"exit {c.exit_code}) ---\n" + "\n".join(lines)
                )
        return "\n".join(parts)

    def _api(self) -> kubernetes.client.CoreV1Api:
        return api_client(self.server, self.kubeconfig)

    # ---- the work loop: one thread owns every container ---------------------------------

    def _guard(self, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as exc:  # noqa: BLE001 - a kubelet thread's end, surfaced by tests through .errors
                self.errors.append(exc)

        return run

    def _work_loop(self) -> None:
        core = self._api()
        try:
            while not self._stopping.is_set():
                try:
                    kind, obj = self._events.get(timeout=POLL_SECONDS)
                    self._on_event(core, kind, obj)
                    while True:  # drain what arrived meanwhile before polling processes
                        kind, obj = self._events.get_nowait()
                        self._on_event(core, kind, obj)
                except queue.Empty:
                    pass
                self._tick(core)
        finally:
            core.api_client.close()

    def _on_event(self, core: kubernetes.client.CoreV1Api, kind: str, obj: dict[str, Any]) -> None:
        if kind == "SYNC":
            present = {p["metadata"]["uid"] for p in obj.get("items") or []}
            for c in list(self.containers.values()):  # deletions the watch did not see
                if c.uid not in present and not c.deleted and (self.namespace in (None, c.namespace)):
                    self._delete(c)
            for pod in obj.get("items") or []:
                self._on_pod(core, pod)
        elif kind == "DELETED":
            gone = self.containers.get(obj["metadata"]["uid"])
            if gone is not None:
                self._delete(gone)
        elif kind in ("ADDED", "MODIFIED"):
            self._on_pod(core, obj)

    def _on_pod(self, core: kubernetes.client.CoreV1Api, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        c = self.containers.get(meta["uid"])
        if meta.get("deletionTimestamp"):  # graceful deletion (or a finalizer holds the object)
            if c is not None:  # stopped now, confirmed by _tick once its terminal status is written
                c.confirm_deletion = bool(meta.get("deletionGracePeriodSeconds"))
                self._delete(c)
            return
        if c is not None or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        bound = (pod.get("spec") or {}).get("nodeName")
        if (self.bound_only and not bound) or self.node_name not in (None, bound):
            return  # not scheduled (here) yet: the binding arrives as a MODIFIED event
        self._run_pod(core, pod)

    def _run_pod(self, core: kubernetes.client.CoreV1Api, pod: dict[str, Any]) -> None:
        c = container_start.new_container(pod, self.workdir, self.id)
        with self._lock:
            self.containers[c.uid] = c
        checkpoint = container_start.checkpoint_volume(pod, self.checkpoint_dir(c.job, c.namespace))
        container_start.start(core, self.node, c, pod, checkpoint)

    def _delete(self, c: Container) -> None:
        c.deleted = True
        if c.proc is not None and c.proc.poll() is None:
            c.proc.stop(self.stop_grace)  # SIGTERM now; _tick escalates after the grace

    def _tick(self, core: kubernetes.client.CoreV1Api) -> None:
        for c in list(self.containers.values()):
            # Not gone until this kubelet confirms it; after, a new Pod of its name may be there.
            held = not c.deleted or c.confirm_deletion
            if c.unsent is not None and held:  # until written, or the Pod is gone (404)
                send(core, c, c.unsent)
            if c.proc is not None and "exited" not in c.times:
                end = c.proc.terminated()  # a container ends with its main process, tree and all
                if end is None:
                    if c.deleted:
                        c.proc.stop(self.stop_grace)  # SIGTERM once, the whole tree after the grace
                    continue
                c.exit_code, c.times["exited"] = end.exit_code, end.finished_at
                if held:  # also being deleted (kubelet >= 1.27): a finalizer's holder (Kueue) sees it end
                    report(core, c, end.phase, exit_code=end.exit_code, reason=end.reason, message=end.message)
                c.close_log()
            # The grace-0 delete once the terminal status is written (the status manager's order).
            if "exited" in c.times and c.unsent is None:
                confirm_deletion(core, c)


@contextlib.contextmanager
def process_kubelet(server: str, workdir: str | pathlib.Path, **kwargs: Any) -> Iterator[ProcessKubelet]:
    kubelet = ProcessKubelet(server, workdir, **kwargs).start()
    try:
        yield kubelet
    finally:
        kubelet.stop()
