"""What `ddpjob run` refuses from a job file and a directory it did not make itself.

A job file (and the `.ddpjob/` directory next to it) may come with a cloned repository.
On a cluster a job's env only reaches its own container; here it reaches processes of the
user who runs it, on their machine. So:

- nothing under `./.ddpjob/<name>` is a symbolic link: a planted link would make `--fresh`
  delete, and the final `status.yaml` or the lock file overwrite, files elsewhere;
- env that changes how local processes find and load code (`PATH`, `PYTHONPATH`,
  `LD_PRELOAD`, ...) is refused unless the user says `--allow-env`, and then named.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from ddpjob.api import names
from ddpjob.api.spec import DDPJob

# Variables that decide which program, module or library a process loads, or run code
# of their own at start: the dynamic linker's, the interpreters', the shells'.
CODE_LOADING_ENV = frozenset({
    "PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONBREAKPOINT", "PYTHONWARNINGS",
    "PYTHONPLATLIBDIR", "PYTHONEXECUTABLE", "BASH_ENV", "ENV", "PERL5LIB", "PERL5OPT", "RUBYOPT", "NODE_OPTIONS",
    "GCONV_PATH", "HOSTALIASES", "TORCH_EXTENSIONS_DIR",
})
CODE_LOADING_PREFIXES = ("LD_", "DYLD_")


def loads_code(name: str) -> bool:
    return name in CODE_LOADING_ENV or name.startswith(CODE_LOADING_PREFIXES)


def code_loading_env(job: DDPJob) -> list[tuple[str, str]]:
    """(field path, variable) of each entry of the job's env that loads code locally:
    `spec.env` and the env of the template's `trainer` container (merged into it)."""
    found = [(f"spec.env[{i}].name", str(e.get("name"))) for i, e in enumerate(job.env)]
    spec = job.template.get("spec") if isinstance(job.template.get("spec"), Mapping) else {}
    for i, c in enumerate(spec.get("containers") or []):
        if isinstance(c, Mapping) and c.get("name") == names.TRAINER_CONTAINER:
            found += [(f"spec.template.spec.containers[{i}].env[{j}].name", str(e.get("name")))
                      for j, e in enumerate(c.get("env") or []) if isinstance(e, Mapping)]
    return [(path, name) for path, name in found if loads_code(name)]


def first_link(workdir: Path, root: Path | None = None) -> Path | None:
    """The first symbolic link among the components of `workdir` below `root` (e.g.
    `.ddpjob` and `.ddpjob/<name>` below the current directory) or anywhere under
    `workdir`; None when there is none. Nothing is followed."""
    if root is not None:
        path = root
        for part in workdir.relative_to(root).parts:
            path = path / part
            if path.is_symlink():
                return path
    # A --workdir the user gave (root None) may itself be a link of their own making.
    if not workdir.exists():
        return None
    for top, dirs, files in os.walk(workdir, followlinks=False):
        for name in sorted(dirs) + sorted(files):
            if os.path.islink(os.path.join(top, name)):
                return Path(top) / name
    return None


def write_file(path: Path, text: str) -> None:
    """Write `path` without following a link there (OSError ELOOP if one was planted)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
