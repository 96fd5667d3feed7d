"""The torchrun in a PyTorchJob's command (`torchrun ...` or `python -m torch.distributed.run
...`), as `ddpjob convert` carries it into a DDPJob.

The training operator gives torchrun its node-level flags as PET_* variables; a flag in the
command wins over them, as it would over a DDPJob's (contract.py sets the same names). So
the flags a DDPJob sets itself are taken out of the command, each said in a note, instead
of carried over to fight the job's own: the size and rank (`--nnodes`, `--node_rank`), the
master and the rendezvous (`--master_addr`, `--master_port`, `--rdzv_endpoint`,
`--rdzv_id`, and `--rdzv_backend` where it names the backend the DDPJob uses: c10d for an
elastic job, static for another; any other backend has no DDPJob equivalent). Its
`--nproc_per_node` is what the job runs per node: it becomes `spec.nprocPerNode`.

User: cli/pytorchjob.py.
"""

from __future__ import annotations

import os
from typing import Any

from ddpjob.cli.conversion import Conversion

# torchrun's flags, under either spelling, that take a value (the next word unless `=`).
VALUED = {
    "nnodes", "nproc_per_node", "node_rank", "master_addr", "master_port", "rdzv_backend", "rdzv_endpoint",
    "rdzv_id", "rdzv_conf", "max_restarts", "monitor_interval", "start_method", "role", "log_dir", "redirects",
    "tee", "local_ranks_filter", "local_addr", "logs_specs", "rdzv_timeout", "event_log_handler",
    "log_line_prefix_template", "numa_binding", "signals_to_handle", "duplicate_stdout_filters",
    "duplicate_stderr_filters",
}  # fmt: skip
SET_BY_DDPJOB = {
    "nnodes": "spec.nodes (PET_NNODES)",
    "node_rank": "each Pod's index (PET_NODE_RANK)",
    "master_addr": "Pod 0's address (PET_MASTER_ADDR)",
    "master_port": "spec.port (PET_MASTER_PORT)",
    "rdzv_endpoint": "the rendezvous on node 0 (PET_RDZV_ENDPOINT)",
    "rdzv_id": "the rendezvous id, the job's name (PET_RDZV_ID)",
}
MODULES = ("torch.distributed.run", "torch.distributed.launch")


def _start(words: list[str]) -> int | None:
    """Where torchrun's own flags begin in `words`, or None without torchrun."""
    for i, word in enumerate(words):
        if os.path.basename(word) == "torchrun":
            return i + 1
        if word == "-m" and i + 1 < len(words) and words[i + 1] in MODULES:
            return i + 2
    return None


def take_flags(c: Conversion, spec: dict[str, Any], base: str, elastic: bool) -> str | None:
    """Take the flags a DDPJob sets itself out of spec.command/args (`c`: the Conversion,
    `base`: the container's path in the PyTorchJob); the command's `--nproc_per_node`
    value, or None."""
    command, args = spec.get("command") or [], spec.get("args") or []
    if not isinstance(command, list) or not isinstance(args, list):
        return None  # the DDPJob's own check names it
    words = [*command, *args]
    if not all(isinstance(w, str) for w in words) or (i := _start(words)) is None:
        return None
    nproc: str | None = None
    drop: list[int] = []
    while i < len(words) and words[i].startswith("-") and words[i] not in ("-", "--"):
        flag, has_value, value = words[i].lstrip("-").partition("=")
        name = flag.replace("-", "_")
        takes = name in VALUED and not has_value and i + 1 < len(words)
        value, span = (words[i + 1], [i, i + 1]) if takes else (value, [i])
        where = f"{base}.{'command' if i < len(command) else 'args'}[{i if i < len(command) else i - len(command)}]"
        if name == "nproc_per_node":
            nproc, drop = value, drop + span
            c.notes.append(f"dropped {where} {words[i]}: it is spec.nprocPerNode ({value!r})")
        elif name in SET_BY_DDPJOB:
            drop += span
            said = " ".join(words[j] for j in span)
            c.notes.append(f"dropped {where} {said}: a DDPJob sets {SET_BY_DDPJOB[name]} itself")
        elif name == "rdzv_backend":
            ours = "c10d" if elastic else "static"
            if value != ours:
                c.err(where, f"{value!r}: a DDPJob's rendezvous is {ours} on node 0 (PET_RDZV_BACKEND)")
            drop += span
            said = " ".join(words[j] for j in span)
            c.notes.append(f"dropped {where} {said}: a DDPJob sets torchrun's rendezvous itself")
        i = span[-1] + 1
        if name == "standalone":
            c.err(where, "--standalone has no DDPJob equivalent: a DDPJob's rendezvous spans its Pods")
    kept = [w for j, w in enumerate(words) if j not in drop]
    cut = len(command) - sum(1 for j in drop if j < len(command))
    for field, part in (("command", kept[:cut]), ("args", kept[cut:])):
        if part:
            spec[field] = part
        else:
            spec.pop(field, None)
    return nproc
