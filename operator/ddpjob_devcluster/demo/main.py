"""`make demo-cluster`: a whole ddpjob "cluster" on this machine, no docker, no kind.

    python -m ddpjob_devcluster.demo          # run until Ctrl-C; try it with kubectl
    python -m ddpjob_devcluster.demo --once   # apply the example with kubectl, wait for
                                              # Succeeded, exit 0 (DDPJOB_DEMO_ONCE=1 too)

What runs: a real Kubernetes control plane built from
pinned upstream modules (etcd, kube-apiserver, kube-controller-manager, kube-scheduler;
`make control-plane`), process kubelets registered as Nodes (`--nodes`, `--gpu-nodes`
with `nvidia.com/gpu` capacity), a default StorageClass (`controlplane/storage.py`), and
the operator installed from the Helm chart (cluster-wide) and running with the chart's
ServiceAccount token, all in a network namespace of their own where Pods get Pod CIDR
addresses (`network.py`; `--host-network` keeps the host's).
Each Pod the operator creates runs as local processes. A kubeconfig for kubectl is
written to the work directory, which is removed at the end unless `--keep-workdir` (or a
failure, whose logs are there) keeps it.

Exit codes: 0 after Ctrl-C, or in --once mode when the job Succeeded; 1 when the job
failed, timed out, or a part of the cluster died.
"""

from __future__ import annotations

import pathlib
import shlex
import signal
import time

import yaml

from ddpjob import gc_tuning
from ddpjob_devcluster.clusters.client import EXAMPLE, ddpjob_command
from ddpjob_devcluster.controlplane import build
from ddpjob_devcluster.demo import workdir as demo_workdir
from ddpjob_devcluster.demo.backends import DemoCluster, check_alive, make_cluster, operator_of, own_network
from ddpjob_devcluster.demo.options import parse_args
from ddpjob_devcluster.demo.phases import COLUMNS, PhaseReporter, say


def backend_line(cluster: DemoCluster) -> str:
    nodes = ", ".join(a.name for a in cluster.agents)
    return (
        f"kube-apiserver {cluster.plane.server} (upstream Kubernetes, with etcd, controller manager and "
        f"scheduler; nodes: {nodes})"
    )


def instructions(cluster: DemoCluster) -> str:
    # Every path absolute: another terminal has its own directory and PATH, where `ddpjob`
    # may be missing and `kubectl` may be the machine's own, of another minor version.
    example, claim, elastic = (
        shlex.quote(str((EXAMPLE.parent / name).absolute()))
        for name in (EXAMPLE.name, "ckpt-claim.yaml", "elastic-cpu.yaml")
    )
    ddpjob, kubectl = shlex.join(ddpjob_command()), shlex.quote(str(pathlib.Path(cluster.kubectl_path()).absolute()))
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

An elastic job, with a checkpoint claim that names no StorageClass (the default StorageClass `standard` binds it):
    {kubectl} apply -f {claim} -f {elastic}

The operator's log is {operator.log_path}.
Ctrl-C stops everything and removes {cluster.workdir} (--keep-workdir keeps it);
a second demo at once needs another --workdir.
"""


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
    print(
        cluster.kubectl("get", "ddpj", name, "-n", namespace, "-o", f"custom-columns={COLUMNS}").stdout,
        end="",
        flush=True,
    )
    print(
        cluster.kubectl(
            "get",
            "pods",
            "-n",
            namespace,
            "-o",
            "custom-columns=NAME:.metadata.name,PHASE:.status.phase,"
            "EXIT:.status.containerStatuses[0].state.terminated.exitCode,IP:.status.podIP",
        ).stdout,
        end="",
        flush=True,
    )
    say(f"kubectl get events -n {namespace}")
    print(
        cluster.kubectl(
            "get",
            "events",
            "-n",
            namespace,
            "--sort-by=.metadata.creationTimestamp",
            "-o",
            "custom-columns=TYPE:.type,REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message",
        ).stdout,
        end="",
        flush=True,
    )
    if phase == "Succeeded":
        say(f"ddpjob {namespace}/{name} Succeeded")
        return 0
    say(
        f"ddpjob {namespace}/{name} ended {phase or 'nowhere'} (timeout {timeout:g}s); "
        f"operator log {operator_of(cluster).log_path}"
    )
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
        relay = own_network(args, say)  # first: a user namespace is entered by one thread alone
    except OSError as exc:  # the probe passed, the move itself did not: nothing can run here
        say(f"error: moving into a network namespace: {exc}; try --host-network")
        return 1
    cluster = make_cluster(args, workdir, relay)
    gc_tuning.tune_for_long_running_server()  # this process serves the API until stopped
    code = 1
    try:
        say(f"starting in {workdir}")
        if not all(build.cached(build.COMPONENTS[c]) for c in build.PLANE):
            say("building the real control plane first: about 7 minutes the first time on 2 cores")
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
