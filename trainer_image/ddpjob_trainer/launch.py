"""`ddpjob-launch [--dns-timeout S] CMD [ARGS...]`: the trainer image's entrypoint.

Reads the node-level contract, waits for MASTER_ADDR to resolve (Pods start before the
headless Service's DNS record exists), then runs CMD under torch.distributed.run with a
static rendezvous -- torchrun does the process management, not us. The only case that
skips torchrun is one process per node running an arbitrary executable: the contract
already gives it RANK/WORLD_SIZE, so it is exec'ed as is. An elastic job (NNODES=MIN:MAX)
either resizes in place (in_place_launch.py: this launcher serves the node's store and
torchrun only starts this node's workers) or runs under torchrun's c10d rendezvous, which
restarts the workers at each resize (elastic_launch.py); `--resize` chooses.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from ddpjob import contract, exit_codes, progress_record

from . import (
    EXIT_BAD_INPUT,
    EXIT_RENDEZVOUS_TIMEOUT,
    RendezvousTimeout,
    UsageError,
    elastic_launch,
    in_place_launch,
    record_events,
    stacks,
    termination_message,
)
from .backend import refuse_short_nccl
from .env import LaunchEnv, read_launch_env, threads_per_process

TRAIN_CMD = "ddpjob-train"
# Cluster DNS usually publishes a new headless-Service record within seconds, but a busy
# CoreDNS or a slow node can take minutes; 5 minutes is well inside a Pod's useful life.
DEFAULT_DNS_TIMEOUT = 300.0
DNS_LOG_EVERY = 5.0
USAGE = "usage: ddpjob-launch [--dns-timeout SECONDS] [--resize in-place|restart] [--version] CMD [ARGS...]"


def visible_gpus() -> int:
    """GPUs this container sees (NVML through torch; no CUDA context is made)."""
    try:
        import torch
    except ImportError:  # a launcher without torch runs the user's own program
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def log(msg: str) -> None:
    print(f"ddpjob-launch: {msg}", file=sys.stderr, flush=True)


def wait_for_dns(host: str, timeout: float, log_every: float = DNS_LOG_EVERY) -> None:
    start = time.monotonic()
    last_log = start
    while True:
        try:
            socket.getaddrinfo(host, None)
            return
        except OSError as e:
            error = e
        now = time.monotonic()
        if now - start >= timeout:
            # Pod 0's DNS record appears once it is scheduled and has an IP: on a busy
            # cluster this is the gang still waiting to be placed, so a retry may succeed.
            raise RendezvousTimeout(
                f"MASTER_ADDR {host!r} did not resolve within {timeout:.0f}s ({error}); "
                "is Pod 0 scheduled and the job's headless Service there?"
            )
        if now - last_log >= log_every:
            log(f"waiting for MASTER_ADDR {host!r} to resolve ({now - start:.0f}s/{timeout:.0f}s): {error}")
            last_log = now
        time.sleep(min(1.0, max(0.0, timeout - (now - start))))


def torchrun_target(cmd: list[str]) -> list[str] | None:
    """The program part of a torchrun command line for CMD, or None if CMD is an
    arbitrary executable (which torchrun can only run with --no-python)."""
    head, rest = cmd[0], cmd[1:]
    if head == TRAIN_CMD:
        return ["-m", "ddpjob_trainer.train", *rest]
    if head == "-m":
        if not rest:
            raise UsageError("-m needs a module name")
        return ["-m", *rest]
    if head.endswith(".py"):
        if not os.path.isfile(head):
            raise UsageError(f"script {head!r} does not exist")
        return cmd
    return None


def build_command(launch: LaunchEnv, cmd: list[str], resize: str | None = None) -> tuple[list[str], bool]:
    """(argv, uses_torchrun). `resize`: an elastic job's mode (in_place_launch.py)."""
    target = torchrun_target(cmd)
    if target is None:
        if shutil.which(cmd[0]) is None:
            raise UsageError(f"command {cmd[0]!r} not found on PATH")
        if launch.nproc_per_node == 1 and not launch.elastic:
            return cmd, False
        target = ["--no-python", *cmd]
    if resize == in_place_launch.IN_PLACE:
        return in_place_launch.torchrun_argv(launch, target), True
    if launch.elastic:
        elastic_launch.set_defaults()
        return [sys.executable, "-m", "ddpjob_trainer._torchrun", *elastic_launch.torchrun_args(launch), *target], True
    argv = [
        sys.executable,
        "-m",
        "ddpjob_trainer._torchrun",
        "--nnodes",
        str(launch.nnodes),
        "--node-rank",
        str(launch.node_rank),
        "--nproc-per-node",
        str(launch.nproc_per_node),
        "--master-addr",
        launch.master_addr,
        "--master-port",
        str(launch.master_port),
        "--rdzv-backend",
        "static",
        # Restarts are decided for the whole gang by the operator, never per node.
        "--max-restarts",
        "0",
        *target,
    ]
    return argv, True


def run_forwarding_signals(argv: list[str], received: list[int] | None = None) -> int:
    received = [] if received is None else received
    children: list[subprocess.Popen] = []

    def forward(signum, _frame):
        received.append(signum)
        if children and children[0].poll() is None:
            children[0].send_signal(signum)

    # Handlers first, so a SIGTERM that lands while the child starts is not lost.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    # Own session: a terminal's Ctrl-C reaches the child once, through us, not twice.
    child = subprocess.Popen(argv, start_new_session=True)
    children.append(child)
    if received:
        child.send_signal(received[0])
    code = child.wait()
    code = exit_codes.of_returncode(code)
    if received and code != 0 and not exit_codes.is_signal(code):
        # Asked to stop and did not finish: keep it retryable whatever the child said.
        return exit_codes.of_signal(received[0])
    return code


def start_progress_server(env=None, notices=None) -> bool:
    """Serve /progress and /metrics when the contract names a progress file and port (and
    the operator's notices, for a job that resizes in place: progress_server.py).
    A port that cannot be bound costs the job its progress view, never its run."""
    env = os.environ if env is None else env
    path, port = env.get(contract.PROGRESS_FILE), env.get(contract.PROGRESS_PORT)
    if not path or not port:
        return False
    host = env.get(contract.PROGRESS_HOST) or ""  # "": every address of the Pod
    try:
        from .progress_server import serve_in_thread

        serve_in_thread(path, host, int(port), notices)
    except (OSError, ValueError) as e:
        log(f"warning: not serving progress on {host or '*'}:{port}: {e}")
        return False
    log(f"progress on http://{host or '<pod ip>'}:{port}/progress and /metrics")
    return True


def leave_final_record(env=None) -> None:
    """A finished run's last progress record as the container's termination message, so
    a job that ended between two of the operator's reads still shows where it got to
    (the kubelet reads the file when the container ends)."""
    env = os.environ if env is None else env
    progress_file = env.get(contract.PROGRESS_FILE)
    record = progress_record.read(progress_file) if progress_file else None
    if record is not None:
        termination_message.leave(json.dumps(record, separators=(",", ":")), env)


def _seconds(value, what: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise UsageError(f"{what} {value!r} is not a number of seconds") from None


def parse_argv(argv: list[str]) -> tuple[float, str | None, list[str]]:
    """(DNS timeout, --resize or None, the command)."""
    timeout = _seconds(os.environ.get("DDPJOB_DNS_TIMEOUT", DEFAULT_DNS_TIMEOUT), "DDPJOB_DNS_TIMEOUT")
    resize = None
    while argv and argv[0].startswith("--"):
        flag = argv.pop(0)
        name, _, value = flag.partition("=")
        if name == "--dns-timeout":
            timeout = _seconds(value or (argv.pop(0) if argv else ""), "--dns-timeout")
        elif name == "--resize":
            resize = value or (argv.pop(0) if argv else "")
            if resize not in in_place_launch.MODES:
                raise UsageError(f"--resize {resize!r}: use {' or '.join(in_place_launch.MODES)}")
        elif name in ("--help",):
            print(USAGE)
            raise SystemExit(0)
        elif name == "--version":
            # ddpjob.version is import-free: the trainer side stays free of the operator's needs.
            from ddpjob.version import __version__

            print(f"ddpjob-launch {__version__}")
            raise SystemExit(0)
        else:
            raise UsageError(f"unknown option {flag!r}; {USAGE}")
    if not argv:
        raise UsageError(USAGE)
    return timeout, resize, argv


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    stacks.dump_on_signal()  # so does this launcher (stacks.py)
    stacks.dump_on_crash()  # and a crash says where, here and in every process it starts
    try:
        dns_timeout, asked, cmd = parse_argv(argv)
        launch = read_launch_env()
        resize = in_place_launch.mode(launch, cmd[0], asked)
        command, uses_torchrun = build_command(launch, cmd, resize)
        if (os.environ.get(contract.BACKEND) or "").strip().lower() == "nccl":
            refuse_short_nccl(launch.nproc_per_node, visible_gpus())  # before any process starts
        log(
            f"node {launch.node_rank}/{f'{launch.min_nodes}:' if launch.elastic else ''}{launch.nnodes}, "
            f"{launch.nproc_per_node} process(es), "
            f"master {launch.master_addr}:{launch.master_port}"
            + ("" if launch.from_contract else " (no contract env: single-node defaults)")
            + (f", resizes {resize}" if resize else "")
        )
        store = None
        if resize == in_place_launch.IN_PLACE:
            store = in_place_launch.serve_store(launch)  # before the workers: they look for it
            in_place_launch.worker_env()
            in_place_launch.await_own_name(store, launch, log)
        else:
            wait_for_dns(launch.master_addr, dns_timeout)
    except UsageError as e:
        log(f"error: {e}")
        return EXIT_BAD_INPUT
    except RendezvousTimeout as e:
        log(f"error: {e}")
        return EXIT_RENDEZVOUS_TIMEOUT
    except OSError as e:  # the node's store: its port still taken (a predecessor on this machine)
        log(f"error: cannot serve this node's store: {e}")
        return EXIT_RENDEZVOUS_TIMEOUT
    if uses_torchrun and "OMP_NUM_THREADS" not in os.environ:
        # torchrun would set 1 for every worker (and warn): a 32-core node running 4
        # workers would use 4 cores. Share the container's CPUs instead.
        os.environ["OMP_NUM_THREADS"] = str(threads_per_process(launch.nproc_per_node))
    serving = start_progress_server(notices=store and (os.environ.get(contract.NOTICE_TOKEN), store.notice))
    if not uses_torchrun and not serving:
        sys.stdout.flush()
        os.execvp(command[0], command)  # signals and exit code are the program's own
    # The progress server lives in this process: stay as the parent, forwarding signals.
    follower = record_events.follow(cmd, say=log)  # a program's own records as TensorBoard curves
    if not launch.elastic or store is not None:
        code = run_forwarding_signals(command)
    else:
        received: list[int] = []
        code = elastic_launch.run_rejoining(
            lambda: run_forwarding_signals(command, received),
            lambda left: wait_for_dns(launch.master_addr, min(left, dns_timeout)),
            lambda: bool(received),
            log,
        )
    if follower is not None:
        follower.stop()
    if code == 0:
        leave_final_record()
    if store is not None:
        in_place_launch.leave(code)  # never returns: no finalization beside the store's threads
    return code


if __name__ == "__main__":
    sys.exit(main())
