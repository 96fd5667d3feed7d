"""`GET /api/v1/namespaces/{ns}/pods/{name}/log` for the emulator: the container log
that the process kubelet writes, as `kubectl logs` and `ddpjob logs` read it.

The real API server proxies this to the kubelet of the Pod's node, which serves the
container runtime's log file (pkg/registry/core/pod/rest/log.go, LogREST.Get ->
kubelet /containerLogs). Here a kubelet registers a `LogSource` with the emulator
(`attach`). Modelled: `container` may be omitted only for a one-container Pod (400
"a container name must be specified ..." otherwise), an unknown container is 400, a
container that has not started yet is 400 "... is waiting to start", a missing Pod is
404; `tailLines` and `follow` (the stream ends when the container has exited and its
output is read) as in PodLogOptions. Not modelled: previous, sinceSeconds, timestamps,
limitBytes.
"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Callable
from typing import Any

import aiohttp.web
from kmock._internal import references

from ddpjob_devcluster.apiserver.errors import ApiError

# (namespace, pod, pod uid, container) -> (log file, is the container still running?) or None
LogSource = Callable[[str, str, str, str], "tuple[pathlib.Path, Callable[[], bool]] | None"]
PODS = references.resource(group="", version="v1", plural="pods")
FOLLOW_POLL = 0.1


def attach(emulator: Any, source: LogSource) -> None:
    emulator.log_sources.append(source)


def kubelet_source(kubelet: Any) -> LogSource:
    """The process kubelet's containers: it writes each one's output to `log_path`, each
    line prefixed `[pod] ` (the local runner's format); `serve` gives the lines back as
    the container wrote them, like a runtime's log file."""

    def find(namespace: str, pod: str, uid: str, container: str) -> Any:
        for c in reversed(kubelet.snapshot()):
            if c.namespace == namespace and c.pod == pod and c.uid == uid and container == "trainer":
                return c.log_path, (lambda c=c: c.running)
        return None

    return find


def _tail(data: bytes, lines: int) -> bytes:
    if lines <= 0:
        return b""
    parts = data.splitlines(keepends=True)
    return b"".join(parts[-lines:])


def whole_lines_tail(data: bytes, lines: int | None) -> bytes:
    return data if lines is None else _tail(data, lines)


class LogReader:
    """One container's log file as a client reads it, for both servers of a log (this
    emulator's and the real API server's kubelet, controlplane/kubelet_server.py): what
    is there first, then, when following, whole lines as they come, and the last partial
    line once the container has exited."""

    def __init__(self, pod: str, path: pathlib.Path, running: Callable[[], bool], follow: bool):
        self.pod, self.path, self.running, self.follow = pod, path, running, follow
        self.offset = 0

    def head(self, tail: int | None) -> bytes:
        data = self.path.read_bytes() if self.path.exists() else b""
        # Only whole lines are sent while following; the rest waits for its newline.
        complete = data if not self.follow else data[: data.rfind(b"\n") + 1]
        self.offset = len(complete)
        return unprefixed(self.pod, whole_lines_tail(complete, tail))

    def next(self) -> bytes | None:
        """What came since (b'': nothing yet, poll again); None once the container has
        exited and everything it wrote has been read."""
        was_running = self.running()
        fresh = b""
        if self.path.exists():
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                fresh = f.read()
        if fresh and (b"\n" in fresh or not was_running):
            if was_running:
                fresh = fresh[: fresh.rfind(b"\n") + 1]
            self.offset += len(fresh)
            return unprefixed(self.pod, fresh)
        return None if not was_running else b""


def unprefixed(pod: str, data: bytes) -> bytes:
    """The lines as the container wrote them: the kubelet's log file prefixes each with
    `[pod] ` (the local runner's format), a runtime's log file does not."""
    prefix = f"[{pod}] ".encode()
    return b"".join(line[len(prefix) :] if line.startswith(prefix) else line for line in data.splitlines(keepends=True))


async def serve(emulator: Any, request: Any) -> aiohttp.web.StreamResponse:
    namespace, name = request.namespace, request.name
    pod = emulator.store.get(PODS, namespace, name)  # 404 NotFound when missing
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    container = request.params.get("container")
    if not container:
        if len(names) != 1:
            raise ApiError(
                400,
                "BadRequest",
                f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]",
            )
        container = names[0]
    elif container not in names:
        raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
    found = None
    for source in emulator.log_sources:
        found = source(namespace, name, pod["metadata"].get("uid", ""), container)
        if found:
            break
    if not found:
        raise ApiError(
            400, "BadRequest", f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
        )
    path, running = found
    try:
        tail = int(request.params["tailLines"]) if request.params.get("tailLines") else None
    except ValueError:
        raise ApiError(400, "BadRequest", f"invalid tailLines: {request.params['tailLines']!r}") from None
    follow = request.params.get("follow") in ("true", "1")

    response = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
    await response.prepare(request._raw_request)
    reader = LogReader(name, path, running, follow)
    await response.write(reader.head(tail))
    while follow and not emulator.stopping:
        fresh = reader.next()
        if fresh is None:
            break  # exited, and everything it wrote has been sent
        if not fresh:
            await asyncio.sleep(FOLLOW_POLL)
            continue
        try:
            await response.write(fresh)
        except (ConnectionError, RuntimeError):
            return response  # the client went away
    await response.write_eof()
    return response
