"""What `ddpjob run` refuses before it starts anything, because a job file is input too.

- Symbolic links under the job's directory (`./.ddpjob/<name>`): `--fresh` deletes and
  the final status is written there, so a planted link would make them delete or
  overwrite files elsewhere. Nothing there is a link that ddpjob made, so any link is
  refused, naming it, and the status is written without following links.
- Job `env` that changes how this machine's processes load code (`PYTHONPATH`,
  `LD_PRELOAD`, `PATH`, ...): in a Pod it changes only the container; here it changes
  what runs as the user on this machine. Refused unless `--allow-env` is given.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ddpjob.api import names
from ddpjob.local.container import LocalRunError

CODE_LOADING_ENV = ("PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONEXECUTABLE",
                    "PYTHONPLATLIBDIR", "PYTHONBREAKPOINT", "PYTHONWARNINGS", "BASH_ENV", "ENV", "GCONV_PATH",
                    "NODE_OPTIONS", "PERL5LIB", "PERL5OPT", "RUBYOPT")
# Every variable of the dynamic linkers (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, DYLD_*):
# each decides which libraries a process loads, or how.
CODE_LOADING_PREFIXES = ("LD_", "DYLD_")


def refuse_links(workdir: Path) -> None:
    """LocalRunError naming the first symbolic link at or under `workdir`."""
    for path in (workdir.parent, workdir) if workdir.parent.name == ".ddpjob" else (workdir,):
        if path.is_symlink():
            raise LocalRunError(_link(path))
    if not workdir.is_dir():
        return
    for root, dirs, files in os.walk(workdir, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(root) / name
            if path.is_symlink():
                raise LocalRunError(_link(path))


def _link(path: Path) -> str:
    return (f"{path} is a symbolic link: ddpjob run follows no links in its job directory "
            "(it deletes and writes files there); remove it, or give this run another --workdir")


def write_no_follow(path: Path, text: str) -> None:
    """Write `text` to `path`, refusing (ELOOP) if `path` is a symbolic link."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise LocalRunError(f"cannot write {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w") as f:
        f.write(text)


def loads_code(name: Any) -> bool:
    return isinstance(name, str) and (name in CODE_LOADING_ENV or name.startswith(CODE_LOADING_PREFIXES))


def code_loading_env(env: Iterable[Mapping[str, Any]], template: Mapping[str, Any] | None = None) -> list[str]:
    """Field paths (`spec.env[i].name=NAME`) of the entries that change how processes load
    code: `spec.env`, and the env of the template's `trainer` container, which is merged
    into the same container."""
    found = [(f"spec.env[{i}].name", e.get("name")) for i, e in enumerate(env) if isinstance(e, Mapping)]
    spec = template.get("spec") if isinstance(template, Mapping) else None
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    for i, c in enumerate(containers if isinstance(containers, list) else []):
        if isinstance(c, Mapping) and c.get("name") == names.TRAINER_CONTAINER and isinstance(c.get("env"), list):
            found += [(f"spec.template.spec.containers[{i}].env[{j}].name", e.get("name"))
                      for j, e in enumerate(c["env"]) if isinstance(e, Mapping)]
    return [f"{path}={name}" for path, name in found if loads_code(name)]


def refuse_code_loading_env(env: Iterable[Mapping[str, Any]], allowed: bool,
                            template: Mapping[str, Any] | None = None) -> None:
    found = code_loading_env(env, template)
    if found and not allowed:
        raise LocalRunError(f"{', '.join(found)}: changes how processes on this machine load code; "
                            "ddpjob run refuses it unless --allow-env is given")
