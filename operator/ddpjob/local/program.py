"""The script a job's command runs, looked for on this machine before `ddpjob run` starts
anything: `ddpjob run` runs the command here, not in the job's image, so a path the
image holds (`/app/train.py`, the my-script example's) is missing here. Said at once, with
the local copy where one lies beside the job file, instead of by every process (and,
under plain torchrun, only after node 0 waited for peers that never came: a minute of
rendezvous retries).

Which word is the script: after `ddpjob-launch` and its options, the program; after a
Python interpreter and its options, the script (not with `-m` or `-c`, except `-m
torch.distributed.run`); after torchrun (`torchrun`, `-m torch.distributed.run`) and its
options, the first word that is no option and ends in `.py`. Relative paths are the
container's working directory's (`spec.workingDir`, else where `ddpjob run` runs).

User: cli/file_commands.py (`ddpjob run`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ddpjob.api.errors import FieldError
from ddpjob.api.spec import DDPJob

_PYTHON = re.compile(r"python[0-9.]*")
_LAUNCH_VALUED = ("--dns-timeout", "--resize")
_PYTHON_VALUED = ("-W", "-X", "-Q")
TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
HINT_DEPTH = 2  # folders below the job file's searched for a file of the script's name


def script_word(words: list[str]) -> int | None:
    """The index of the script in a command line, or None when it names none."""
    i = 0
    if words and os.path.basename(words[0]) == "ddpjob-launch":
        i = 1
        while i < len(words) and words[i].startswith("--"):
            i += 2 if words[i] in _LAUNCH_VALUED else 1
        if i < len(words) and words[i].endswith(".py"):
            return i
    if i < len(words) and _PYTHON.fullmatch(os.path.basename(words[i])):
        i += 1
        while i < len(words) and words[i].startswith("-") and words[i] not in ("-m", "-c"):
            i += 2 if words[i] in _PYTHON_VALUED else 1
        if i < len(words) and words[i] == "-m" and i + 1 < len(words) and words[i + 1] in TORCHRUN_MODULES:
            return _torchrun_script(words, i + 2)
        return i if i < len(words) and not words[i].startswith("-") else None
    if i < len(words) and os.path.basename(words[i]) == "torchrun":
        return _torchrun_script(words, i + 1)
    return None


def _torchrun_script(words: list[str], start: int) -> int | None:
    return next(
        (j for j in range(start, len(words)) if words[j].endswith(".py") and not words[j].startswith("-")), None
    )


def missing_script(job: DDPJob, job_file: str | None) -> FieldError | None:
    """The script the job runs when it is not on this machine, as a field error."""
    command, args = list(job.command or ()), list(job.args)
    words = [*command, *args]
    i = script_word(words)
    if i is None:
        return None
    script = words[i]
    # The image's workingDir, where it exists here (as the runner starts the container).
    base = Path(job.working_dir) if job.working_dir and os.path.isdir(job.working_dir) else Path.cwd()
    if (base / script).exists():
        return None
    path = f"spec.command[{i}]" if i < len(command) else f"spec.args[{i - len(command)}]"
    here = _local_copy(Path(script).name, job_file)
    return FieldError(
        path,
        f"script {script!r} is not on this machine: `ddpjob run` runs the command here, not in the job's image; "
        + (f"give the local copy ({here})" if here else "give its path here"),
    )


def _local_copy(name: str, job_file: str | None) -> str | None:
    """A file of that name in the folders beside the job file (the my-script example keeps
    its script in my-script/ beside my-script.yaml), or None."""
    if not job_file or job_file == "-":
        return None
    folder = Path(job_file).parent
    for depth in range(HINT_DEPTH + 1):
        found = sorted(folder.glob("/".join(["*"] * depth + [name])))
        if found:
            return str(found[0])
    return None
