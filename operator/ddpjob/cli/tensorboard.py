"""`ddpjob tensorboard NAME`: a job's TensorBoard (`spec.tensorboard`), opened from here.

The operator serves it inside the cluster (its Service, `status.tensorboard`); this
command forwards a local port to that Service with `kubectl port-forward`, using the
same kubeconfig, context and namespace as the other cluster commands, prints the URL to
open, and with `--open` opens it in the browser. It runs until Ctrl-C (or kubectl ends).
kubectl is the one on PATH, else one installed beside this Python (as in the development
venv).

    ddpjob tensorboard mnist-cpu [--port 6006] [--address 127.0.0.1] [--open]
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
import webbrowser
from typing import IO, Any

from ddpjob.api import tensorboard
from ddpjob.cli import cluster
from ddpjob.cli.job_phase import get_job
from ddpjob.cli.kubeclient import ClusterError, Connection

# kubectl says where it listens once the forward is up: "Forwarding from 127.0.0.1:6006 -> 6006".
FORWARDING = re.compile(r"Forwarding from (\S+):(\d+) -> \d+")
# From kubectl's start to its first line: a cluster that answers says it in seconds.
START_TIMEOUT = 60.0


def register(sub: Any) -> None:
    """Add `tensorboard` to `ddpjob`'s subparsers (cli/main.py's command groups)."""
    p = sub.add_parser(
        "tensorboard",
        help="open a job's TensorBoard (spec.tensorboard): forward a local port, print the URL",
        description="Forward a local port to the job's TensorBoard Service with kubectl port-forward, "
        "print the URL to open, and keep forwarding until Ctrl-C.",
    )
    p.add_argument("name", metavar="NAME", help="the DDPJob")
    p.add_argument("--port", type=port_number, default=0, help="local port (default: any free one)")
    p.add_argument("--address", default="127.0.0.1", help="local address to listen on (default: 127.0.0.1)")
    p.add_argument("--open", action="store_true", help="also open the URL in a web browser")
    cluster.cluster_command(p, cmd_tensorboard)


def port_number(text: str) -> int:
    if not (text.isascii() and text.isdigit() and int(text) <= 65535):
        raise argparse.ArgumentTypeError(f"not a port number: {text!r} (0 to 65535; 0: any free port)")
    return int(text)


def service_of(job: dict[str, Any], name: str) -> str:
    """The job's TensorBoard Service, or a ClusterError saying why there is none."""
    spec, board = job.get("spec") or {}, (job.get("status") or {}).get("tensorboard") or {}
    if not spec.get("tensorboard"):
        raise ClusterError(
            f"ddpjob {name} has no TensorBoard: set spec.tensorboard: true (the job needs spec.checkpoint)"
        )
    if board.get("message"):
        raise ClusterError(f"the operator could not make the TensorBoard of ddpjob {name}: {board['message']}")
    if not board.get("service"):
        raise ClusterError(
            f"the TensorBoard of ddpjob {name} is not made yet (status.tensorboard is empty): "
            "is the operator running? try again in a moment"
        )
    return str(board["service"])


def kubectl() -> str:
    here = os.path.dirname(os.path.abspath(sys.executable))
    found = shutil.which("kubectl") or shutil.which("kubectl", path=here)
    if found is None:
        raise ClusterError(f"kubectl is not installed (looked on PATH and in {here}): it forwards the port")
    return found


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


def cmd_tensorboard(args: argparse.Namespace, conn: Connection) -> int:
    service = service_of(get_job(conn, args.name), args.name)
    proc = subprocess.Popen(
        port_forward_argv(args, conn, service),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    try:
        return _serve(args, proc)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _serve(args: argparse.Namespace, proc: subprocess.Popen[str]) -> int:
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
            raise ClusterError(f"kubectl port-forward ended: {last}")
        said.append(line)
        found = FORWARDING.search(line)
        if found:
            break
    host = found.group(1).strip("[]")
    url = f"http://{'[' + host + ']' if ':' in host else host}:{found.group(2)}/"
    print(f"TensorBoard of ddpjob {args.name}: {url}  (Ctrl-C to stop)", flush=True)
    if args.open:
        webbrowser.open(url)
    while lines.get() is not None:  # kubectl's further lines ("Handling connection ...")
        pass
    return proc.wait()
