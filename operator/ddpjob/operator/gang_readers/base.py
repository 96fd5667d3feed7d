"""What one gang integration's reader is: which waiting Pods it speaks for, how to read
what it says of them, and how often to read it again."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

from ddpjob.backoff import Backoff
from ddpjob.operator.kube import Kube

# (kube, namespace, the attempt's group name) -> (its own GangScheduled reason or None,
# its words), or None while it has nothing to add to the Pods' words.
Read = Callable[[Kube, str, str], Awaitable[tuple[str | None, str] | None]]


@dataclass(frozen=True)
class Reader:
    gang: str  # spec.scheduling.gang
    # The PodScheduled reason of a Pod this integration holds (and whose words it can add to).
    held: str
    read: Read
    # Reads again while the gang stays held: what it says changes without an event the
    # operator sees (it watches neither Workloads nor Events).
    recheck: Backoff
