"""Where `DDPJobClient` runs jobs, named as Kubeflow Trainer's `TrainerClient` names its
backends, so `TrainerClient(backend_config=...)` ports with its import line:

- `KubernetesBackendConfig(namespace, config_file, context)`: a cluster, through the
  user's kubeconfig (the default; `DDPJobClient(namespace=, kubeconfig=, context=)` says
  the same);
- `LocalProcessBackendConfig(workdir)`: this machine, each job run by `ddpjob run`'s
  runner in a process of its own (its checkpoints under `workdir/<name>`, by default
  `./.ddpjob/<name>` as `ddpjob run` keeps them).

And the container a job runs, as TrainerClient's `CustomTrainerContainer`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class KubernetesBackendConfig:
    namespace: str | None = None  # default: the context's namespace, else `default`
    config_file: str | None = None  # default: $KUBECONFIG, then ~/.kube/config
    context: str | None = None  # default: the current context


@dataclass
class LocalProcessBackendConfig:
    workdir: str | None = None  # default: ./.ddpjob, as `ddpjob run`
    allow_env: bool = False  # `ddpjob run --allow-env`: env names other than the harmless ones


@dataclass
class CustomTrainerContainer:
    """The container every node runs: TrainerClient's `image`, `num_nodes`,
    `resources_per_node` (`{"gpu": N}`, or `nvidia.com/gpu`, becomes `gpusPerNode`; `cpu`
    and `memory` the container's requests and limits) and `env`, and DDPJob's own
    `command`, `args` and `nproc_per_node` (the image's entrypoint runs without a command)."""

    image: str
    num_nodes: int | None = None
    resources_per_node: Mapping[str, Any] | None = None
    env: Mapping[str, str] | None = None
    command: Sequence[str] | None = None
    args: Sequence[str] = field(default_factory=tuple)
    nproc_per_node: int | str = "auto"
