"""The gang schedulers' PodGroup CRDs on the worker's real control plane (a pytest plugin):
`upstream`, parametrized indirectly by the gang's name, is its CRD as the real API server
enforces it (tests/support/real_crd.py), for the objects ddpjob renders for that gang.

Each CRD is the one its pinned release ships (hack/upstream/<name>/go.mod), read from the
module `make gang-schedulers` (or `make test-gangs`) fetched into Go's module cache:
never copied into the project, never fetched here."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

if TYPE_CHECKING:
    from ddpjob_devcluster.controlplane.go_module import Component
    from tests.support.real_crd import RealCRD

# (the module's component name in build.COMPONENTS, the CRD's path in it)
UPSTREAM_CRDS = {
    "volcano": ("volcano", "config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml"),
    "coscheduling": ("scheduler-plugins", "manifests/coscheduling/crd.yaml"),
}


@functools.cache
def module_dir(component: Component) -> Path | str:
    """The module's folder, or why there is none; never fetched here (GOPROXY=off)."""
    from ddpjob_devcluster.controlplane import build
    from ddpjob_devcluster.controlplane.go_module import BuildError

    with pytest.MonkeyPatch.context() as env:
        env.setenv("GOPROXY", "off")
        try:
            return build.module_dir(component)
        except BuildError as exc:
            return str(exc)


@pytest.fixture
def upstream(request: pytest.FixtureRequest) -> Iterator[RealCRD]:
    """The named gang's PodGroup CRD, as the real API server enforces it."""
    import kubernetes

    from ddpjob_devcluster.controlplane import build
    from tests.support import real_crd

    name, path = UPSTREAM_CRDS[request.param]
    component = build.COMPONENTS[name]
    folder = module_dir(component)
    if isinstance(folder, str):
        pytest.skip(f"{component.module} is not in Go's module cache (`make gang-schedulers` fetches it): {folder}")
    crd = yaml.safe_load((folder / path).read_text())
    plane = request.getfixturevalue("control_plane")
    with kubernetes.config.new_client_from_config(str(plane.admin_kubeconfig)) as api:
        real_crd.install(api, crd)
        with real_crd.in_namespace(api, f"{request.param}-{uuid.uuid4().hex[:8]}", crd) as validator:
            yield validator
