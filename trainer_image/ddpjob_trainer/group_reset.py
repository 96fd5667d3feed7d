"""Letting go of a broken process group, per backend, so the next generation's can be made
in the same process (the resize in place, elastic.py).

- gloo: no collective in flight can be aborted, and destroying a group waits for its
  collectives to end (the group's timeout, when a peer is frozen: measured 59 s with a
  60 s timeout). So the groups are only taken out of torch's registry
  (`_abort_process_group`, whose `abort()` returns at once for gloo) and kept referenced
  here until the process ends: their sockets and threads go with it.
- nccl: `_abort_process_group` aborts the communicators (ncclCommAbort), which ends their
  collectives in flight. When the new generation only lost nodes and the backend can
  shrink (torch's `shrink_group`, NCCL 2.27's ncclCommShrink), the survivors shrink the
  communicator instead of making a new one through the store (`shrink`).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

# Groups taken out of the registry with collectives that may still be running.
ABANDONED: list = []


def abandon() -> int:
    """Take every process group out of torch's registry without waiting for it; how many."""
    if not dist.is_initialized():
        return 0
    groups = list(c10d._world.pg_map)
    c10d._abort_process_group()
    ABANDONED.extend(groups)
    return len(groups)


def can_shrink(group=None) -> bool:
    """Whether the group's backend shrinks in place (NCCL with ncclCommShrink; never gloo)."""
    group = group or dist.group.WORLD
    device = torch.accelerator.current_accelerator() or torch.device("cpu")
    try:
        return bool(group._get_backend(device).supports_shrinking)
    except (RuntimeError, AttributeError):
        return False


def shrink(excluded: list[int], others: list, store) -> None:
    """Make the default group the old one without the ranks `excluded` (its old ranks),
    aborting what it had in flight; every survivor calls it with the same list. Shrinking
    the default group destroys every other group, and destroying a gloo group waits for
    its collectives: `others` (the CPU group) are abandoned first. The new group is then
    registered with `store`, the new generation's, for the groups made after it (the old
    generation's store may have died with its node)."""
    for group in others:
        c10d._abort_process_group(group)
        ABANDONED.append(group)
    new = dist.shrink_group(sorted(excluded), shrink_flags=c10d.SHRINK_ABORT)
    backend, _ = c10d._world.pg_map[new]
    c10d._world.pg_map[new] = (backend, store)
