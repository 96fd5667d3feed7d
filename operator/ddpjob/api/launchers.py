"""The contract for `nprocPerNode > 1`: the trainer container is started ONCE per node,
with WORLD_SIZE = nodes x nprocPerNode and no RANK (only a launcher knows each
process's rank). So its command must be a launcher that starts nprocPerNode processes
(`ddpjob-launch`, `torchrun`, `python -m torch.distributed.run`), or a program that
starts them itself (mp.spawn, a shell script that calls torchrun). A plain training
script would run once per node in a world it cannot fill: the rendezvous waits for
ranks that never come, or, with a script that ignores it, "succeeds" in the wrong world.

ddpjob cannot tell a self-spawning program from a plain script, so it warns (CLI
`validate` and `run`; the operator's Warning Event `NotALauncher`) rather than refuses.
An elastic job's command must be a launcher whatever nprocPerNode is (its world is the
rendezvous'): the same warning. Pure.

A command one letter off a launcher's name (`ddpjob-lanch`) is a typo, not a plain
script: it cannot start at all (exit code 128, StartError, which fails the job at once),
so the warning names the launcher it meant instead of the world it cannot fill.
"""

from __future__ import annotations

import difflib
import os

from ddpjob.api.spec import DDPJob

# What starts nprocPerNode processes; the trainer image's entrypoint is the first.
LAUNCHER_COMMANDS = ("ddpjob-launch", "torchrun")
LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def names_a_launcher(argv: tuple[str, ...] | list[str]) -> bool:
    """True when a launcher appears anywhere in the command line (so `sh -c 'torchrun
    ...'` and `python -m torch.distributed.run` count)."""
    for i, word in enumerate(argv):
        for token in word.split():
            if os.path.basename(token) in LAUNCHER_COMMANDS or token in LAUNCHER_MODULES:
                return True
        if word == "-m" and i + 1 < len(argv) and argv[i + 1] in LAUNCHER_MODULES:
            return True
    return False


def misspelt_launcher(program: str) -> str | None:
    """The launcher `program` is a near miss of (not itself), or None."""
    name = os.path.basename(program)
    close = difflib.get_close_matches(name, LAUNCHER_COMMANDS, n=1, cutoff=0.8)
    return close[0] if close and close[0] != name else None


def world_warning(job: DDPJob) -> str | None:
    """A one-line warning when nprocPerNode > 1, or an elastic job, meets a command that is
    no launcher, or when the command is a misspelt launcher (whatever the job)."""
    if job.command is None or names_a_launcher((*job.command, *job.args)):  # no command: ddpjob-launch
        return None
    meant = misspelt_launcher(job.command[0])
    if meant:
        return (
            f"spec.command: {job.command[0]!r} is no command ddpjob knows; did you mean {meant!r}? "
            "(a command the image does not have cannot start)"
        )
    if job.elastic is not None:
        # The world and the ranks come from torchrun's rendezvous: nothing sets them otherwise.
        return (
            f"spec.elastic: spec.command {job.command[0]!r} is not a launcher ({', '.join(LAUNCHER_COMMANDS)}): "
            "an elastic job's Pods get no WORLD_SIZE or RANK, only torchrun's elastic rendezvous "
            "(PET_*) sets them; use `command: [ddpjob-launch]` or torchrun"
        )
    if job.nproc_per_node <= 1:
        return None
    return (
        f"spec.nprocPerNode: {job.nproc_per_node} processes per node, but spec.command "
        f"{job.command[0]!r} is not a launcher ({', '.join(LAUNCHER_COMMANDS)}): it is started once per "
        f"node with WORLD_SIZE={job.world_size} and no RANK, so it must start {job.nproc_per_node} "
        "processes itself; otherwise use `command: [ddpjob-launch]` or set nprocPerNode: 1"
    )
