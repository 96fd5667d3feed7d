"""What `ddpjob run` refuses before it starts anything, because a job file is input too.

- Symbolic links under the job's directory (`./.ddpjob/<name>`): `--fresh` deletes and
  the final status is written there, so a planted link would make them delete or
  overwrite files elsewhere. Nothing there is a link that ddpjob made, so any link is
  refused, naming it, and the status is written without following links.
- Job `env` other than names known to be harmless: in a Pod it changes only the
  container; here it changes what runs as the user on this machine, and any name may
  be one that some library reads as a path to load code from (`PYTHONPATH`,
  `LD_PRELOAD`, `OPENSSL_CONF`/`OPENSSL_MODULES`, `HOME` with a planted `.local`...).
  A list of dangerous names cannot be complete, so the list is of harmless ones: the
  environment contract's names and defaults, ddpjob's own `DDPJOB_*`, and the numbers
  and switches of `HARMLESS_ENV`. Anything else is refused unless `--allow-env` is given.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ddpjob import contract, text
from ddpjob.api import names
from ddpjob.local.container import LocalRunError

# Each read as a number, a switch, a level or an interface name; none names a file, a
# directory or a module (so not NCCL_DEBUG_FILE, NCCL_NET_PLUGIN, TORCHINDUCTOR_CACHE_DIR,
# HOME, PYTHONWARNINGS, which imports the module of a warning category, or
# PYTHONIOENCODING, which looks a codec up by name).
HARMLESS_ENV = frozenset(
    {
        # threads of the math libraries
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
        "OMP_PROC_BIND",
        "OMP_PLACES",
        "OMP_DYNAMIC",
        "OMP_WAIT_POLICY",
        "KMP_AFFINITY",
        "KMP_BLOCKTIME",
        # Python's switches
        "PYTHONUNBUFFERED",
        "PYTHONHASHSEED",
        "PYTHONFAULTHANDLER",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUTF8",
        "PYTHONOPTIMIZE",
        "PYTHONNODEBUGRANGES",
        # torch, torchrun, NCCL and gloo: logging, timeouts and transports
        "LOGLEVEL",
        "TORCH_CPP_LOG_LEVEL",
        "TORCH_DISTRIBUTED_DEBUG",
        "TORCH_SHOW_CPP_STACKTRACES",
        "TORCH_NCCL_BLOCKING_WAIT",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "TORCH_NCCL_ENABLE_MONITORING",
        "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
        "TORCH_NCCL_DUMP_ON_TIMEOUT",
        "TORCH_NCCL_TRACE_BUFFER_SIZE",
        "NCCL_DEBUG",
        "NCCL_DEBUG_SUBSYS",
        "NCCL_SOCKET_IFNAME",
        "NCCL_IB_DISABLE",
        "NCCL_P2P_DISABLE",
        "NCCL_SHM_DISABLE",
        "NCCL_NET_GDR_LEVEL",
        "NCCL_P2P_LEVEL",
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_MIN_NCHANNELS",
        "NCCL_MAX_NCHANNELS",
        "NCCL_BUFFSIZE",
        "NCCL_NTHREADS",
        "NCCL_TIMEOUT",
        "GLOO_SOCKET_IFNAME",
        "CUDA_LAUNCH_BLOCKING",
        "CUDA_DEVICE_MAX_CONNECTIONS",
        "CUDA_MODULE_LOADING",
        "PYTORCH_NO_CUDA_MEMORY_CACHING",
        "TORCH_ELASTIC_WORKER_IDENTICAL",
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE",
        # libraries' quiet and offline switches
        "TOKENIZERS_PARALLELISM",
        "HF_HUB_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_HUB_DISABLE_TELEMETRY",
        "WANDB_MODE",
        "WANDB_SILENT",
        # the locale and the clock
        "LANG",
        "LC_ALL",
        "TZ",
    }
)
# ddpjob's own names (the launcher's and the trainer's numbers and switches, the tests' hooks).
HARMLESS_PREFIXES = ("DDPJOB_",)


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
    return (
        f"{path} is a symbolic link: ddpjob run follows no links in its job directory "
        "(it deletes and writes files there); remove it, or give this run another --workdir"
    )


def write_no_follow(path: Path, text: str) -> None:
    """Write `text` to `path`, refusing (ELOOP) if `path` is a symbolic link."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise LocalRunError(f"cannot write {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w") as f:
        f.write(text)


def harmless(name: Any) -> bool:
    return isinstance(name, str) and (
        name in HARMLESS_ENV
        or name in contract.RESERVED
        or name in contract.DEFAULT_MEANING
        or name.startswith(HARMLESS_PREFIXES)
    )


def unvetted_env(env: Iterable[Mapping[str, Any]], template: Mapping[str, Any] | None = None) -> list[str]:
    """Field paths (`spec.env[i].name=NAME`) of the entries not known to be harmless:
    `spec.env`, and the env of the template's `trainer` container, which is merged into
    the same container."""
    found = [(f"spec.env[{i}].name", e.get("name")) for i, e in enumerate(env) if isinstance(e, Mapping)]
    spec = template.get("spec") if isinstance(template, Mapping) else None
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    for i, c in enumerate(containers if isinstance(containers, list) else []):
        if isinstance(c, Mapping) and c.get("name") == names.TRAINER_CONTAINER and isinstance(c.get("env"), list):
            found += [
                (f"spec.template.spec.containers[{i}].env[{j}].name", e.get("name"))
                for j, e in enumerate(c["env"])
                if isinstance(e, Mapping)
            ]
    return [f"{path}={text.clean(name, 80)}" for path, name in found if not harmless(name)]


def refuse_unvetted_env(
    env: Iterable[Mapping[str, Any]], allowed: bool, template: Mapping[str, Any] | None = None
) -> None:
    found = unvetted_env(env, template)
    if found and not allowed:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise LocalRunError(
            f"{shown}: on this machine a job's env is limited to names known to be harmless "
            "(the contract's, DDPJOB_*, thread counts, NCCL and torch switches; README: ddpjob run); "
            "any other name may change what code processes load here. "
            "ddpjob run sets it only with --allow-env"
        )
