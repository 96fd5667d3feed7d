"""The private parts of torch and of the interpreter the trainer calls: here only, each
checked before it is used.

No public API does what these do:
- `torch.distributed.distributed_c10d._world.pg_map`, torch's registry of process groups
  (group -> (backend name, store)), and `_abort_process_group`: a resize in place takes
  a broken group out of the registry without waiting for its collectives, and registers a
  shrunk group with the new generation's store (group_reset.py);
- `ProcessGroup._get_backend(device).supports_shrinking`: whether NCCL can shrink the
  communicator in place (group_reset.py);
- `atexit._run_exitfuncs`: the exit handlers the interpreter runs at exit, run before
  `os._exit` on the stop path (quick_exit.py).

They were checked against torch CHECKED_TORCH (tests/trainer/test_private_api.py holds it
to constraints.txt's pin). A torch or Python that renamed or reshaped one is refused with
PrivateAPIChanged naming it: an elastic job checks torch's when its group first forms
(elastic.py), and every call checks its own, so nothing falls back to another path.
"""

from __future__ import annotations

import atexit
import inspect
import re
from collections.abc import Callable
from typing import Any

CHECKED_TORCH = "2.14.1"

C10D = "torch.distributed.distributed_c10d"


class PrivateAPIChanged(Exception):
    """A private name the trainer calls is gone or has another shape in this torch or Python
    (not a RuntimeError: nothing that handles torch's runtime errors may take it for one)."""


def _c10d() -> Any:
    import torch.distributed.distributed_c10d as c10d

    return c10d


def _registry_problem() -> str | None:
    world = getattr(_c10d(), "_world", None)
    prop = inspect.getattr_static(type(world), "pg_map", None)
    if world is None or not isinstance(prop, property) or not isinstance(world.pg_map, dict):
        return f"{C10D}._world.pg_map (a dict of every process group)"
    # The values are rewritten as (backend, store): the shape the annotation names.
    shape = str(inspect.signature(prop.fget).return_annotation) if prop.fget else ""
    if not re.fullmatch(r"dict\[\S*ProcessGroup, tuple\[str, \S*Store\]\]", shape):
        return f"{C10D}._world.pg_map's values as (backend name, store), not {shape or 'unannotated'}"
    return None


def _abort_problem() -> str | None:
    abort = getattr(_c10d(), "_abort_process_group", None)
    if not callable(abort) or list(inspect.signature(abort).parameters) != ["group"]:
        return f"{C10D}._abort_process_group(group=None)"
    return None


def _backend_problem() -> str | None:
    from torch._C._distributed_c10d import Backend, ProcessGroup

    doc = (getattr(getattr(ProcessGroup, "_get_backend", None), "__doc__", None) or "").split("\n", 1)[0]
    if not re.match(r"_get_backend\(self: \S+, device: torch\.device\) -> \S*Backend", doc):
        return "torch.distributed.ProcessGroup._get_backend(device) -> Backend"
    if not isinstance(inspect.getattr_static(Backend, "supports_shrinking", None), property):
        return "torch._C._distributed_c10d.Backend.supports_shrinking"
    return None


TORCH_CHECKS: tuple[Callable[[], str | None], ...] = (_registry_problem, _abort_problem, _backend_problem)


def torch_problems() -> list[str]:
    """The private torch names the resize in place calls that this torch lacks or reshaped."""
    return [found for check in TORCH_CHECKS if (found := check()) is not None]


def require_torch() -> None:
    if problems := torch_problems():
        import torch

        raise PrivateAPIChanged(
            f"torch {torch.__version__} changed what a resize in place calls (checked against torch "
            f"{CHECKED_TORCH}; see ddpjob_trainer/private_api.py): {'; '.join(problems)}"
        )


def group_registry() -> dict:
    """torch's registry of live process groups: group -> (backend name, store)."""
    require_torch()
    return _c10d()._world.pg_map


def abort_process_group(group: Any = None) -> None:
    """Take `group` (None: every group) out of torch's registry, aborting its backend
    (gloo: returns at once; NCCL: ncclCommAbort) without waiting for its collectives."""
    require_torch()
    _c10d()._abort_process_group(group)


def supports_shrinking(group: Any, device: Any) -> bool:
    """Whether `group`'s backend for `device` shrinks in place; RuntimeError when the group
    has no backend for that device."""
    require_torch()
    return bool(group._get_backend(device).supports_shrinking)


def run_exit_handlers() -> None:
    """Every handler atexit holds (logging's flush, multiprocessing's reaping of daemonic
    children, torch's hooks), as the interpreter runs them at exit."""
    run = getattr(atexit, "_run_exitfuncs", None)
    if not callable(run):
        raise PrivateAPIChanged(
            "atexit._run_exitfuncs is gone: the stop path's quick exit cannot run the exit handlers "
            "(see ddpjob_trainer/private_api.py)"
        )
    run()
