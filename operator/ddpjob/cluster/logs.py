"""A DDPJob's logs on a cluster: the trainer container's lines of one Pod, and of several
Pods merged in the order they arrive.

The one merger of Pod logs (`ddpjob logs --all -f` and the Python client's
`get_job_logs(..., all_nodes=True)`): a reader thread per Pod feeds a bounded queue; the
caller's thread takes `(pod, line)` pairs from it. One Pod's failure does not stop the
others; once every stream ended, the failures are raised together (`PodLogsFailed`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterator, Sequence
from typing import Any

from ddpjob.api import names
from ddpjob.cluster.connection import ClusterError, Connection, explained

# A line longer than this (a Pod that never writes a newline) is passed on in pieces of
# this size: the reader's memory stays bounded whatever the container writes.
MAX_LINE_BYTES = 1 << 20
# Lines read ahead of the caller, all Pods together: a slow reader slows the streams.
QUEUE_LINES = 1024
# How often a reader blocked on a full queue looks whether the caller went away.
_PUT_WAIT = 0.2


class PodLogsFailed(ClusterError):
    """The logs of some Pods could not be read; `failures`: each Pod and its one line.
    The message is the first failure's."""

    def __init__(self, failures: list[tuple[str, ClusterError]]):
        super().__init__(str(failures[0][1]), status=failures[0][1].status)
        self.failures = failures


def lines_of(stream: Any) -> Iterator[str]:
    """Lines of a streamed HTTP body, as they arrive."""
    pending = b""
    for chunk in stream.stream(4096, decode_content=True):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line.decode(errors="replace")
        while len(pending) > MAX_LINE_BYTES:
            piece, pending = pending[:MAX_LINE_BYTES], pending[MAX_LINE_BYTES:]
            yield piece.decode(errors="replace")
    if pending:
        yield pending.decode(errors="replace")


def pod_lines(conn: Connection, pod: str, follow: bool, tail: int | None) -> Generator[str]:
    """The trainer container's log lines of one Pod, as they arrive; `follow` streams
    until the container ends. A failure is the ClusterError naming the Pod."""
    with explained(conn, f"pod {pod}"):
        response = conn.core.read_namespaced_pod_log(
            pod,
            conn.namespace,
            container=names.TRAINER_CONTAINER,
            follow=follow,
            tail_lines=tail,
            _preload_content=False,
        )
        try:
            yield from lines_of(response)
        finally:  # a stream left early is closed, never handed back to the pool half read
            response.close()


def merged(conn: Connection, pods: Sequence[str], follow: bool, tail: int | None) -> Iterator[tuple[str, str]]:
    """`(pod, line)` of every Pod's log, in the order the lines arrive (one reader thread
    per Pod). Raises PodLogsFailed once every stream ended if any failed. Closing the
    iterator early lets the readers go at their next line."""
    lines: queue.Queue[tuple[str, str] | None] = queue.Queue(maxsize=QUEUE_LINES)  # None: a stream ended
    failures: list[tuple[str, ClusterError]] = []
    stop = threading.Event()

    def put(item: tuple[str, str] | None) -> bool:
        while not stop.is_set():
            try:
                lines.put(item, timeout=_PUT_WAIT)
                return True
            except queue.Full:
                continue
        return False

    def read(pod: str) -> None:
        stream = pod_lines(conn, pod, follow, tail)
        try:
            for line in stream:
                if not put((pod, line)):
                    break
        except ClusterError as exc:  # handed to the caller's thread, with its Pod
            failures.append((pod, exc))
        finally:
            stream.close()
            put(None)

    for pod in pods:
        threading.Thread(target=read, args=(pod,), name=f"logs-{pod}", daemon=True).start()
    try:
        ended = 0
        while ended < len(pods):
            item = lines.get()
            if item is None:
                ended += 1
            else:
                yield item
    finally:
        stop.set()
    if failures:
        raise PodLogsFailed(failures)
