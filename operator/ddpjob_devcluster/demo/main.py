"""`make demo-cluster`: a whole ddpjob "cluster" on this machine, no docker, no kind.

    python -m ddpjob_devcluster.demo          # run until Ctrl-C; try it with kubectl
    python -m ddpjob_devcluster.demo --once   # apply the example with kubectl, wait for
                                              # Succeeded, exit 0 (DDPJOB_DEMO_ONCE=1 too)

What runs, by default (`--backend real`): a real Kubernetes control plane built from
pinned upstream modules (etcd, kube-apiserver, kube-controller-manager, kube-scheduler;
`make control-plane`), process kubelets registered as Nodes (`--nodes`, `--gpu-nodes`
with `nvidia.com/gpu` capacity), a default StorageClass (`controlplane/storage.py`), and
the operator installed from the Helm chart (cluster-wide) and running with the chart's
ServiceAccount token, all in a network namespace of their own where Pods get Pod CIDR
addresses (`network.py`; `--host-network` keeps the host's). With `--backend
emulator`: the project's fast API emulator instead, with the same operator and kubelet and
the same Nodes, placed by the development scheduler (it builds nothing).
Each Pod the operator creates runs as local processes. A kubeconfig for kubectl is
written to the work directory, which is removed at the end unless `--keep-workdir` (or a
failure, whose logs are there) keeps it.

Exit codes: 0 after Ctrl-C, or in --once mode when the job Succeeded; 1 when the job
failed, timed out, or a part of the cluster died.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shlex
import signal
import tempfile
import time
from typing import Any

import yaml

from ddpjob import gc_tuning
from ddpjob.api import names
from ddpjob_devcluster.clusters.client import EXAMPLE, OperatorProcess, ddpjob_command, json_object
from ddpjob_devcluster.clusters.local import LocalCluster
from ddpjob_devcluster.clusters.real import RealCluster
from ddpjob_devcluster.controlplane import build
from ddpjob_devcluster.controlplane.node import NodeShape
from ddpjob_devcluster.demo import network as cluster_network, workdir as demo_workdir
from ddpjob_devcluster.scheduler.scheduler import NodeSpec

ONCE_ENV = "DDPJOB_DEMO_ONCE"
BACKEND_ENV = "DDPJOB_DEMO_BACKEND"
# The backends the demo runs: the real control plane, or the fast emulator.
DemoCluster = LocalCluster | RealCluster
COLUMNS = ("NAME:.metadata.name,PHASE:.status.phase,READY:.status.readyNodes,"
           "RESTARTS:.status.restarts,MESSAGE:.status.message")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ddpjob_devcluster.demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ddpjob-demo-cluster"),
                   help="kubeconfig, operator log, Pod output and volumes (default: %(default)s)")
    p.add_argument("--keep-workdir", action="store_true", help="keep the work directory at the end (else removed)")
    p.add_argument("--host-network", action="store_true",
                   help="real backend: run on the host's network (Pods get loopback addresses, which "
                        "EndpointSlices refuse) instead of a network namespace of the cluster's own")
    p.add_argument("--once", "--smoke", action="store_true", default=os.environ.get(ONCE_ENV) == "1",
                   help=f"apply --example with kubectl, wait for Succeeded, exit (or set {ONCE_ENV}=1)")
    p.add_argument("--example", default=str(EXAMPLE), help="the DDPJob --once applies (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=600, help="--once: seconds to wait for the job")
    p.add_argument("--backend", choices=("real", "emulator"), default=os.environ.get(BACKEND_ENV) or "real",
                   help=f"real: upstream Kubernetes built from Go modules; emulator: the fast API emulator "
                        f"(default: %(default)s; or set {BACKEND_ENV})")
    p.add_argument("--nodes", type=int, default=1, help="CPU nodes (default: %(default)s)")
    p.add_argument("--gpu-nodes", type=int, default=0,
                   help="nodes that advertise nvidia.com/gpu (their Pods still run on this CPU)")
    p.add_argument("--gpus-per-node", type=int, default=8, help="nvidia.com/gpu of each --gpu-nodes node")
    args = p.parse_args(argv)
    for flag in ("nodes", "gpu_nodes", "gpus_per_node"):
        if not 0 <= getattr(args, flag) <= 64:
            p.error(f'--{flag.replace("_", "-")} must be from 0 to 64 (got {getattr(args, flag)})')
    if args.nodes + args.gpu_nodes == 0:
        p.error("--nodes and --gpu-nodes are both 0: the cluster would have no node to run a Pod")
    return args


def make_cluster(args: argparse.Namespace, workdir: pathlib.Path,
                 relay: cluster_network.Relay | None = None) -> DemoCluster:
    """relay: the API server's port on the host, when the cluster has a network of its own."""
    if args.backend == "emulator":
        # The same Nodes, placed by the development scheduler: a GPU job that fits no Node
        # waits Pending with the scheduler's reason, as on the real backend.
        nodes = [NodeSpec(f"cpu-{i}", cpu="64", memory="256Gi") for i in range(args.nodes)]
        nodes += [NodeSpec(f"gpu-{i}", gpus=args.gpus_per_node, cpu="64", memory="256Gi",
                           labels={"nvidia.com/gpu.present": "true"}) for i in range(args.gpu_nodes)]
        return LocalCluster(workdir, stop_grace=10.0, nodes=nodes)
    shapes = [NodeShape(f"cpu-{i}", cpu="64", memory="256Gi") for i in range(args.nodes)]
    shapes += [NodeShape(f"gpu-{i}", cpu="64", memory="256Gi", gpus=args.gpus_per_node,
                         labels=(("nvidia.com/gpu.present", "true"),)) for i in range(args.gpu_nodes)]
    # A network of its own: the API server on the relayed port, Pod CIDR addresses; else
    # RealCluster's defaults (a free port, loopback addresses).
    api_port, addresses = (relay.port, cluster_network.PodAddresses()) if relay is not None else (0, None)
    return RealCluster(workdir, namespace="default", nodes=shapes, scope="cluster", stop_grace=10.0,
                       api_port=api_port, addresses=addresses)


def own_network(args: argparse.Namespace) -> cluster_network.Relay | None:
    """Move into the cluster's own network namespace (the real backend's endpoint
    controllers refuse loopback Pod addresses); None, and why, where it stays on the host's."""
    if args.backend != "real":
        return None  # the emulator runs no endpoint controller
    why = "--host-network" if args.host_network else None
    if why is None:
        relay = cluster_network.Relay()
        why = cluster_network.enter()
        if why is None:
            say(f"network: a namespace of its own, Pod IPs from {cluster_network.POD_CIDR}, the API server "
                f"published on 127.0.0.1:{relay.port}; Pods reach nothing outside the cluster")
            return relay.start()
        relay.stop()
    say(f"network: the host's ({why}); Pods get loopback addresses, which an EndpointSlice may not hold, so "
        f"each job's Service gets FailedToUpdateEndpoint(Slices) Warning Events: expected here, not the job's fault")
    return None


def backend_line(cluster: DemoCluster) -> str:
    if isinstance(cluster, RealCluster):
        nodes = ", ".join(a.name for a in cluster.agents)
        return (f"kube-apiserver {cluster.plane.server} (upstream Kubernetes, with etcd, controller manager and "
                f"scheduler; nodes: {nodes})")
    return f"API emulator {cluster.emulator.url} (the fast backend, not a real API server)"


def say(message: str) -> None:
    print(f"[demo-cluster] {message}", flush=True)


def operator_of(cluster: DemoCluster) -> OperatorProcess:
    """The operator process, which the cluster's start() made."""
    if cluster.operator is None:
        raise RuntimeError("the cluster is not started: it has no operator")
    return cluster.operator


def instructions(cluster: DemoCluster) -> str:
    # Every path absolute: another terminal has its own directory and PATH, where `ddpjob`
    # may be missing and `kubectl` may be the machine's own, of another minor version.
    example, claim, elastic = (shlex.quote(str((EXAMPLE.parent / name).absolute()))
                               for name in (EXAMPLE.name, "ckpt-claim.yaml", "elastic-cpu.yaml"))
    ddpjob, kubectl = shlex.join(ddpjob_command()), shlex.quote(str(pathlib.Path(cluster.kubectl_path()).absolute()))
    storage = ("the default StorageClass `standard` binds it" if isinstance(cluster, RealCluster)
               else "the emulator binds no claim, and its scheduler does not wait for one")
    operator = operator_of(cluster)
    return f"""
ddpjob demo cluster is up: {backend_line(cluster)},
the operator (pid {operator.pid}) and process kubelets that run every Pod as local
processes. In another terminal, paste these lines as they are:

    export KUBECONFIG={shlex.quote(str(pathlib.Path(cluster.kubeconfig).absolute()))}
    {ddpjob} submit {example} --wait
    {ddpjob} get
    {ddpjob} describe mnist-cpu
    {ddpjob} logs mnist-cpu --all
    {ddpjob} delete mnist-cpu

A gang restart: submit it again without --wait, delete a Pod while it runs, and watch:
    {ddpjob} submit {example}
    {kubectl} delete pod mnist-cpu-1
    {kubectl} get ddpj -w -o custom-columns={COLUMNS}

An elastic job, with a checkpoint claim that names no StorageClass ({storage}):
    {kubectl} apply -f {claim} -f {elastic}

The operator's log is {operator.log_path}.
Ctrl-C stops everything and removes {cluster.workdir} (--keep-workdir keeps it);
a second demo at once needs another --workdir.
"""


class PhaseReporter:
    """One line per DDPJob phase change, so the terminal shows what happens."""

    def __init__(self, cluster: DemoCluster):
        self.cluster = cluster
        self.seen: dict[tuple[str | None, str], tuple[Any, Any]] = {}  # (namespace, name) -> (phase, restarts)

    def poll(self) -> None:
        listing = json_object(self.cluster.custom.list_cluster_custom_object(names.GROUP, names.VERSION, names.PLURAL))
        for job in listing["items"]:
            meta, status = job["metadata"], job.get("status") or {}
            key = (meta.get("namespace"), meta["name"])
            state = (status.get("phase"), status.get("restarts"))
            if status.get("phase") and self.seen.get(key) != state:
                self.seen[key] = state
                failure = status.get("lastFailure") or {}
                # A restart says why (the failed Pod, its reason and message), as describe does.
                why = f' [last failure: {failure.get("pod")} {failure.get("reason")}: ' \
                      f'{str(failure.get("message", ""))[:300]}]' if state[0] == "Restarting" and failure else ""
                say(f'ddpjob {key[0]}/{key[1]}: {status["phase"]} (restarts {status.get("restarts", 0)}): '
                    f'{status.get("message", "")}{why}')


def check_alive(cluster: DemoCluster) -> None:
    operator = operator_of(cluster)
    if not operator.alive:
        raise RuntimeError(f"the operator exited ({operator.returncode}); "
                           f"see {operator.log_path}:\n{operator.log_tail(20)}")
    if cluster.kubelet is not None and cluster.kubelet.errors:
        raise RuntimeError(f"the kubelet failed: {cluster.kubelet.errors[0]!r}")
    if isinstance(cluster, RealCluster):
        cluster.plane.check_alive()  # one line naming the component and its log


def run_forever(cluster: DemoCluster) -> int:
    print(instructions(cluster), flush=True)
    reporter = PhaseReporter(cluster)
    while True:
        check_alive(cluster)
        reporter.poll()
        time.sleep(0.2)


def run_once(cluster: DemoCluster, example: str, timeout: float) -> int:
    """The smoke test a person would do by hand, through kubectl."""
    body = yaml.safe_load(pathlib.Path(example).read_text())
    name, namespace = body["metadata"]["name"], body["metadata"].get("namespace", cluster.namespace)
    say(f"kubectl apply -f {example}")
    print(cluster.kubectl("apply", "-f", example).stdout, end="", flush=True)
    reporter = PhaseReporter(cluster)
    deadline = time.monotonic() + timeout
    phase = None
    while time.monotonic() < deadline:
        check_alive(cluster)
        reporter.poll()
        phase = cluster.kubectl("get", "ddpj", name, "-n", namespace, "-o", "jsonpath={.status.phase}").stdout
        if phase in ("Succeeded", "Failed"):
            break
        time.sleep(0.5)
    print(cluster.kubectl("get", "ddpj", name, "-n", namespace, "-o", f"custom-columns={COLUMNS}").stdout,
          end="", flush=True)
    print(cluster.kubectl("get", "pods", "-n", namespace, "-o",
                          "custom-columns=NAME:.metadata.name,PHASE:.status.phase,"
                          "EXIT:.status.containerStatuses[0].state.terminated.exitCode,IP:.status.podIP"
                          ).stdout, end="", flush=True)
    say(f"kubectl get events -n {namespace}")
    print(cluster.kubectl("get", "events", "-n", namespace, "--sort-by=.metadata.creationTimestamp", "-o",
                          "custom-columns=TYPE:.type,REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message"
                          ).stdout, end="", flush=True)
    if phase == "Succeeded":
        say(f"ddpjob {namespace}/{name} Succeeded")
        return 0
    say(f'ddpjob {namespace}/{name} ended {phase or "nowhere"} (timeout {timeout:g}s); '
        f'operator log {operator_of(cluster).log_path}')
    print(cluster.diagnostics(), flush=True)
    return 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = pathlib.Path(args.workdir).resolve()
    try:
        lock = demo_workdir.lock(workdir)
    except demo_workdir.AlreadyRunning as exc:
        say(f"error: {exc}")
        return 1
    demo_workdir.prepare(workdir)

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C and `kill` stop it cleanly; installed explicitly because a shell starts a
    # background job with SIGINT ignored, and Python then leaves it ignored.
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    try:
        relay = own_network(args)  # first: a user namespace is entered by one thread alone
    except OSError as exc:  # the probe passed, the move itself did not: nothing can run here
        say(f"error: moving into a network namespace: {exc}; try --host-network")
        return 1
    cluster = make_cluster(args, workdir, relay)
    gc_tuning.tune_for_long_running_server()  # this process serves the API until stopped
    code = 1
    try:
        say(f"starting in {workdir}")
        if isinstance(cluster, RealCluster) and not all(build.cached(build.COMPONENTS[c]) for c in build.PLANE):
            say("building the real control plane first: about 7 minutes the first time on 2 cores "
                "(--backend emulator needs no build)")
        cluster.start()
        code = run_once(cluster, args.example, args.timeout) if args.once else run_forever(cluster)
    except KeyboardInterrupt:
        say("stopping")
        code = 0
    except (RuntimeError, OSError) as exc:  # StartFailure and BuildError are RuntimeErrors
        say(f"error: {exc}")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
        cluster.stop()
        if relay is not None:
            relay.stop()
        left = cluster.kubelet.live_processes() if cluster.kubelet is not None else []
        say(f"stopped; processes still running: {left}" if left else "stopped: no process left running")
        say(demo_workdir.finish(workdir, lock, keep=args.keep_workdir or code != 0 or bool(left)))
    return code

