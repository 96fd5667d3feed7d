"""Run a Pod's `trainer` container as a local process group.

Shared by `ddpjob run` and the test kubelet, so both start processes the same way:
the Pod's own command and env, output prefixed with the Pod name, and signals sent
to the whole group (torchrun's workers included).
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO

from ddpjob import contract, exit_codes
from ddpjob.api import names
from ddpjob.local.process_tags import CONTAINER_TAG_ENV, kill_tagged
from ddpjob.local.progress_view import write_line

# What the trainer image's ENTRYPOINT is; used when a job gives no command.
DEFAULT_ENTRYPOINT = ("ddpjob-launch",)
# The kubelet's bounds on a termination message taken from the log
# (kubecontainer.MaxContainerTerminationMessageLogLines and ...LogLength).
LOG_TAIL_LINES, LOG_TAIL_BYTES = 80, 2048
# What the kubelet reads of a container's terminationMessagePath (kubecontainer's 4 KiB).
TERMINATION_MESSAGE_BYTES = 4096


class LocalRunError(RuntimeError):
    """A Pod that cannot run as a local process (unsupported field, missing program)."""


class StartError(LocalRunError):
    """The container's command cannot be started. containerd reports such a container as
    terminated with exit code 128 and reason StartError; so do `ddpjob run` and the kubelet."""

    exit_code = exit_codes.START_ERROR
    reason = "StartError"


@dataclass(frozen=True)
class Terminated:
    """A container's end, as a container runtime reports it in `state.terminated`."""

    exit_code: int
    reason: str  # Completed | Error | StartError
    finished_at: float
    message: str | None = None

    @property
    def phase(self) -> str:
        return "Succeeded" if self.exit_code == 0 else "Failed"


def trainer_container(pod: Mapping) -> Mapping:
    for container in pod["spec"]["containers"]:
        if container.get("name") == names.TRAINER_CONTAINER:
            return container
    raise LocalRunError(f"Pod {pod['metadata']['name']} has no container named {names.TRAINER_CONTAINER!r}")


# The project's own commands. They are installed beside the interpreter that runs
# `ddpjob`, which need not be on PATH (`.venv/bin/ddpjob run` with the venv not
# activated), and the ones beside it are the same release as this ddpjob.
OWN_COMMANDS = ("ddpjob", "ddpjob-launch", "ddpjob-train")


def interpreter_bin() -> str:
    # Not resolved through symlinks: a venv's bin/python links to the base interpreter.
    return os.path.dirname(os.path.abspath(sys.executable))


def find_program(name: str) -> str | None:
    """The program a container command names, as this machine has it."""
    if os.sep in name:
        return name if os.path.exists(name) else None
    beside = shutil.which(name, path=interpreter_bin())
    if name in OWN_COMMANDS and beside:
        return beside
    return shutil.which(name) or beside


def container_argv(container: Mapping) -> list[str]:
    command = list(container.get("command") or DEFAULT_ENTRYPOINT)
    argv = command + list(container.get("args") or [])
    program = find_program(argv[0])
    if program is None:
        raise StartError(
            f"spec.command: {argv[0]!r} is not installed on this machine (looked on PATH and in {interpreter_bin()})"
        )
    return [program, *argv[1:]] if argv[0] in OWN_COMMANDS else argv


def child_path(environ: Mapping[str, str]) -> str:
    """PATH for a container's processes: the interpreter's bin first when it is missing,
    so what a command starts in turn (torchrun, python) is this environment's too."""
    path = environ.get("PATH", os.defpath)
    return path if interpreter_bin() in path.split(os.pathsep) else interpreter_bin() + os.pathsep + path


def container_env(pod: Mapping, container: Mapping) -> dict[str, str]:
    """The container's env as the kubelet would resolve it, for what a laptop can resolve."""
    meta = pod["metadata"]
    field_refs = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta.get("namespace", "default"),
        "spec.nodeName": "localhost",
        "status.podIP": "127.0.0.1",
        "status.hostIP": "127.0.0.1",
    }
    env: dict[str, str] = {}
    for entry in container.get("env") or []:
        name = entry["name"]
        if "valueFrom" in entry:
            ref = (entry["valueFrom"] or {}).get("fieldRef", {}).get("fieldPath")
            if ref not in field_refs:
                raise LocalRunError(
                    f"spec.env[{name}].valueFrom: only fieldRef to {', '.join(field_refs)} "
                    "can be resolved without a cluster"
                )
            env[name] = field_refs[ref]
        else:
            env[name] = str(entry.get("value", ""))
    return env


@dataclass
class ContainerProcess:
    pod_name: str
    popen: subprocess.Popen
    tag: str = ""
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    stop_requested_at: float | None = None
    # terminationMessagePolicy FallbackToLogsOnError: a failed container's last log lines
    # are its termination message, as the kubelet makes it (80 lines, 2 KiB at most).
    fallback_to_logs: bool = False
    # The container's terminationMessagePath, here (contract.TERMINATION_LOG): what it left
    # there is its termination message, whatever its exit code, as the kubelet reads it.
    termination_log: str | None = None
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=LOG_TAIL_LINES))
    _reader: threading.Thread | None = None

    def poll(self) -> int | None:
        code = self.popen.poll()
        if code is None:
            return None
        if self.finished_at is None:
            self.finished_at = time.time()
            # The main process ended: so does the container, with whatever it left behind.
            self.kill_tree()
        return exit_codes.of_returncode(code)

    def terminated(self) -> Terminated | None:
        """None while the main process runs; then how the container ended."""
        code = self.poll()
        if code is None:
            return None
        message = self._termination_message()
        if not message and code != 0 and self.fallback_to_logs and self.tail:
            self.output_written(1)  # the last lines may still be on their way
            message = "\n".join(self.tail).encode()[-LOG_TAIL_BYTES:].decode("utf-8", "ignore")
        return Terminated(code, "Completed" if code == 0 else "Error", self.finished_at or time.time(), message)

    def _termination_message(self) -> str | None:
        if not self.termination_log:
            return None
        try:
            with open(self.termination_log, "rb") as f:
                data = f.read(TERMINATION_MESSAGE_BYTES)
        except OSError:
            return None
        return data.decode("utf-8", "replace") or None

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)

    def kill_tree(self) -> None:
        self.signal(signal.SIGKILL)
        if self.tag:
            kill_tagged(self.tag)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM now (the trainer saves a checkpoint on it), SIGKILL after `grace`."""
        if self.poll() is not None:
            return
        if self.stop_requested_at is None:
            self.stop_requested_at = time.time()
            self.signal(signal.SIGTERM)
        elif time.time() - self.stop_requested_at > grace:
            self.kill_tree()

    def wait(self, timeout: float | None = None) -> int:
        self.popen.wait(timeout)
        self.output_written(5)
        code = self.poll()
        return self.popen.returncode if code is None else code

    def output_written(self, timeout: float) -> bool:
        """Whether the output pump has written all the container's output (it ends once
        every writer is gone), waiting up to `timeout` seconds for it."""
        if self._reader is None:
            return True
        self._reader.join(timeout=timeout)
        return not self._reader.is_alive()


def _pump(stream: IO[bytes], prefix: str, out: IO[str], lock: threading.Lock, tail: collections.deque) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip("\n")
        tail.append(line)
        with lock:
            write_line(out, f"{prefix} {line}\n")  # above `ddpjob run`'s live progress line
    stream.close()


_OUTPUT_LOCK = threading.Lock()


def start_container(
    pod: Mapping,
    overrides: Mapping[str, str] | None = None,
    out: IO[str] | None = None,
    cwd: str | None = None,
    tag: str | None = None,
    preexec: Callable[[], None] | None = None,
) -> ContainerProcess:
    """Start the Pod's trainer container; `overrides` replace contract values that only
    make sense in a cluster (MASTER_ADDR, MASTER_PORT, DDPJOB_CHECKPOINT_DIR)."""
    container = trainer_container(pod)
    argv = container_argv(container)
    tag = tag or uuid.uuid4().hex
    env = {
        **os.environ,
        "PATH": child_path(os.environ),
        **container_env(pod, container),
        **(overrides or {}),
        CONTAINER_TAG_ENV: tag,
    }
    env.setdefault("PYTHONUNBUFFERED", "1")
    termination_log = (overrides or {}).get(contract.TERMINATION_LOG)
    if termination_log:
        # The kubelet makes the file before the container starts: an empty message.
        os.makedirs(os.path.dirname(termination_log) or ".", exist_ok=True)
        with open(termination_log, "wb"):
            pass
    # The image's workingDir rarely exists on this machine; use it only when it does.
    image_dir = container.get("workingDir") or ""
    workdir = cwd or (image_dir if os.path.isdir(image_dir) else None)
    popen = subprocess.Popen(
        argv,
        env=env,
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # a group of its own: Ctrl-C reaches us, and we stop the group
        preexec_fn=preexec,  # e.g. ownership.die_with_parent
    )
    proc = ContainerProcess(
        pod_name=pod["metadata"]["name"],
        popen=popen,
        tag=tag,
        fallback_to_logs=container.get("terminationMessagePolicy") == "FallbackToLogsOnError",
        termination_log=termination_log,
    )
    proc._reader = threading.Thread(
        target=_pump, args=(popen.stdout, f"[{proc.pod_name}]", out or sys.stdout, _OUTPUT_LOCK, proc.tail), daemon=True
    )
    proc._reader.start()
    return proc
