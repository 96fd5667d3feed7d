"""`ddpjob tensorboard NAME`: a job's TensorBoard (`spec.tensorboard`), opened from here.

The operator serves it inside the cluster (its Service, `status.tensorboard`); this
command forwards a local port to that Service with `kubectl port-forward` (port_forward.py:
it waits for a Pod still Pending right after `ddpjob submit`), using the
same kubeconfig, context and namespace as the other cluster commands, prints the URL to
open, and with `--open` opens it in the browser. It runs until Ctrl-C or `kill` (or kubectl ends).
kubectl is the one on PATH, else one installed beside this Python (as in the development
venv).

`--via proxy` reaches it through the API server's service proxy instead
(`service_proxy.py`: a loopback server that adds the user's credentials), and so does
the default, `--via auto`, where no kubectl is installed or where kubectl's forward
cannot be set up because the node serves no port-forward (the development cluster's
process kubelet: docs/divergences.md, K9).

    ddpjob tensorboard mnist-cpu [--port 6006] [--address 127.0.0.1] [--open] [--via proxy]
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
import webbrowser
from collections.abc import Iterator
from typing import Any

from ddpjob import text
from ddpjob.api import tensorboard
from ddpjob.cli import cluster, port_forward
from ddpjob.cli.job_phase import get_job
from ddpjob.cluster.connection import ClusterError, Connection

VIAS = ("auto", "port-forward", "proxy")
# The browsers Python's webbrowser finds in a terminal with no display.
CONSOLE_BROWSERS = frozenset({"www-browser", "links", "elinks", "lynx", "w3m"})
# Through the proxy, from the first request to TensorBoard's page: its Pod starting
# (TensorBoard imports in seconds) or not running at all (the API server's 503).
ANSWER_TIMEOUT = 60.0


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
    p.add_argument(
        "--via",
        choices=VIAS,
        default="auto",
        help="kubectl port-forward, or the API server's service proxy (auto: port-forward, "
        "the proxy where kubectl is missing or the node serves no port-forward)",
    )
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


def cmd_tensorboard(args: argparse.Namespace, conn: Connection) -> int:
    service = service_of(get_job(conn, args.name), args.name)
    with stop_on_signals():
        return _open(args, conn, service)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Ctrl-C and `kill` end the command through KeyboardInterrupt (exit 130), so that its
    kubectl or its proxy is stopped first. Installed explicitly: a shell starts a background
    job with SIGINT ignored, and Python then leaves it ignored; SIGTERM's default would end
    this process at once and leave kubectl running. The previous handlers come back after."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():  # signal.signal works there only
        yield
        return
    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _open(args: argparse.Namespace, conn: Connection, service: str) -> int:
    via = getattr(args, "via", "auto")
    if via == "auto":
        try:
            port_forward.kubectl()
        except ClusterError as missing:
            print(f"{missing}; going through the API server's service proxy instead", file=sys.stderr, flush=True)
            via = "proxy"
    if via != "proxy":
        try:
            return port_forward.port_forward(args, conn, service, announce)
        except port_forward.NoPortForward as refused:
            if via != "auto":
                raise
            print(
                f"kubectl port-forward was refused ({refused.reason}); "
                "going through the API server's service proxy instead",
                file=sys.stderr,
                flush=True,
            )
    return serve_proxy(args, conn, service)


def announce(args: argparse.Namespace, url: str) -> None:
    print(f"TensorBoard of ddpjob {args.name}: {url}  (Ctrl-C to stop)", flush=True)
    if args.open:
        opened, said = open_in_browser(url)
        print(said, file=sys.stdout if opened else sys.stderr, flush=True)


def open_in_browser(url: str) -> tuple[bool, str]:
    """Open `url` in the user's web browser: whether it was, and the one line saying so
    (a machine with no display has none, and webbrowser.open() then says nothing)."""
    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        return False, "no web browser found here (no display, no $BROWSER): open the URL above in one"
    name = str(getattr(browser, "name", "") or type(browser).__name__)
    if name in CONSOLE_BROWSERS:  # it would take over this terminal, and TensorBoard's page needs JavaScript
        return False, f"the only web browser here is {name}, a text one: open the URL above in another"
    try:
        opened = browser.open(url)
    except Exception as exc:  # noqa: BLE001 - whatever the browser's launcher raised: said, the forward goes on
        return False, f"the web browser ({name}) failed to start: {text.clean(exc, 200)}: open the URL above yourself"
    if not opened:
        return False, f"the web browser ({name}) did not open it: open the URL above yourself"
    return True, f"opened in the web browser ({name})"


def serve_proxy(args: argparse.Namespace, conn: Connection, service: str) -> int:
    """Serve the Service through the API server's proxy on a loopback port until Ctrl-C,
    once TensorBoard answers there (the API server says why it does not: no ready Pod)."""
    from ddpjob.cli.service_proxy import ServiceProxy

    try:
        proxy = ServiceProxy(conn, service, tensorboard.PORT, address=args.address, local_port=args.port).start()
    except OSError as exc:
        raise ClusterError(f"cannot listen on {args.address}:{args.port}: {exc.strerror or exc}") from None
    try:
        _wait_answers(proxy)
        announce(args, proxy.url)
        while True:  # until Ctrl-C (KeyboardInterrupt)
            # A sleep, not a wait on an Event: the main thread wakes at least each second, so
            # Python runs the SIGINT handler even when another thread took the signal.
            time.sleep(1.0)
        return 0
    finally:
        proxy.stop()


def _wait_answers(proxy: Any) -> None:
    deadline, said = time.monotonic() + ANSWER_TIMEOUT, ""
    while True:
        try:
            with proxy.request("GET", proxy.prefix + "/", {}) as response:
                if response.status == 200:
                    return
                said = f"{response.status} {' '.join(response.read(300).decode(errors='replace').split())}"
        except Exception as exc:  # noqa: BLE001 - urllib3's and the OS's failures alike: said below
            said = " ".join(str(exc).split())[:200]
        if time.monotonic() > deadline:
            raise ClusterError(f"TensorBoard did not answer through the API server in {ANSWER_TIMEOUT:.0f}s: {said}")
        time.sleep(1.0)  # the Pod starting: poll again
