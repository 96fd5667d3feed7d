"""Object and state collectives that wait through `Interrupts` (interrupt.py), for a group
that resizes in place: a lost peer ends them with GroupLost instead of blocking them
until the group's timeout, which torch's blocking `broadcast_object_list` and
`all_gather_object` would do.

`broadcast_state` is how a newcomer takes a live peer's state (TorchFT's healing, without
the HTTP side channel): the structure and every non-tensor value go as one pickled
object over the CPU (gloo) group; each tensor goes over the group of its device, so a
model on a GPU crosses NCCL, not the host."""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .interrupt import Interrupts


def broadcast_bytes(data: bytes | None, src: int, rank: int, group, interrupts: Interrupts) -> bytes:
    size = torch.tensor([len(data) if rank == src and data is not None else 0], dtype=torch.int64)
    interrupts.wait(dist.broadcast(size, src=src, group=group, async_op=True))
    buf = (
        torch.frombuffer(bytearray(data), dtype=torch.uint8)
        if rank == src and data
        else torch.empty(int(size.item()), dtype=torch.uint8)
    )
    if len(buf):
        interrupts.wait(dist.broadcast(buf, src=src, group=group, async_op=True))
    return bytes(buf.numpy())


def broadcast_object(obj, src: int, rank: int, group, interrupts: Interrupts):
    # Peers are the same job's processes (torch's object collectives pickle too).
    return pickle.loads(broadcast_bytes(pickle.dumps(obj) if rank == src else None, src, rank, group, interrupts))


def all_gather_object(obj, world: int, group, interrupts: Interrupts) -> list:
    data = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
    sizes = torch.zeros(world, dtype=torch.int64)
    mine = torch.tensor([len(data)], dtype=torch.int64)
    interrupts.wait(dist.all_gather_single(sizes, mine, group=group, async_op=True))
    longest = int(sizes.max())
    padded = torch.zeros(longest, dtype=torch.uint8)
    padded[: len(data)] = data
    out = torch.empty(world * longest, dtype=torch.uint8)
    interrupts.wait(dist.all_gather_single(out, padded, group=group, async_op=True))
    return [pickle.loads(bytes(out[i * longest : i * longest + int(n)].numpy())) for i, n in enumerate(sizes.tolist())]


def broadcast_tensors(tensors: list[torch.Tensor], src: int, group, interrupts: Interrupts) -> None:
    """`src`'s values of `tensors` into every rank's, in place: one broadcast per device and
    dtype (their flat concatenation), as DDP coalesces its own."""
    kinds: dict[tuple, list[torch.Tensor]] = {}
    for t in tensors:
        kinds.setdefault((t.device, t.dtype), []).append(t)
    for same in kinds.values():
        flat = torch.cat([t.reshape(-1) for t in same])
        interrupts.wait(dist.broadcast(flat, src=src, group=group, async_op=True))
        if dist.get_rank(group) != src:
            offset = 0
            for t in same:
                t.copy_(flat[offset : offset + t.numel()].view_as(t))
                offset += t.numel()


@dataclass(frozen=True)
class _Slot:
    index: int
    shape: tuple[int, ...]
    dtype: str
    on_device: bool  # on the training device (a GPU), not the CPU


def _flatten(value, tensors: list):
    if isinstance(value, torch.Tensor):
        tensors.append(value.detach().contiguous())
        return _Slot(
            len(tensors) - 1, tuple(value.shape), str(value.dtype).removeprefix("torch."), value.device.type != "cpu"
        )
    if isinstance(value, dict):
        return {k: _flatten(v, tensors) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_flatten(v, tensors) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def _fill(value, tensors: list):
    if isinstance(value, _Slot):
        return tensors[value.index]
    if isinstance(value, dict):
        return {k: _fill(v, tensors) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_fill(v, tensors) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def broadcast_state(
    state: dict | None, src: int, rank: int, group, control, device: torch.device, interrupts: Interrupts
) -> dict | None:
    """`state` (on `src`) as every rank receives it: new tensors elsewhere, `state` on src."""
    tensors: list[torch.Tensor] = []
    skeleton = _flatten(state, tensors) if rank == src else None
    skeleton = broadcast_object(skeleton, src, rank, control, interrupts)
    slots: list[_Slot] = []
    _collect(skeleton, slots)
    if rank != src:
        tensors = [
            torch.empty(s.shape, dtype=getattr(torch, s.dtype), device=device if s.on_device else "cpu")
            for s in sorted(slots, key=lambda s: s.index)
        ]
    for slot in sorted(slots, key=lambda s: s.index):
        t = tensors[slot.index]
        interrupts.wait(dist.broadcast(t, src=src, group=group if slot.on_device else control, async_op=True))
    return state if rank == src else _fill(skeleton, tensors)


def _collect(value, out: list) -> None:
    if isinstance(value, _Slot):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _collect(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect(v, out)
