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

torch's registry of groups, its abort and a backend's `supports_shrinking` are private:
they are reached through private_api.py, which refuses a torch that changed them.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from . import private_api

# Groups taken out of the registry with collectives that may still be running.
ABANDONED: list = []


def abandon() -> int:
    """Take every process group out of torch's registry without waiting for it; how many."""
    if not dist.is_initialized():
        return 0
    groups = list(private_api.group_registry())
    private_api.abort_process_group()
    ABANDONED.extend(groups)
    return len(groups)


def can_shrink(group=None) -> bool:
    """Whether the group's backend shrinks in place (NCCL with ncclCommShrink; never gloo)."""
    group = group or dist.group.WORLD
    if group is None:  # no default group (not initialized)
        return False
    device = torch.accelerator.current_accelerator() or torch.device("cpu")
    try:
        return private_api.supports_shrinking(group, device)
    except RuntimeError:  # the group has no backend for that device
        return False


def shrink(excluded: list[int], others: list, store) -> None:
    """Make the default group the old one without the ranks `excluded` (its old ranks),
    aborting what it had in flight; every survivor calls it with the same list. Shrinking
    the default group destroys every other group, and destroying a gloo group waits for
    its collectives: `others` (the CPU group) are abandoned first. The new group is then
    registered with `store`, the new generation's, for the groups made after it (the old
    generation's store may have died with its node)."""
    private_api.require_torch()  # before anything is torn down
    for group in others:
        private_api.abort_process_group(group)
        ABANDONED.append(group)
    new = dist.shrink_group(sorted(excluded), shrink_flags=c10d.SHRINK_ABORT)
    registry = private_api.group_registry()
    backend, _ = registry[new]
    registry[new] = (backend, store)
