"""`ddpjob tensorboard`'s kubectl port-forward to the job's TensorBoard Service: started
with the user's kubeconfig, context and namespace, its "Forwarding from" line read for the
URL, started again while the Pod is not running yet, and stopped with the command."""

from __future__ import annotations

import argparse
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO

from ddpjob import text
from ddpjob.api import tensorboard
from ddpjob.cluster import kubectl as cluster_kubectl
from ddpjob.cluster.connection import ClusterError, Connection

# kubectl says where it listens once the forward is up: "Forwarding from 127.0.0.1:6006 -> 6006".
FORWARDING = re.compile(r"Forwarding from (\S+):(\d+) -> \d+")
# From kubectl's start to its first line: a cluster that answers says it in seconds.
START_TIMEOUT = 60.0
# kubectl's words when the API server cannot open a port-forward stream to the node.
NO_PORT_FORWARD = "error upgrading connection"
# kubectl's words when the Service's Pod exists but does not run yet (Pending: scheduling,
# pulling the image): right after `ddpjob submit` that is the normal case, so it is waited for.
NOT_RUNNING = "pod is not running"
# How long to wait for that Pod: a node pulling a training image can take minutes.
POD_TIMEOUT = 300.0


def kubectl() -> str:
    return cluster_kubectl.find(": it forwards the port")


def port_forward_argv(args: argparse.Namespace, conn: Connection, service: str) -> list[str]:
    argv = [kubectl(), "port-forward", "--namespace", conn.namespace, f"service/{service}"]
    argv += [f"{args.port or ''}:{tensorboard.PORT}", "--address", args.address]
    if args.kubeconfig:
        argv += ["--kubeconfig", args.kubeconfig]
    if args.context:
        argv += ["--context", args.context]
    return argv


def _lines(stream: IO[str], into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put(None)


class NoPortForward(ClusterError):
    """kubectl could not open the forward: the node serves no port-forward. `reason`:
    kubectl's words, without the HTML error page the API server sends after them."""

    def __init__(self, said: str):
        words = " ".join(said.split("<", 1)[0].split()).rstrip(": ")
        while words.startswith("error: "):
            words = words[len("error: ") :]
        self.reason = text.clean(words, 200)
        super().__init__(f"kubectl port-forward ended: {self.reason}")


class PodNotRunning(ClusterError):
    """kubectl found the TensorBoard's Pod, not running yet: its words."""


def port_forward(
    args: argparse.Namespace, conn: Connection, service: str, announce: Callable[[argparse.Namespace, str], None]
) -> int:
    """kubectl's forward, started again (backing off) while the TensorBoard Pod is not
    running yet, until POD_TIMEOUT; said once on stderr, with kubectl's words."""
    deadline, pause, said = time.monotonic() + POD_TIMEOUT, 1.0, False
    while True:
        try:
            return _forward_once(args, conn, service, announce)
        except PodNotRunning as waiting:
            if time.monotonic() + pause > deadline:
                raise ClusterError(f"the TensorBoard Pod did not run in {POD_TIMEOUT:g}s: {waiting}") from None
            if not said:
                print(f"waiting for the TensorBoard Pod to run ({waiting})", file=sys.stderr, flush=True)
                said = True
            time.sleep(pause)
            pause = min(pause * 2, 8.0)


def _forward_once(
    args: argparse.Namespace, conn: Connection, service: str, announce: Callable[[argparse.Namespace, str], None]
) -> int:
    proc = subprocess.Popen(
        port_forward_argv(args, conn, service),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    try:
        return _serve(args, proc, announce)
    finally:
        # Loaded here so that the cluster commands import nothing else of local.
        from ddpjob.local.stop_process import stop_process

        stop_process(proc, grace=5)


def _serve(
    args: argparse.Namespace, proc: subprocess.Popen[str], announce: Callable[[argparse.Namespace, str], None]
) -> int:
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT
    said: list[str] = []
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise ClusterError(f"kubectl port-forward said nothing in {START_TIMEOUT:.0f}s") from None
        if line is None:
            proc.wait()
            last = said[-1] if said else f"exit status {proc.returncode}"
            refused = [line for line in said if NO_PORT_FORWARD in line]
            if refused:
                raise NoPortForward(refused[0])
            pending = [line for line in said if NOT_RUNNING in line]
            if pending:
                raise PodNotRunning(text.clean(pending[0].removeprefix("error: "), 200))
            raise ClusterError(f"kubectl port-forward ended: {last}")
        said.append(line)
        found = FORWARDING.search(line)
        if found:
            break
    host = found.group(1).strip("[]")
    announce(args, f"http://{'[' + host + ']' if ':' in host else host}:{found.group(2)}/")
    while lines.get() is not None:  # kubectl's further lines ("Handling connection ...")
        pass
    return proc.wait()
