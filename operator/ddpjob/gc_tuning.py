"""Python's cyclic garbage collector, tuned for the project's long-running servers: the
operator process and the development cluster's.

Both allocate thousands of short-lived objects per watch event and API request (parsed
JSON, kopf's and aiohttp's wrappers), nearly all freed by reference counting, while they
hold many long-lived ones (the operator's indices and kopf's per-object memories, the
dev cluster's stored objects and their histories). At Python's default threshold (a
collection of the youngest generation every 700 net allocations) the collector ran every
few events, and its full collections walked all the long-lived objects again: in a
1,024-Pod create burst 0.25-0.34 s of the operator's CPU and about 0.4 s of the dev
cluster's (a quarter of it), against 0.12-0.18 s each tuned (docs/benchmarks.md).
"""

from __future__ import annotations

import gc

# Young-generation collections, in net allocations: 20 times Python's default.
YOUNG_THRESHOLD = 14_000


def tune_for_long_running_server() -> None:
    """Call once, when the process has loaded everything it runs (before serving):
    what exists then (modules, registries) lives as long as the process, so it is frozen
    out of every later collection, which also runs less often. Not for processes that run
    many short-lived servers (tests): their objects must stay collectable."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
